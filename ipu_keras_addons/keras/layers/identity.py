"""RecomputationCheckpoint and AssumeEqualAcrossReplicas: identities carrying a hint.

On the IPU the first stores a value instead of recomputing it under a recomputing pipeline
schedule, the second marks a value as equal on every replica. Neither changes a number,
and the simulator's schedules do not recompute, so both pass their inputs through.
"""
import keras
import tensorflow as tf

from ipu_keras_addons.keras.layers.ipu_layer import serializable


@serializable
class RecomputationCheckpoint(keras.layers.Layer):
    """Checkpoints a tensor (or structure of tensors) for pipeline recomputation."""

    def call(self, inputs, **kwargs):
        del kwargs
        return tf.nest.map_structure(tf.identity, inputs)

    def compute_output_shape(self, input_shape):
        return input_shape


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
