"""CTCLoss, CTCInferenceLayer and CTCPredictionsLayer: connectionist temporal
classification on time-major data [T, B, C], with any class as the blank.

CTCLoss returns the batch mean of the per-example losses with shape [1] (a model outputs
it and is compiled with a loss that returns y_pred). The inference layers run a beam
search; it uses TensorFlow's CTC beam search decoder, which the simulated device does not
run: use them in eager code or in a model run by Keras on the CPU.
"""
import keras
import tensorflow as tf

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
        loss = tf.nn.ctc_loss(tf.cast(labels, tf.int32), data,
                              tf.cast(tf.reshape(label_length, [-1]), tf.int32),
                              tf.cast(tf.reshape(data_length, [-1]), tf.int32),
                              logits_time_major=True, blank_index=self.blank_index)
        return tf.reshape(tf.reduce_mean(loss), [1])

    def compute_output_shape(self, *args, **kwargs):
        return (1,)

    def get_config(self):
        config = super().get_config()
        config.update({"blank_index": self.blank_index, "from_logits": self.from_logits})
        return config


def _beam_search(data, data_length, blank_index, beam_width, top_paths):
    """(neg log probs [B, P], lengths [B, P], decoded [B, P, T]) by beam search."""
    steps, classes = data.shape[0], data.shape[-1]
    order = [c for c in range(classes) if c != blank_index] + [blank_index]
    moved = tf.gather(data, order, axis=2)  # TensorFlow's decoder wants the blank last
    decoded, log_probs = tf.nn.ctc_beam_search_decoder(
        moved, tf.cast(tf.reshape(data_length, [-1]), tf.int32), beam_width=beam_width,
        top_paths=top_paths)
    batch = tf.shape(data)[1]
    paths, lengths = [], []
    for sparse in decoded:
        dense = tf.sparse.to_dense(sparse, default_value=classes - 1)
        dense = tf.pad(dense, [[0, 0], [0, steps - tf.shape(dense)[1]]],
                       constant_values=classes - 1)
        paths.append(tf.gather(tf.constant(order, tf.int64), dense))
        lengths.append(tf.math.bincount(tf.cast(sparse.indices[:, 0], tf.int32),
                                        minlength=batch, maxlength=batch))
    return (-log_probs, tf.stack(lengths, 1),
            tf.cast(tf.stack(paths, 1), tf.int32))


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
        return _beam_search(data, data_length, self.blank_index, self.beam_width,
                            self.top_paths)

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
