"""Keras callbacks for models on the simulated IPU.

`IPUTensorBoard` is `keras.callbacks.TensorBoard` that also writes the IPU's figures per
epoch (cycles per step by kind, device time, memory used and free, the fullest tile) and
the execution trace of the last training execution for TensorBoard's profile plugin.
"""
from ipu_keras._src.keras.tensorboard import IPUTensorBoard

__all__ = ["IPUTensorBoard"]
