"""The 'dropout' op family (PopLibs' dropout) against TensorFlow on the CPU, bit for bit.

`ipu_keras.ops.rand_ops.dropout` is a call marked "IpuDropout" whose body TensorFlow runs on
the CPU; the simulator runs the one `dropout` op instead, forward and backward (the
backward regenerates the mask from the seed). Then: the IR holds that op and no random
tensor, the mask is not live between the passes of a Keras model (against `ref=False`,
the same numbers from plain ops), and the designed errors.
"""
import keras
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras
from ipu_keras.ops import rand_ops
from ipu_keras._src.conformance import tolerances as T
from ipu_keras.errors import AddonsArgumentError
from ipu_keras._src.tracer import trace
from ipu_keras_addons.keras import layers as ipu_layers
from tests.ops.harness import case, check_case, f32, grad

SEED = np.array([7, -123], np.int32)


def _drop(rate, noise_shape=None):
    return lambda x, seed: rand_ops.dropout(x, seed=seed, rate=rate, noise_shape=noise_shape)


def exact(fn, *inputs, label):
    return case("IpuDropout", fn, *inputs, tolerance=T.EXACT, label=label)


CASES = [
    exact(_drop(0.3), f32(8, 33), SEED, label="float32"),
    exact(_drop(0.5), f32(4, 5, 6).astype(np.float16), SEED, label="float16"),
    exact(_drop(0.25, [1, 5, 1]), f32(3, 5, 7), SEED, label="noise_shape"),
    exact(_drop(0.0), f32(16), SEED, label="rate-0"),
    exact(_drop(0.7), f32(2, 3), np.array([2**40 + 5, 9], np.int64), label="int64-seed"),
    exact(grad(_drop(0.4), 0), f32(6, 10), SEED, label="gradient"),
    exact(grad(_drop(0.4, [6, 1]), 0), f32(6, 10), SEED, label="gradient-noise_shape"),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_matches_tensorflow(c):
    check_case(c)


def test_the_ir_holds_one_op_per_pass_and_no_random_tensor():
    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(rand_ops.dropout(x, seed=[1, 2], rate=0.5) ** 2)
        return tape.gradient(loss, x)

    ops = [eqn.op for eqn in trace(step, [np.ones((4, 8), np.float32)]).graph.walk()]
    assert ops.count("dropout") == 2
    assert not {"random_uniform", "random_key_counter", "greater_equal"} & set(ops)


def _liveness_after_forward(ref):
    """Not-always-live bytes while the layer after the dropout runs its forward matmul."""
    keras.utils.set_random_seed(1)
    model = ipu_keras.Sequential([
        keras.Input((64,)), keras.layers.Dense(256, activation="relu"),
        ipu_layers.Dropout(0.5, ref=ref), keras.layers.Dense(4, name="after")])
    model.compile("sgd", "mse", steps_per_execution=1)
    rng = np.random.default_rng(0)
    x, y = rng.random((32, 64), np.float32), rng.random((32, 4), np.float32)
    loss = model.fit(x, y, batch_size=32, verbose=0).history["loss"]
    from ipu_keras._src.reports.document import liveness_section

    steps = liveness_section(model.train_function.last_program.executable)["loop"]["steps"]
    first = next(s for s in steps if s["label"] == "matmul (after)")
    return first["bytes"], loss, model.get_weights()


def test_the_mask_is_not_live_between_the_passes():
    regenerated, loss, weights = _liveness_after_forward(ref=True)
    stored, stored_loss, stored_weights = _liveness_after_forward(ref=False)
    # the float32 mask is gone; the backward pass keeps the 8-byte seed instead
    assert stored - regenerated == 32 * 256 * 4 - 8
    np.testing.assert_array_equal(loss, stored_loss)  # the same numbers either way
    for a, b in zip(weights, stored_weights):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kwargs, match", [
    ({"rate": 1.0}, r"rate must be in the range \[0, 1\)"),
    ({"rate": -0.1}, r"rate must be in the range \[0, 1\)"),
    ({"seed": [1, 2, 3]}, r"seed to have a shape \[2\]"),
    ({"noise_shape": [4, 2]}, "Dimension mismatch, 3 != 2"),
    ({"noise_shape": [4]}, "length of noise_shape must equal the rank"),
])
def test_bad_arguments_get_designed_errors(kwargs, match):
    with pytest.raises(AddonsArgumentError, match=match):
        rand_ops.dropout(tf.ones((4, 3)), **kwargs)


def test_without_a_seed_each_execution_draws_a_fresh_mask():
    x = np.ones((8, 16), np.float32)
    masks = [np.asarray(ipu_keras.ipu_compiler.compile(
        lambda x: rand_ops.dropout(x, rate=0.5), [x])[0]) for _ in range(2)]
    for mask in masks:
        assert set(np.unique(mask)) == {0.0, 2.0}
    assert not np.array_equal(masks[0], masks[1])
