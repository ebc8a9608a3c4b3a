"""IPU TensorFlow Addons for ipu_keras: the IPU layers and optimizers of the original.

Laid out like `ipu_tensorflow_addons`, so that a script ports by changing its imports:
`from ipu_tensorflow_addons.keras import layers as ipu_layers` becomes
`from ipu_keras_addons.keras import layers as ipu_layers`.

`keras` is loaded on first use, so that `ipu_saved_model_cli --help` and its argument
checks do not wait for TensorFlow.
"""
import importlib

__all__ = ["keras"]


def __getattr__(name):
    if name == "keras":
        return importlib.import_module("ipu_keras_addons.keras")
    raise AttributeError(f"module 'ipu_keras_addons' has no attribute '{name}'")
