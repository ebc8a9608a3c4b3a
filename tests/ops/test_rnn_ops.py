"""The 'rnn' op family (PopLibs' fused LSTM and GRU) against TensorFlow on the CPU.

The addons layers call the fused ops; TensorFlow runs their loops on the CPU, the
simulator the one op per pass. Outputs and final states, then the gradients of the
inputs, the initial states and the weights (the backward op), for LSTM and GRU (both
`reset_after`), one and several timesteps, and the other activations; the IR holds
one op per pass and no loop; the cycles grow linearly with the timesteps.
"""
import keras
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.tracer import trace
from ipu_keras_addons.keras import layers as ipu_layers
from tests.ops.harness import case, check_case, f32

B, F, U = 3, 4, 5


def _layer(kind, **kwargs):
    keras.utils.set_random_seed(1)
    cls = ipu_layers.PopnnLSTM if kind == "LSTM" else ipu_layers.PopnnGRU
    layer = cls(U, return_sequences=True, return_state=True, time_major=True,
                bias_initializer="glorot_uniform", **kwargs)
    layer.build((None, B, F))
    return layer


def _forward(kind, **kwargs):
    layer = _layer(kind, **kwargs)
    return lambda x, *states: layer(x, initial_state=list(states))


def _backward(kind, **kwargs):
    layer = _layer(kind, **kwargs)

    def fn(x, *states):
        with tf.GradientTape() as tape:
            tape.watch([x, *states])
            out = layer(x, initial_state=list(states))
            w = tf.cast(tf.range(tf.size(out[0])) % 3 + 1, out[0].dtype)
            loss = (tf.reduce_sum(tf.reshape(out[0], [-1]) * w)
                    + tf.reduce_sum(out[-1] * out[-1]))
        return tape.gradient(loss, [x, *states] + layer.trainable_variables)

    return fn


def _case(kind, steps, grad=False, label="", **kwargs):
    states = [f32(B, U) for _ in range(2 if kind == "LSTM" else 1)]
    op = f"Popnn{kind}Layer" + ("Backprop" if grad else "")
    fn = (_backward if grad else _forward)(kind, **kwargs)
    return case(op, fn, f32(steps, B, F), *states, tolerance=T.FLOAT32_DENSE_GRAD_24,
                label=f"{steps}-steps{label}")


CASES = [
    _case("LSTM", 1), _case("LSTM", 6),
    _case("LSTM", 4, activation="relu", recurrent_activation="hard_sigmoid", label="-relu"),
    _case("GRU", 1), _case("GRU", 6), _case("GRU", 5, reset_after=False, label="-reset-before"),
    _case("GRU", 4, activation="sigmoid", recurrent_activation="tanh", label="-sigmoid"),
    _case("LSTM", 1, grad=True), _case("LSTM", 6, grad=True),
    _case("LSTM", 4, grad=True, activation="softmax", recurrent_activation="hard_sigmoid",
          label="-softmax"),
    _case("GRU", 1, grad=True), _case("GRU", 6, grad=True),
    _case("GRU", 5, grad=True, reset_after=False, label="-reset-before"),
    _case("GRU", 4, grad=True, activation="relu", recurrent_activation="softmax",
          label="-relu"),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_matches_tensorflow(c):
    check_case(c)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_the_ir_holds_one_op_per_pass_and_no_loop(kind):
    states = [f32(B, U) for _ in range(2 if kind == "LSTM" else 1)]
    graph = trace(_backward(kind), [f32(6, B, F)] + states).graph
    ops = [eqn.op for eqn in graph.walk()]
    name = f"popnn_{kind.lower()}"
    assert ops.count(name) == 1 and ops.count(f"{name}_grad") == 1
    assert "while" not in ops


def test_the_cycles_grow_linearly_with_the_timesteps():
    layer = _layer("LSTM")
    cycles = {}
    for steps in (4, 8, 16):
        ipu.ipu_compiler.compile(lambda x: layer(x)[0], [f32(steps, B, F)])
        cycles[steps] = ipu.profiling.last_report().cycles["compute"]
    assert cycles[4] < cycles[8] < cycles[16]
    ratio = (cycles[16] - cycles[8]) / (cycles[8] - cycles[4])
    assert 1.5 < ratio < 2.5, cycles
