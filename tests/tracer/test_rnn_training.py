"""Training Keras RNNs end to end: `fit` of ipu_keras models with LSTM, GRU and SimpleRNN.

The gradient of a Keras RNN is a second while loop that pops what the forward loop
pushed, including shapes that must be static (`tracer.facts`). Each model trains for
2 steps (2 epochs of one batch) on the simulated IPU and as a plain `keras.Sequential`
on the CPU from the same initial weights; the History and the final weights must agree
within 1e-4 relative (the recurrences accumulate rounding over 5 time steps).
"""
import keras
import numpy as np
import pytest

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T

L = keras.layers
BATCH, STEPS, FEATURES = 4, 5, 3


def _lstm():
    return [L.Input((STEPS, FEATURES)), L.LSTM(4), L.Dense(2)]


def _gru_backwards_sequences():
    return [L.Input((STEPS, FEATURES)), L.GRU(4, return_sequences=True, go_backwards=True),
            L.Flatten(), L.Dense(2)]


def _masked_simple_rnn():
    return [L.Input((STEPS,), dtype="int32"), L.Embedding(7, FEATURES, mask_zero=True),
            L.SimpleRNN(4), L.Dense(2)]


def _inputs(arch, rng):
    if arch is _masked_simple_rnn:
        tokens = rng.integers(1, 7, (BATCH, STEPS)).astype(np.int32)
        for row, length in enumerate((5, 3, 1, 4)):  # padded sequences of varying lengths
            tokens[row, length:] = 0
        return tokens
    return rng.standard_normal((BATCH, STEPS, FEATURES)).astype(np.float32)


def _fit(model, x, y):
    history = model.fit(x, y, epochs=2, batch_size=BATCH, shuffle=False, verbose=0)
    return history.history, model.get_weights()


@pytest.mark.parametrize("arch", [_lstm, _gru_backwards_sequences, _masked_simple_rnn],
                         ids=["LSTM", "GRU-backwards-sequences", "SimpleRNN-masked"])
def test_fit_matches_keras(arch):
    rng = np.random.default_rng(5)
    x, y = _inputs(arch, rng), rng.standard_normal((BATCH, 2)).astype(np.float32)
    keras.utils.set_random_seed(5)
    on_ipu, on_cpu = ipu.Sequential(arch()), keras.Sequential(arch())
    initial = on_ipu.get_weights()
    on_cpu.set_weights(initial)
    on_ipu.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    on_cpu.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", run_eagerly=True)
    (got, got_weights), (expected, expected_weights) = _fit(on_ipu, x, y), _fit(on_cpu, x, y)
    assert isinstance(on_ipu, ipu.keras.IPUTrainerMixin)
    T.FLOAT32.assert_close(got["loss"], expected["loss"])
    for g, e in zip(got_weights, expected_weights):
        T.FLOAT32.assert_close(g, e)
    assert all((g != w).any() for g, w in zip(got_weights, initial))  # every weight trained
