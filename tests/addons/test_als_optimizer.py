"""Automatic loss scaling (`ipu.optimizers.ALSOptimizer` & co.) against a numpy
transcription of the original's rule, on the simulated IPU and on the CPU.

The state machine is driven with chosen scaled gradients (float16, with overflowing
elements on chosen steps) through `loops.repeat` on the device, and compared step by
step with the transcription: the factor, the previous factor, the counter and the
histogram. Then Keras `fit`: a float32 model trains like Keras on the CPU with the same
optimizer (its gradients are unscaled before the update), a float16 model counts its
gradients in the histogram; accumulation; serialization; every designed error.
"""
import keras
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T
from ipu_keras.errors import AddonsArgumentError
from ipu_keras.optimizers import (
    ALSGradientAccumulationOptimizer, ALSOptimizer, ALSOptimizerAdam, ALSOptimizerRMSProp,
    ALSOptimizerSGD,
)

N = 16          # gradient elements per step
EDGE = 2**13    # the default histogram_bin_edge


def reference(grads, initial_loss_scaling_factor=1, update_frequency=8, increase_factor=2,
              max_loss_scaling_factor=32768, accumulate_statistics_over_update_period=True,
              ratio_threshold=10e-6, captured_grads_only=False, lpf_alpha=0.0,
              histogram_bin_edge=EDGE):
    """(factor, previous factor, counter, histogram) after each step, and the factor each
    step's gradients are divided by: the original's rule transcribed (module docstring
    of `ipu_keras/optimizers/als_optimizer.py`)."""
    hist, n = np.zeros(2), 0
    lsf = prev = float(initial_loss_scaling_factor)
    states, used = [], []
    for g in grads:
        used.append(lsf)
        due = update_frequency == 1 or (n > 0 and n % update_frequency == 0)
        if (accumulate_statistics_over_update_period or due) and not captured_grads_only:
            over = np.sum(~(np.abs(g.astype(np.float32)) < histogram_bin_edge))
            hist = hist + np.array([g.size - over, over]) * (1.0 - lpf_alpha)
        new = lsf
        if due:
            with np.errstate(invalid="ignore"):
                ratio = hist[1] / hist.sum()
            new = lsf / increase_factor if ratio > ratio_threshold else lsf * increase_factor
            if not (np.isfinite(new) and new < max_loss_scaling_factor and new >= 1):
                new = lsf
        prev = prev if new == lsf else lsf
        lsf = new
        hist = np.zeros(2) if due else hist
        n = 0 if due else n + 1
        states.append((lsf, prev, n, hist.copy()))
    return states, used


def gradients(steps, overflow_at=(), seed=0):
    """Scaled float16 gradients: small values, with 3 elements at 2**14 on the steps
    listed in `overflow_at`."""
    rng = np.random.default_rng(seed)
    grads = (rng.standard_normal((steps, N)) * 4).astype(np.float16)
    for step in overflow_at:
        grads[step, :3] = 2**14
    return grads


def run_on_ipu(optimizer, grads, lr=0.5):
    """Feeds `grads` to `optimizer.apply_gradients` on one float16 variable, one step per
    loop iteration on the device; returns the states after each step and the weights."""
    var = tf.Variable(np.zeros(N, np.float16))
    optimizer.build([var])
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(grads))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    als = getattr(optimizer, "als_optimizer", optimizer)

    def body(g):
        optimizer.apply_gradients([(g, var)])
        outfeed.enqueue([als.loss_scaling_factor, als.previous_loss_scaling_factor,
                         als.update_counter, als.histogram])

    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        strategy.run(tf.function(lambda: ipu.loops.repeat(len(grads), body,
                                                          infeed_queue=infeed)))
    lsf, prev, n, hist = (np.asarray(t) for t in outfeed.dequeue())
    return list(zip(lsf, prev, n, hist)), var.numpy()


def assert_states(got, want):
    assert len(got) == len(want)
    for step, (g, w) in enumerate(zip(got, want)):
        assert (g[0], g[1], g[2]) == (w[0], w[1], w[2]), f"step {step}: {g} != {w}"
        np.testing.assert_array_equal(g[3], w[3], err_msg=f"histogram after step {step}")


CASES = {
    "grows-every-2-steps": (dict(initial_loss_scaling_factor=4, update_frequency=2,
                                 max_loss_scaling_factor=64), ()),
    "overflow-shrinks": (dict(initial_loss_scaling_factor=16, update_frequency=3,
                              max_loss_scaling_factor=1024), (2, 7)),
    "stops-below-the-max": (dict(initial_loss_scaling_factor=2, update_frequency=1,
                                 max_loss_scaling_factor=16), ()),
    "never-below-1": (dict(initial_loss_scaling_factor=1, update_frequency=1,
                           increase_factor=4, max_loss_scaling_factor=64), (0, 1, 2, 4)),
    "statistics-only-when-due": (dict(update_frequency=3, max_loss_scaling_factor=1024,
                                      accumulate_statistics_over_update_period=False),
                                 (1, 3, 8)),
    "low-pass-filter": (dict(update_frequency=4, lpf_alpha=0.25,
                             max_loss_scaling_factor=1024), (5,)),
    "captured-only-counts-nothing": (dict(update_frequency=2, captured_grads_only=True,
                                          max_loss_scaling_factor=1024), (1, 2, 3)),
    "low-bin-edge": (dict(update_frequency=2, histogram_bin_edge=8.0,
                          max_loss_scaling_factor=1024), ()),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_factor_follows_the_rule_on_the_device(name):
    arguments, overflow_at = CASES[name]
    grads = gradients(12, overflow_at)
    got, weights = run_on_ipu(ALSOptimizer(keras.optimizers.SGD(0.5), **arguments), grads)
    want, used = reference(grads, **arguments)
    assert_states(got, want)
    expected = np.zeros(N, np.float16)
    for g, lsf in zip(grads, used):   # SGD on the unscaled gradients, in float16
        expected = expected - (g / np.float16(lsf)) * np.float16(0.5)
    np.testing.assert_array_equal(weights, expected)


def test_accumulation_updates_the_factor_every_micro_batch_and_the_weights_per_window():
    arguments = dict(initial_loss_scaling_factor=4, update_frequency=2,
                     max_loss_scaling_factor=256)
    grads = gradients(8, overflow_at=(5,))
    als = ALSOptimizer(keras.optimizers.SGD(0.5), **arguments)
    got, weights = run_on_ipu(ALSGradientAccumulationOptimizer(als, 4), grads)
    want, used = reference(grads, **arguments)
    assert_states(got, want)
    expected = np.zeros(N, np.float16)
    for window in range(2):
        total = np.zeros(N, np.float16)
        for step in range(4 * window, 4 * window + 4):
            total = total + grads[step] / np.float16(used[step])
        expected = expected - total * np.float16(0.5)
    np.testing.assert_array_equal(weights, expected)


def _model(cls, optimizer, dtype="float32"):
    keras.utils.set_random_seed(0)
    model = cls([keras.Input((8,)), keras.layers.Dense(16, activation="relu", dtype=dtype),
                 keras.layers.Dense(4, dtype=dtype)])
    model.compile(optimizer=optimizer, loss="mse", steps_per_execution=4)
    return model


def _data():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((64, 8)).astype(np.float32),
            rng.standard_normal((64, 4)).astype(np.float32))


@pytest.mark.parametrize("make", [
    lambda: ALSOptimizer(keras.optimizers.SGD(0.05), 2**4, 2, max_loss_scaling_factor=2**10),
    lambda: ALSOptimizerSGD(0.05, 0.5, initial_loss_scaling_factor=8, update_frequency=2),
    lambda: ALSOptimizerAdam(0.01, initial_loss_scaling_factor=8, update_frequency=3),
    lambda: ALSOptimizerRMSProp(0.01, initial_loss_scaling_factor=8, update_frequency=3),
], ids=["ALSOptimizer", "ALSOptimizerSGD", "ALSOptimizerAdam", "ALSOptimizerRMSProp"])
def test_a_float32_model_trains_like_keras_on_the_cpu(make):
    """float32 gradients feed no statistics: the factor grows at each update, the loss
    is scaled by powers of two (exact), the weights are those of Keras on the CPU."""
    x, y = _data()
    on_ipu, on_cpu = _model(ipu.Sequential, make()), _model(keras.Sequential, make())
    got = on_ipu.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False).history
    want = on_cpu.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False).history
    T.FLOAT32.assert_close(got["loss"], want["loss"])
    for g, w in zip(on_ipu.get_weights(), on_cpu.get_weights()):
        T.FLOAT32.assert_close(g, w)
    assert float(on_ipu.optimizer.loss_scaling_factor) == float(
        on_cpu.optimizer.loss_scaling_factor) > 8


def test_a_float16_model_counts_its_gradients_in_the_histogram():
    als = ALSOptimizer(keras.optimizers.SGD(0.01), 2**6, update_frequency=3,
                       max_loss_scaling_factor=2**12)
    model = _model(ipu.Sequential, als, dtype="float16")
    x, y = _data()
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)   # 8 steps
    params = model.count_params()
    # counters 0,1,2,3(update),0,1,2,3(update): updates on steps 4 and 8, none overflowing
    assert int(als.update_counter) == 0
    np.testing.assert_array_equal(als.histogram.numpy(), [0, 0])
    assert float(als.loss_scaling_factor) == 2**8
    model.fit(x[:16], y[:16], batch_size=8, epochs=1, verbose=0)   # 2 more steps
    np.testing.assert_array_equal(als.histogram.numpy(), [2 * params, 0])


def test_the_config_round_trips_and_a_model_saves_with_it(tmp_path):
    als = ALSOptimizerAdam(0.01, initial_loss_scaling_factor=8, update_frequency=3,
                           lpf_alpha=0.5, histogram_bin_edge=2**10)
    config = als.get_config()
    assert ALSOptimizerAdam.from_config(config).get_config() == config
    plain = ALSOptimizer(keras.optimizers.SGD(0.1), 4, ratio_threshold=0.5)
    assert ALSOptimizer.from_config(plain.get_config()).get_config() == plain.get_config()
    model = _model(ipu.Sequential, plain)
    model.fit(*_data(), batch_size=8, verbose=0)
    model.save(tmp_path / "als.keras")
    loaded = keras.models.load_model(tmp_path / "als.keras")
    assert isinstance(loaded.optimizer, ALSOptimizer)
    assert loaded.optimizer.ratio_threshold == 0.5
    assert float(loaded.optimizer.loss_scaling_factor) == float(plain.loss_scaling_factor)


@pytest.mark.parametrize("kwargs, match", [
    ({"update_frequency": 0}, "update_frequency must be nonzero and positive"),
    ({"increase_factor": 3}, "increase_factor must be a power of two"),
    ({"initial_loss_scaling_factor": 5}, "initial_loss_scaling_factor must be a power of two"),
    ({"max_loss_scaling_factor": 1000}, "max_loss_scaling_factor must be a power of two"),
    ({"initial_loss_scaling_factor": 64, "max_loss_scaling_factor": 64},
     "initial_loss_scaling_factor must be less than max_loss_scaling_factor"),
    ({"initial_loss_scaling_factor": 32, "max_loss_scaling_factor": 64},
     r"initial_loss_scaling_factor x increase_factor must be less"),
    ({"ratio_threshold": 1.0}, "ratio_threshold must be greater than zero and less than one"),
])
def test_bad_arguments_get_designed_errors(kwargs, match):
    with pytest.raises(AddonsArgumentError, match=match):
        ALSOptimizer(keras.optimizers.SGD(), **kwargs)


def test_accumulation_wraps_only_als_optimizers():
    with pytest.raises(AddonsArgumentError, match="only be used with instances of ALSOptim"):
        ALSGradientAccumulationOptimizer(keras.optimizers.SGD(), 4)
    als = ALSOptimizer(keras.optimizers.SGD())
    assert ALSGradientAccumulationOptimizer(als, 1) is als


def test_minimize_in_a_custom_training_loop_is_sgd_on_the_unscaled_loss():
    """The original's documented loop: `opt.minimize(loss, variables, tape=tape)` inside
    `IPUStrategy.run`; float32 gradients leave the histogram empty, so the factor grows."""
    x, y = (t[:16] for t in _data())
    start = np.random.default_rng(3).standard_normal((8, 4)).astype(np.float32)
    als = ALSOptimizerSGD(0.05, 0.0, 4, 1, max_loss_scaling_factor=1024)
    w = tf.Variable(start)

    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((x @ w - y) ** 2)
        als.minimize(loss, [w], tape=tape)

    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        for _ in range(3):
            strategy.run(tf.function(step))
    expected = tf.Variable(start)
    sgd = keras.optimizers.SGD(0.05)
    for _ in range(3):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((x @ expected - y) ** 2)
        sgd.apply_gradients([(tape.gradient(loss, expected), expected)])
    T.FLOAT32.assert_close(w.numpy(), expected.numpy())
    assert float(als.loss_scaling_factor) == 4 * 2**3
    with pytest.raises(AddonsArgumentError, match="callable loss or the tape"):
        als.minimize(tf.constant(1.0), [w])
