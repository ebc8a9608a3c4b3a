"""Catalogue sections: recurrent layers, attention and embedding."""
from keras import layers as L
from keras import ops

from ipu_keras._src.conformance.item import (
    Item, on, padded_sequence_data, padded_token_data, token_data,
)

SEQ = (5, 3)  # time steps, features


def _rnn(body, name, shape=SEQ, **kwargs):
    return on(shape, body, name, "recurrent", **kwargs)


def _tokens(body, name, group, padded=False, length=6):
    """A token classifier: `body(inputs)` to (batch, features), then a softmax head."""
    data = padded_token_data if padded else token_data
    return Item(name, group, lambda x: L.Dense(2, activation="softmax")(body(x)),
                lambda: data(length), (length,), input_dtype="int32",
                loss="sparse_categorical_crossentropy")


def _with_states(layer):
    def body(x):
        outputs = layer()(x)
        return L.Concatenate()(outputs)
    return body


def recurrent():
    items = []
    for cell in (L.SimpleRNN, L.LSTM, L.GRU):
        n = cell.__name__
        items += [
            _rnn(lambda x, c=cell: c(4)(x), n, partial_batch=cell is L.LSTM),
            _rnn(lambda x, c=cell: c(4, return_sequences=True)(x), f"{n} (return_sequences)"),
            _rnn(_with_states(lambda c=cell: c(4, return_state=True)), f"{n} (return_state)"),
            _rnn(lambda x, c=cell: c(4, go_backwards=True)(x), f"{n} (go_backwards)"),
            _rnn(lambda x, c=cell: c(4)(L.Masking()(x)), f"{n} (Masking)",
                 data=lambda: padded_sequence_data(SEQ, (3,))),
            _tokens(lambda x, c=cell: c(4)(L.Embedding(20, 3, mask_zero=True)(x)),
                    f"{n} (mask_zero)", "recurrent", padded=True),
            _rnn(lambda x, c=cell: c(4, unroll=True)(x), f"{n} (unroll)"),
        ]
    items += [
        _rnn(lambda x: L.GRU(4, reset_after=False)(x), "GRU (reset_after=False)"),
        _rnn(lambda x: L.LSTM(4, dropout=0.2, recurrent_dropout=0.2)(x),
             "LSTM (dropout, recurrent_dropout)"),
        _rnn(lambda x: L.LSTM(4, return_sequences=True, go_backwards=True)(L.Masking()(x)),
             "LSTM (Masking, go_backwards, return_sequences)",
             data=lambda: padded_sequence_data(SEQ, (3,))),
        _rnn(lambda x: L.RNN(L.StackedRNNCells([L.GRUCell(4), L.LSTMCell(3)]))(x),
             "RNN (StackedRNNCells)"),
        _rnn(lambda x: L.Bidirectional(L.LSTM(4))(x), "Bidirectional (LSTM)"),
        _rnn(lambda x: L.Bidirectional(L.GRU(4, return_sequences=True), merge_mode="sum")(x),
             "Bidirectional (GRU, sum, return_sequences)"),
        _rnn(lambda x: L.Bidirectional(L.SimpleRNN(3))(L.Masking()(x)),
             "Bidirectional (SimpleRNN, Masking)",
             data=lambda: padded_sequence_data(SEQ, (3,))),
        _rnn(lambda x: L.TimeDistributed(L.Dense(4, activation="tanh"))(x),
             "TimeDistributed (Dense)"),
        _rnn(lambda x: L.TimeDistributed(L.Conv2D(2, 2))(x), "TimeDistributed (Conv2D)",
             shape=(3, 4, 4, 2)),
        _rnn(lambda x: L.ConvLSTM2D(2, 2)(x), "ConvLSTM2D", shape=(3, 4, 4, 2)),
        _rnn(lambda x: L.ConvLSTM2D(2, 3, padding="same", return_sequences=True)(x),
             "ConvLSTM2D (same, return_sequences)", shape=(3, 4, 4, 2)),
        _rnn(lambda x: L.ConvLSTM1D(2, 2)(x), "ConvLSTM1D", shape=(3, 5, 2)),
    ]
    return items


def _qv(x):
    return L.Dense(6)(x), L.Dense(6, activation="tanh")(x)


def _embedded(mask_zero=False):
    return lambda x: L.Embedding(20, 6, mask_zero=mask_zero)(x)


def _pooled(body):
    return lambda x: L.GlobalAveragePooling1D()(body(x))


def _explicit_mask(x):
    """MultiHeadAttention with an attention_mask computed from the tokens (no padding keys)."""
    h = _embedded()(x)
    keep = ops.not_equal(x, 0)
    mask = ops.logical_and(keep[:, :, None], keep[:, None, :])
    return L.MultiHeadAttention(2, 3)(h, h, attention_mask=mask)


def attention_and_embedding():
    g = "attention and embedding"
    mha = L.MultiHeadAttention
    seq = (5, 6)
    return [
        _tokens(lambda x: L.GlobalAveragePooling1D()(L.Embedding(20, 4)(x)), "Embedding", g),
        _tokens(lambda x: L.GlobalAveragePooling1D()(L.Embedding(20, 4, mask_zero=True)(x)),
                "Embedding (mask_zero)", g, padded=True),
        _tokens(lambda x: L.Flatten()(L.Embedding(20, 4, embeddings_regularizer="l2")(x)),
                "Embedding (regularizer)", g),
        on(seq, lambda x: mha(2, 3)(x, x), "MultiHeadAttention", g, partial_batch=True),
        on(seq, lambda x: mha(2, 3, value_dim=2, output_shape=4)(*_qv(x), key=x),
           "MultiHeadAttention (key, value_dim, output_shape)", g),
        on(seq, lambda x: mha(2, 3)(x, x, use_causal_mask=True),
           "MultiHeadAttention (causal mask)", g),
        on(seq, lambda x: mha(2, 3, dropout=0.3)(x, x), "MultiHeadAttention (dropout)", g),
        _tokens(_pooled(lambda x: (lambda h: mha(2, 3)(h, h))(_embedded(True)(x))),
                "MultiHeadAttention (padding mask)", g, padded=True),
        _tokens(_pooled(_explicit_mask), "MultiHeadAttention (attention_mask)", g, padded=True),
        on(seq, lambda x: L.Attention()(list(_qv(x))), "Attention", g),
        on(seq, lambda x: L.Attention(use_scale=True, score_mode="concat")(list(_qv(x))),
           "Attention (scale, concat)", g),
        on(seq, lambda x: L.Attention()(list(_qv(x)), use_causal_mask=True),
           "Attention (causal mask)", g),
        _tokens(_pooled(lambda x: (lambda h: L.Attention()([h, h]))(_embedded(True)(x))),
                "Attention (padding mask)", g, padded=True),
        on(seq, lambda x: L.AdditiveAttention()(list(_qv(x))), "AdditiveAttention", g),
        _tokens(_pooled(lambda x: (lambda h: L.AdditiveAttention()([h, h]))(
            _embedded(True)(x))), "AdditiveAttention (padding mask)", g, padded=True),
        on(seq, lambda x: L.GroupQueryAttention(3, 4, 2)(x, x), "GroupQueryAttention", g),
        on(seq, lambda x: L.GroupQueryAttention(3, 4, 2)(x, x, use_causal_mask=True),
           "GroupQueryAttention (causal mask)", g),
    ]

