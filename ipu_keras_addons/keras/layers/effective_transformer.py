"""EffectiveTransformer: multi-head attention over batches of padded scalar sequences.

The original computes, for each sequence pair i of the batch (the `from` and `to` rows,
`from_len[i]` and `to_len[i]` of whose leading elements are real, the rest padding):

- query, key and value embeddings: a Dense layer (with `qkv_activation`) of each real scalar
  element to `num_attention_heads * attention_head_size` values; padding positions embed to
  zero (the original strips the padding, embeds the packed elements and pads back with
  zeros);
- scores `q . k` per head, times the learned `scale` when `use_scale` (no 1/sqrt(d)); the
  softmax runs over all `to` positions of the padded row: a padding key scores 0 and
  carries a zero value (the original applies no key mask), so the padded width of
  `to_sequences` enters the normalisation, the padding's contents never do;
- context = softmax @ v, multiplied by the per-sequence head mask `q_mask`, then attention
  dropout; returned as [B, from_width, heads, head_size];
- output: Dense(`output_layer_size`, `output_activation`) of the flattened context, output
  dropout, then LayerNorm when `layer_norm_output`.

The original processes the batch in "compressed chunks": a while loop packs as many
sequences as fit into `sequences_per_iter` rows' worth of elements (at most
`max_batch_size` sequences) and computes each chunk's attention in a padded buffer of
`max_batch_size` rows. Every sequence's result is independent of the others, so this layer
computes the same numbers from ordinary TensorFlow ops the tracer imports: the embeddings
over the whole padded batch, the attention in static chunks of `max_batch_size` sequences
(when the batch size is known), so that `max_batch_size` bounds the attention scores'
memory as in the original. `sequences_per_iter` is checked and serialized but changes
nothing (the chunks are not packed by length).
"""
import keras
import tensorflow as tf

from ipu_keras_addons.keras.layers.dropout import Dropout
from ipu_keras_addons.keras.layers.ipu_layer import argument_error, serializable
from ipu_keras_addons.keras.layers.normalization import LayerNormalization

_NAME = "EffectiveTransformer"


@serializable
class EffectiveTransformer(keras.layers.Layer):
    """Multi-head attention between two batches of padded sequences, as on the IPU.

    Args:
        output_layer_size: The number of output units.
        max_batch_size: The upper limit on the number of sequences compressed into one
            chunk (the rows of the original's padded buffer).
        use_scale: If True, learn a scalar scale of the attention scores (starts at 1).
        num_attention_heads: The number of attention heads.
        attention_head_size: The size of each attention head.
        sequences_per_iter: The number of full-sequence equivalents processed in each
            chunk; must be less than or equal to `max_batch_size`.
        qkv_activation: Activation of the query, key and value embeddings.
        attention_dropout_prob: Dropout probability applied to the attention context.
        output_activation: Activation of the output layer.
        output_dropout_prob: Dropout probability applied to the layer output.
        layer_norm_output: Whether to apply layer normalisation to the output.
        embedding_initializer: Initializer of the query, key and value kernels.
        embedding_bias_initializer: Initializer of their biases.
        output_initializer: Initializer of the output kernel.
        output_bias_initializer: Initializer of the output bias.

    Call arguments:
        inputs: `[from_sequences, from_sequence_lengths, to_sequences, to_sequence_lengths]`
            and optionally `q_mask`: sequences [B, N] and [B, M] of one dtype, lengths [B]
            or [B, 1] (int), `q_mask` [B, num_attention_heads] (bool or 0/1) multiplying
            each sequence's context per head.
        training: Whether the dropouts apply.

    Returns:
        `(output, context)`: output [B, output_layer_size] and the attention context
        [B, N, num_attention_heads, attention_head_size].
    """

    def __init__(self, output_layer_size, max_batch_size, use_scale=False,
                 num_attention_heads=1, attention_head_size=1, sequences_per_iter=1,
                 qkv_activation=None, attention_dropout_prob=None, output_activation=None,
                 output_dropout_prob=None, layer_norm_output=True,
                 embedding_initializer="glorot_uniform", embedding_bias_initializer="zeros",
                 output_initializer="glorot_uniform", output_bias_initializer="zeros",
                 **kwargs):
        super().__init__(**kwargs)
        for name, value in (("output_layer_size", output_layer_size),
                            ("max_batch_size", max_batch_size),
                            ("num_attention_heads", num_attention_heads),
                            ("attention_head_size", attention_head_size),
                            ("sequences_per_iter", sequences_per_iter)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise argument_error(_NAME, f"a positive integer {name}", **{name: value})
        if sequences_per_iter > max_batch_size:
            raise argument_error(
                _NAME, f"sequences_per_iter <= max_batch_size={max_batch_size} (max_batch_size "
                "must be greater than sequences_per_iter): lower sequences_per_iter or raise "
                "max_batch_size", sequences_per_iter=sequences_per_iter)
        self.output_layer_size = output_layer_size
        self.max_batch_size = max_batch_size
        self.use_scale = bool(use_scale)
        self.num_attention_heads = num_attention_heads
        self.attention_head_size = attention_head_size
        self.sequences_per_iter = sequences_per_iter
        self.qkv_activation = keras.activations.get(qkv_activation)
        self.attention_dropout_prob = attention_dropout_prob
        self.output_activation = keras.activations.get(output_activation)
        self.output_dropout_prob = output_dropout_prob
        self.layer_norm_output = bool(layer_norm_output)
        self.embedding_initializer = keras.initializers.get(embedding_initializer)
        self.embedding_bias_initializer = keras.initializers.get(embedding_bias_initializer)
        self.output_initializer = keras.initializers.get(output_initializer)
        self.output_bias_initializer = keras.initializers.get(output_bias_initializer)
        self._attention_dropout = (None if attention_dropout_prob is None
                                   else Dropout(attention_dropout_prob, name="attention_dropout"))
        self._output_dropout = (None if output_dropout_prob is None
                                else Dropout(output_dropout_prob, name="output_dropout"))

    def _embedding(self, name):
        return keras.layers.Dense(
            self.num_attention_heads * self.attention_head_size,
            activation=self.qkv_activation, kernel_initializer=self.embedding_initializer,
            bias_initializer=self.embedding_bias_initializer, name=name, dtype=self.dtype_policy)

    def build(self, input_shape):
        """Builds the query, key, value and output layers (and scale, layer norm).

        Args:
            input_shape: Four or five shapes: those of `from_sequences`,
                `from_sequence_lengths`, `to_sequences`, `to_sequence_lengths` and
                optionally `q_mask`.
        """
        if not isinstance(input_shape, (list, tuple)) or len(input_shape) not in (4, 5):
            raise argument_error(
                _NAME, "to be built with either four or five input shapes ([from_sequences, "
                "from_sequence_lengths, to_sequences, to_sequence_lengths, optional q_mask])",
                input_shape=input_shape)
        from_width = input_shape[0][1]
        if from_width is None:
            raise argument_error(_NAME, "from_sequences of a known width (shape [B, N])",
                                 input_shape=input_shape)
        self._q_layer = self._embedding("query_layer")
        self._k_layer = self._embedding("key_layer")
        self._v_layer = self._embedding("value_layer")
        for layer in (self._q_layer, self._k_layer, self._v_layer):
            layer.build((None, 1))
        if self.use_scale:
            self._scale = self.add_weight(name="scale", shape=(1,), initializer="ones",
                                          trainable=True)
        self._output_layer = keras.layers.Dense(
            self.output_layer_size, activation=self.output_activation,
            kernel_initializer=self.output_initializer,
            bias_initializer=self.output_bias_initializer, name="output_layer",
            dtype=self.dtype_policy)
        self._output_layer.build(
            (None, from_width * self.num_attention_heads * self.attention_head_size))
        self._output_layer_norm = None
        if self.layer_norm_output:
            self._output_layer_norm = LayerNormalization(name="output_layer_norm",
                                                         dtype=self.dtype_policy)
            self._output_layer_norm.build((None, self.output_layer_size))
        self.built = True

    def call(self, inputs, training=None):
        """Attention from `from_sequences` to `to_sequences`; returns (output, context)."""
        from_seq, from_len, to_seq, to_len, q_mask = self._checked_inputs(inputs)
        heads, size = self.num_attention_heads, self.attention_head_size
        q = self._embed(self._q_layer, from_seq, from_len)
        k = self._embed(self._k_layer, to_seq, to_len)
        v = self._embed(self._v_layer, to_seq, to_len)
        rows, chunk = from_seq.shape[0], self.max_batch_size
        if rows is None or rows <= chunk:
            context = self._attend(q, k, v)
        else:
            context = tf.concat([self._attend(q[s:s + chunk], k[s:s + chunk], v[s:s + chunk])
                                 for s in range(0, rows, chunk)], 0)
        context = context * tf.cast(q_mask, context.dtype)[:, None, :, None]
        if self._attention_dropout is not None:
            context = self._attention_dropout(context, training=training)
        flat = tf.reshape(context, [-1, context.shape[1] * heads * size])
        output = self._output_layer(flat)
        if self._output_dropout is not None:
            output = self._output_dropout(output, training=training)
        if self._output_layer_norm is not None:
            output = self._output_layer_norm(output, training=training)
        return output, context

    def _attend(self, q, k, v):
        """Context [b, N, heads, head_size] of queries [b, N, ...] over keys/values [b, M, ...]."""
        scores = tf.einsum("bqhd,bkhd->bhqk", q, k)
        if self.use_scale:
            scores = scores * tf.cast(self._scale, scores.dtype)
        return tf.einsum("bhqk,bkhd->bqhd", tf.nn.softmax(scores, axis=-1), v)

    def _embed(self, layer, sequences, lengths):
        """[B, N] scalars -> [B, N, heads, head_size], zero at padding positions."""
        width = sequences.shape[1]
        embedded = layer(tf.expand_dims(tf.cast(sequences, layer.compute_dtype), -1))
        valid = tf.range(width)[None, :] < tf.cast(lengths, tf.int32)[:, None]
        embedded = embedded * tf.cast(valid, embedded.dtype)[:, :, None]
        return tf.reshape(embedded, [-1, width, self.num_attention_heads,
                                     self.attention_head_size])

    def _checked_inputs(self, inputs):
        """The five inputs (lengths flattened to [B], q_mask all ones by default), with the
        original's consistency checks as designed errors."""
        if not isinstance(inputs, (list, tuple)) or len(inputs) not in (4, 5):
            count = len(inputs) if isinstance(inputs, (list, tuple)) else 1
            raise argument_error(_NAME, "either four or five inputs", len_inputs=count)
        from_seq, from_len, to_seq, to_len = (tf.convert_to_tensor(x) for x in inputs[:4])
        if from_seq.shape.rank != to_seq.shape.rank or from_seq.shape.rank != 2:
            raise argument_error(
                _NAME, "from_sequences and to_sequences of equal rank 2 ([B, N] and [B, M]; "
                "from_sequences and to_sequences must be equal rank)",
                shapes=(tuple(from_seq.shape), tuple(to_seq.shape)))
        batch = from_seq.shape[0]
        if not _same_size(batch, to_seq.shape[0]):
            raise argument_error(
                _NAME, "from_sequences and to_sequences that must contain an equal number of "
                "sequences", shapes=(tuple(from_seq.shape), tuple(to_seq.shape)))
        from_len, to_len = _lengths(from_len), _lengths(to_len)
        if not (_same_size(from_len.shape[0], batch) and from_len.shape == to_len.shape):
            raise argument_error(
                _NAME, "from_sequence_lengths and to_sequence_lengths that have lengths "
                "equal to the number of sequences provided",
                length_shapes=(tuple(from_len.shape), tuple(to_len.shape)))
        if from_seq.dtype != to_seq.dtype:
            raise argument_error(
                _NAME, "from_sequences and to_sequences that must be equal types",
                dtypes=(from_seq.dtype.name, to_seq.dtype.name))
        if len(inputs) == 5 and inputs[4] is not None:
            q_mask = tf.convert_to_tensor(inputs[4])
            wanted = (batch, self.num_attention_heads)
            if len(q_mask.shape) != 2 or not all(
                    _same_size(a, b) for a, b in zip(q_mask.shape, wanted)):
                raise argument_error(
                    _NAME, f"a q_mask that must have shape [num_sequences, "
                    f"num_attention_heads] = {list(wanted)}", q_mask_shape=tuple(q_mask.shape))
        else:
            q_mask = tf.ones([tf.shape(from_seq)[0], self.num_attention_heads])
        return from_seq, from_len, to_seq, to_len, q_mask

    def compute_output_spec(self, inputs, training=None):
        from_seq = inputs[0]
        out = keras.KerasTensor((from_seq.shape[0], self.output_layer_size),
                                dtype=self.compute_dtype)
        context = keras.KerasTensor((from_seq.shape[0], from_seq.shape[1],
                                     self.num_attention_heads, self.attention_head_size),
                                    dtype=self.compute_dtype)
        return out, context

    def get_config(self):
        config = super().get_config()
        serialize = keras.initializers.serialize
        config.update({
            "output_layer_size": self.output_layer_size,
            "max_batch_size": self.max_batch_size,
            "use_scale": self.use_scale,
            "num_attention_heads": self.num_attention_heads,
            "attention_head_size": self.attention_head_size,
            "sequences_per_iter": self.sequences_per_iter,
            "qkv_activation": keras.activations.serialize(self.qkv_activation),
            "attention_dropout_prob": self.attention_dropout_prob,
            "output_activation": keras.activations.serialize(self.output_activation),
            "output_dropout_prob": self.output_dropout_prob,
            "layer_norm_output": self.layer_norm_output,
            "embedding_initializer": serialize(self.embedding_initializer),
            "embedding_bias_initializer": serialize(self.embedding_bias_initializer),
            "output_initializer": serialize(self.output_initializer),
            "output_bias_initializer": serialize(self.output_bias_initializer),
        })
        return config


def _same_size(a, b):
    """Two static dimensions agree (an unknown one agrees with anything)."""
    return a is None or b is None or a == b


def _lengths(lengths):
    """Sequence lengths as [B]: accepts [B] or [B, 1]."""
    if lengths.shape.rank == 2 and lengths.shape[1] == 1:
        return tf.reshape(lengths, [-1])
    return lengths
