"""Recomputation outside pipelines: IPU TensorFlow's Conv -> Norm -> non-linearity chains.

A training step of two conv -> fused batch norm -> relu layers (tf.compat.v1's
`fused_batch_norm`, the norm Graphcore's CNNs use), gradients by `tf.GradientTape`,
compiled with and without `IPUConfig.allow_recompute`. With it, the first layer's conv
output and relu output, which its norm's gradient, its relu's gradient and the second
conv's filter gradient read, are recomputed before them (ConvNormNL); the second
layer's relu output feeds no backward conv, so only its conv is recomputed (ConvNorm).
At the first backward step both conv outputs ([4, 16, 16, 16] float32) and the norms'
saved statistics are no longer live; the first relu's output still is, as the input
the second conv's copy recomputes from. The gradients are the same bits.
"""
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.driver import executor
from tests.conftest import configured

SHAPE = (4, 16, 16, 16)


def _step(recompute):
    with configured(1, 32, allow_recompute=recompute):
        rng = np.random.default_rng(5)
        kernels = [tf.Variable(rng.normal(size=s).astype("float32") * 0.2)
                   for s in ((3, 3, 8, 16), (3, 3, 16, 16))]
        scale, offset = tf.Variable(tf.ones(16)), tf.Variable(tf.zeros(16))
        x = rng.normal(size=SHAPE[:3] + (8,)).astype("float32")

        def layer(h, kernel):
            h = tf.nn.conv2d(h, kernel, 1, "SAME")
            return tf.nn.relu(tf.compat.v1.nn.fused_batch_norm(h, scale, offset)[0])

        def step(images):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(layer(layer(images, kernels[0]), kernels[1]))
            return tape.gradient(loss, kernels + [scale, offset])

        strategy = ipu.ipu_strategy.IPUStrategy()
        with strategy.scope():
            grads = strategy.run(tf.function(step), args=(x,))
        return [g.numpy() for g in grads], executor.last_compiled().executable


@pytest.fixture(scope="module")
def steps():
    return _step(False), _step(True)


def test_the_chains_run_again_before_the_backward_pass(steps):
    (_, off), (_, on) = steps
    count = {}
    for exe in (off, on):
        labels = exe.info["liveness_steps"]
        count[exe is on] = {op: labels.count(op) for op in ("conv", "batch_norm", "relu")}
    assert count[False] == {"conv": 2, "batch_norm": 2, "relu": 2}
    assert count[True] == {"conv": 4, "batch_norm": 4, "relu": 3}


def test_the_recomputed_values_are_not_live_at_the_first_backward_step(steps):
    (_, off), (_, on) = steps
    turn = off.info["liveness_steps"].index("relu_grad")
    assert on.info["liveness_steps"].index("relu_grad") == turn
    drop = off.memory["liveness"][turn] - on.memory["liveness"][turn]
    statistics = 2 * 2 * 16 * 4                   # each norm's saved mean and variance
    assert drop == 2 * int(np.prod(SHAPE)) * 4 + statistics


def test_the_gradients_are_the_same_bits(steps):
    (g_off, _), (g_on, _) = steps
    for a, b in zip(g_off, g_on):
        T.EXACT.assert_close(b, a)
