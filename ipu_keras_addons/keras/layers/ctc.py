"""CTCLoss, CTCInferenceLayer and CTCPredictionsLayer: connectionist temporal
classification on time-major data [T, B, C], with any class as the blank.

CTCLoss returns the batch mean of the per-example losses with shape [1] (a model outputs
it and is compiled with a loss that returns y_pred); it is PopLibs' CTC loss op
(`ipu.nn_ops`, `ops/ctc.py`), which makes the loss and its gradient in one pass. The
inference layers run the CTC beam search op (TensorFlow's decoder's numbers).
"""
import keras
import tensorflow as tf

from ipu_keras.ops import nn_ops
from ipu_keras_addons.keras.layers.ipu_layer import serializable


@serializable
class CTCLoss(keras.layers.Layer):
    """Computes the CTC loss, averaged over the batch, as a tensor of shape [1].

    Args:
        blank_index: The class index of the blank label.
        from_logits: Whether `data` are logits (True) or log probabilities (False).
    """

    def __init__(self, blank_index=0, from_logits=False, **kwargs):
        super().__init__(**kwargs)
        self.blank_index = blank_index
        self.from_logits = from_logits

    def call(self, labels, data, label_length, data_length, **kwargs):
        """Args: labels [B, max label length] int, data [T, B, C] (time-major),
        label_length [B], data_length [B]. Returns: the mean loss, shape [1]."""
        del kwargs
        if not self.from_logits:
            data = tf.nn.log_softmax(data, axis=-1)  # identity on log probabilities
        loss = nn_ops.ctc_loss_and_gradient(labels, data, label_length, data_length,
                                            self.blank_index)
        return tf.reshape(tf.reduce_mean(loss), [1])

    def compute_output_shape(self, *args, **kwargs):
        return (1,)

    def get_config(self):
        config = super().get_config()
        config.update({"blank_index": self.blank_index, "from_logits": self.from_logits})
        return config


@serializable
class CTCInferenceLayer(keras.layers.Layer):
    """Decodes time-major data [T, B, C] by CTC beam search.

    Args:
        blank_index: The class index of the blank label.
        beam_width: The beam width.
        top_paths: The number of paths to return.
        from_logits: Whether `data` are logits (True) or log probabilities (False).
    """

    def __init__(self, blank_index=0, beam_width=100, top_paths=1, from_logits=False,
                 **kwargs):
        super().__init__(**kwargs)
        self.blank_index = blank_index
        self.beam_width = beam_width
        self.top_paths = top_paths
        self.from_logits = from_logits

    def call(self, data, data_length, **kwargs):
        """Returns (negative log probabilities [B, top_paths], lengths [B, top_paths],
        decoded labels [B, top_paths, T], filled with blank_index past each length)."""
        del kwargs
        if self.from_logits:
            data = tf.nn.log_softmax(data, axis=-1)
        return nn_ops.ctc_beam_search_decoder_with_log_probs(
            data, data_length, self.beam_width, self.top_paths, self.blank_index)

    def get_config(self):
        config = super().get_config()
        config.update({"blank_index": self.blank_index, "beam_width": self.beam_width,
                       "top_paths": self.top_paths, "from_logits": self.from_logits})
        return config


@serializable
class CTCPredictionsLayer(CTCInferenceLayer):
    """The most likely CTC beam-search prediction [B, T] of time-major data [T, B, C],
    filled with `blank_index` past its length. Arguments as `CTCInferenceLayer`."""

    def call(self, data, data_length, **kwargs):
        neg_log_probs, lengths, decoded = super().call(data, data_length, **kwargs)
        best = tf.argmin(neg_log_probs, axis=1, output_type=tf.int32)
        predictions = tf.gather(decoded, best, axis=1, batch_dims=1)
        length = tf.gather(lengths, best, axis=1, batch_dims=1)
        positions = tf.range(tf.shape(predictions)[1])[None, :]
        return tf.where(positions < length[:, None], predictions,
                        tf.fill(tf.shape(predictions), tf.constant(self.blank_index)))
