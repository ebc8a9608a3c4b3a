"""The TensorFlow 1 part of IPU TensorFlow Addons (`ipu_tensorflow_addons.v1`).

`from ipu_tensorflow_addons.v1 import layers` becomes
`from ipu_keras_addons.v1 import layers`. `layers` is loaded on first use.
"""
import importlib

__all__ = ["layers"]


def __getattr__(name):
    if name == "layers":
        return importlib.import_module("ipu_keras_addons.v1.layers")
    raise AttributeError(f"module 'ipu_keras_addons.v1' has no attribute '{name}'")
