"""AssumeEqualAcrossReplicas: an identity that marks a value as equal on every replica.

On the IPU it avoids divergent-control-flow errors; it changes no number, so it passes its
inputs through.
"""
import keras
import tensorflow as tf

from ipu_keras_addons.keras.layers.ipu_layer import serializable


@serializable
class AssumeEqualAcrossReplicas(keras.layers.Layer):
    """Marks a tensor (or structure) as equal on every replica.

    Args:
        inplace: Whether the original marks the value in place (no numerical effect).
    """

    def __init__(self, inplace=False, **kwargs):
        super().__init__(**kwargs)
        self.inplace = inplace

    def call(self, inputs, **kwargs):
        del kwargs
        return tf.nest.map_structure(tf.identity, inputs)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config["inplace"] = self.inplace
        return config
