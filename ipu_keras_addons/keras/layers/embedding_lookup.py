"""Embedding as on the IPU: a gather split into `serialization_factor` sub-lookups.

Each sub-lookup reads one slice of the table's rows; the pieces are summed, which gives
exactly a plain gather (each index hits one slice, the others contribute zeros).
"""
import keras
import tensorflow as tf

from ipu_keras_addons.keras.layers.ipu_layer import IPULayer, argument_error, serializable


def serialized_gather(table, ids, factor):
    """`tf.gather(table, ids)` as `factor` lookups into row slices of `table`."""
    if factor == 1:
        return tf.gather(table, ids)
    rows = table.shape[0] // factor
    with tf.name_scope("serialized_gather"):
        out = None
        for i, piece in enumerate(tf.split(table, factor, axis=0)):
            local = ids - i * rows
            inside = tf.logical_and(local >= 0, local < rows)
            found = tf.gather(piece, tf.where(inside, local, tf.zeros_like(local)))
            found = found * tf.cast(inside, table.dtype)[..., None]
            out = found if out is None else out + found
        return out


@serializable
class Embedding(IPULayer):
    """Embedding layer optimized for the IPU: maps [batch, length] ids to vectors.

    Args:
        input_dim: Size of the vocabulary (largest id + 1).
        output_dim: Dimension of the dense embedding.
        embeddings_initializer: Initializer for the `embeddings` matrix.
        embeddings_regularizer: Not supported (API consistency); must be None.
        activity_regularizer: Not supported; must be None.
        embeddings_constraint: Not supported; must be None.
        mask_zero: Not supported; must be False.
        input_length: Not supported; must be None.
        serialization_factor: Number of sub-lookups, splitting the table's rows; it must
            divide `input_dim`.
    """

    def __init__(self, input_dim, output_dim, embeddings_initializer="uniform",
                 embeddings_regularizer=None, activity_regularizer=None,
                 embeddings_constraint=None, mask_zero=False, input_length=None,
                 serialization_factor=1, **kwargs):
        kwargs["autocast"] = False
        super().__init__(**kwargs)
        self._check_unsupported(embeddings_regularizer, "embeddings_regularizer")
        self._check_unsupported(activity_regularizer, "activity_regularizer")
        self._check_unsupported(embeddings_constraint, "embeddings_constraint")
        self._check_unsupported(mask_zero, "mask_zero")
        self._check_unsupported(input_length, "input_length")
        if serialization_factor < 1 or input_dim % serialization_factor:
            raise argument_error("Embedding", f"serialization_factor >= 1 dividing "
                                 f"input_dim={input_dim}",
                                 serialization_factor=serialization_factor)
        self.input_dim = input_dim
        self.output_dim = output_dim
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.serialization_factor = serialization_factor

    def build(self, input_shape):
        if len(input_shape) != 2:
            raise argument_error("Embedding", "inputs of shape [batch, input_length]",
                                 input_shape=input_shape)
        self.embeddings = self.add_weight(name="embeddings",
                                          shape=(self.input_dim, self.output_dim),
                                          initializer=self.embeddings_initializer)

    def call(self, inputs, inputs_are_sorted=False, training=None):
        del inputs_are_sorted, training  # Hints for the IPU's planner; no numerical effect.
        ids = tf.cast(inputs, tf.int32)
        return serialized_gather(self.embeddings, ids, self.serialization_factor)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape) + (self.output_dim,)

    def get_config(self):
        config = super().get_config()
        config.update({
            "input_dim": self.input_dim, "output_dim": self.output_dim,
            "embeddings_initializer":
                keras.initializers.serialize(self.embeddings_initializer),
            "serialization_factor": self.serialization_factor,
        })
        return config
