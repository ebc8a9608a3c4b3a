"""IPU TensorFlow Addons for ipu_keras: the IPU layers and optimizers of the original.

Laid out like `ipu_tensorflow_addons`, so that a script ports by changing its imports:
`from ipu_tensorflow_addons.keras import layers as ipu_layers` becomes
`from ipu_keras_addons.keras import layers as ipu_layers`.
"""
from ipu_keras_addons import keras

__all__ = ["keras"]
