"""RecomputationCheckpoint: an identity that marks values to store, not recompute.

It takes effect with recomputation on (`IPUConfig.allow_recompute`) in a pipeline whose
recomputation mode is RecomputeAndBackpropagateInterleaved
(`pipelining_ops.recomputation_checkpoint`); no number changes.
"""
import keras

from ipu_keras.ops.pipelining_ops import recomputation_checkpoint

from ipu_keras_addons.keras.layers.ipu_layer import serializable


@serializable
class RecomputationCheckpoint(keras.layers.Layer):
    """Checkpoints a tensor (or structure of tensors) for pipeline recomputation."""

    def call(self, inputs, **kwargs):
        del kwargs
        return recomputation_checkpoint(inputs)

    def compute_output_shape(self, input_shape):
        return input_shape
