"""PopnnLSTM / PopnnGRU against keras.layers.LSTM / GRU given the same weights: outputs,
states and gradients, batch- and time-major; dropout's mask shared over time."""
import numpy as np
import pytest
import keras
import tensorflow as tf

from ipu_keras.errors import AddonsArgumentError, AddonsUnsupportedArgumentError
from ipu_keras_addons.keras import layers as ipu_layers
from ipu_keras._src.conformance import tolerances

B, T, F, U = 3, 5, 4, 6


@pytest.fixture(scope="module")
def x():
    return np.random.default_rng(0).standard_normal((B, T, F)).astype(np.float32)


def _pair(kind, **kwargs):
    ours = (ipu_layers.PopnnLSTM if kind == "lstm" else ipu_layers.PopnnGRU)(U, **kwargs)
    theirs_kwargs = {k: v for k, v in kwargs.items() if k != "time_major"}
    theirs = (keras.layers.LSTM if kind == "lstm" else keras.layers.GRU)(U, **theirs_kwargs)
    ours.build((B, T, F))
    theirs.build((B, T, F))
    rng = np.random.default_rng(1)
    theirs.set_weights([rng.standard_normal(w.shape).astype(np.float32) * 0.5
                        for w in theirs.get_weights()])
    ours.set_weights(theirs.get_weights())
    return ours, theirs


def _run(layer, x, training):
    weights = layer.trainable_weights
    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = tf.nest.flatten(layer(x, training=training))
        loss = sum(tf.reduce_sum(o * o) for o in out)
    return [o.numpy() for o in out] + [
        tf.convert_to_tensor(g).numpy() for g in tape.gradient(loss, [x] + weights)]


@pytest.mark.parametrize("kind, kwargs", [
    ("lstm", {}),
    ("lstm", {"return_sequences": True, "return_state": True}),
    ("gru", {"return_sequences": True}),
    ("gru", {"reset_after": False, "return_state": True}),
    ("gru", {"reset_after": True, "return_state": True, "activation": "relu"}),
])
@pytest.mark.parametrize("training", [True, False])
def test_equals_keras_with_the_same_weights(x, kind, kwargs, training):
    ours, theirs = _pair(kind, **kwargs)
    if kind == "gru":
        assert ours.biases.shape == ((2, 3 * U) if kwargs.get("reset_after", True)
                                     else (3 * U,))
    for got, want in zip(_run(ours, x, training), _run(theirs, x, training)):
        np.testing.assert_allclose(got, want, **tolerances.FLOAT32.kwargs)


def test_time_major(x):
    ours, theirs = _pair("lstm", return_sequences=True, time_major=True)
    got = np.asarray(ours(np.transpose(x, [1, 0, 2])))
    np.testing.assert_allclose(np.transpose(got, [1, 0, 2]), np.asarray(theirs(x)),
                               **tolerances.FLOAT32.kwargs)


def test_initial_state_and_unit_forget_bias(x):
    ours, theirs = _pair("lstm", return_state=True)
    h0, c0 = (np.random.default_rng(i).standard_normal((B, U)).astype(np.float32)
              for i in (2, 3))
    got = ours(x, initial_state=[h0, c0])
    want = theirs(x, initial_state=[h0, c0])
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), **tolerances.FLOAT32.kwargs)
    fresh = ipu_layers.PopnnLSTM(U)
    fresh.build((B, T, F))
    np.testing.assert_array_equal(np.asarray(fresh.biases), [0] * U + [1] * U + [0] * 2 * U)


def test_dropout_mask_is_shared_over_time(monkeypatch):
    from ipu_keras.ops import rand_ops

    ones = np.ones((B, T, F), np.float32)
    layer = ipu_layers.PopnnGRU(U, dropout=0.5, dropout_seed=[1, 2], kernel_initializer="ones")
    seen = []
    original = rand_ops.regenerating_dropout

    def spy(x, seed, rate, axes):
        seen.append(np.asarray(original(x, seed, rate, axes)))   # eager: [T, B, F]
        return seen[-1]

    monkeypatch.setattr(rand_ops, "regenerating_dropout", spy)
    dropped = np.asarray(layer(ones, training=True))
    # The dropped inputs [T, B, F]: the same mask at every timestep, and not all kept.
    (inputs,) = seen
    for step in inputs[1:]:
        np.testing.assert_array_equal(step, inputs[0])
    assert (inputs[0] == 0).any() and (inputs[0] != 0).any()
    np.testing.assert_array_equal(np.asarray(layer(ones, training=True)), dropped)
    assert not np.allclose(np.asarray(layer(ones, training=False)), dropped)


@pytest.mark.parametrize("kwargs", [
    {"use_bias": False}, {"kernel_regularizer": "l2"}, {"recurrent_dropout": 0.1},
    {"implementation": 3}, {"go_backwards": True}, {"unroll": True},
    {"activation": "elu"}, {"recurrent_activation": "relu"},
])
@pytest.mark.parametrize("cls", [ipu_layers.LSTM, ipu_layers.GRU])
def test_refused_options(cls, kwargs):
    with pytest.raises(AddonsArgumentError, match="Received"):
        cls(U, **kwargs)


def test_mask_is_refused(x):
    with pytest.raises(AddonsUnsupportedArgumentError, match="mask"):
        ipu_layers.PopnnLSTM(U)(x, mask=np.ones((B, T), bool))


def test_stateful_carries_the_state(x):
    layer = ipu_layers.PopnnLSTM(U, stateful=True)
    first = np.asarray(layer(x))
    second = np.asarray(layer(x))
    ours, theirs = _pair("lstm", return_state=True)
    ours.set_weights(layer.get_weights()[:3])
    _, h, c = ours(x)
    np.testing.assert_allclose(first, np.asarray(h), **tolerances.FLOAT32.kwargs)
    np.testing.assert_allclose(second, np.asarray(ours(x, initial_state=[h, c])[0]),
                               **tolerances.FLOAT32.kwargs)


@pytest.mark.parametrize("cls", [ipu_layers.PopnnLSTM, ipu_layers.PopnnGRU])
def test_config_round_trips(cls):
    layer = cls(U, dropout=0.2, dropout_seed=[1, 2], return_sequences=True)
    clone = cls.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
