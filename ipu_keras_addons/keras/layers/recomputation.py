"""RecomputationCheckpoint: an identity that marks values to store, not recompute.

On the IPU it takes effect under the pipeline schedule RecomputeAndBackpropagateInterleaved;
the simulator's schedules do not recompute, and no number changes, so it passes its inputs
through.
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
