"""Gradient accumulation of Keras models (`set_gradient_accumulation_options`) vs Keras.

Micro-batches of 8, accumulation 4, `steps_per_execution=8`: 25 steps per epoch run as
executions of 8, 8, 8 and 1 steps, so the last window of each epoch holds one micro-batch.
Keras on the CPU with batches of 32 has the same windows (6 batches of 32 and a partial
one of 8). MEAN and RUNNING_MEAN equal it, SUM equals it with the learning rate divided
by 4; the History, evaluate and predict too, and the optimizer counts weight updates.
"""
import logging

import numpy as np
import pytest
import keras

import ipu_keras as ipu
from ipu_keras.errors import AccumulationStepsError
from ipu_keras._src.conformance import tolerances as T

from tests.keras.common import (
    assert_history_equal, assert_logs_equal, assert_weights_equal, build_pair, train_val,
)

G, MICRO = 4, 8
EPOCHS = 2
UPDATES_PER_EPOCH = 7  # 25 micro-batches: 6 windows of 4 and one of 1


def _fit(model, x, y, val, batch_size):
    history = model.fit(x, y, epochs=EPOCHS, batch_size=batch_size, shuffle=False,
                        validation_data=val, verbose=0)
    return history, model.evaluate(*val, batch_size=MICRO, verbose=0), model.predict(
        val[0], batch_size=MICRO, verbose=0)


@pytest.fixture(scope="module")
def data():
    return train_val()


def _pair(opt="sgd", method="mean", steps_per_execution=8, scale_lr=1.0):
    on_ipu, on_cpu = build_pair("mlp", "sequential", opt, steps_per_execution=steps_per_execution)
    on_ipu.optimizer.learning_rate.assign(on_ipu.optimizer.learning_rate * scale_lr)
    on_ipu.set_gradient_accumulation_options(gradient_accumulation_steps_per_replica=G,
                                             gradient_accumulation_reduction_method=method)
    return on_ipu, on_cpu


@pytest.mark.parametrize("opt,method,scale_lr", [
    ("sgd", "mean", 1.0), pytest.param("adam", "running_mean", 1.0, marks=pytest.mark.slow),
    ("sgd", "sum", 1.0 / G),
])
def test_equals_keras_with_batches_g_times_larger(data, opt, method, scale_lr, caplog):
    (x, y), val = data
    updates = UPDATES_PER_EPOCH
    if method == "sum":  # a partial window sums fewer gradients: keep every window full
        x, y, updates = x[:192], y[:192], 6
    on_ipu, on_cpu = _pair(opt, method, scale_lr=scale_lr)
    with caplog.at_level(logging.INFO, logger="ipu_keras"):
        got = _fit(on_ipu, x, y, val, MICRO)
    expected = _fit(on_cpu, x, y, val, MICRO * G)
    assert_history_equal(got[0], expected[0])
    assert_weights_equal(on_ipu.get_weights(), on_cpu.get_weights())
    assert_logs_equal(got[1], expected[1])
    np.testing.assert_allclose(got[2], expected[2], **T.FLOAT32.kwargs)
    assert int(on_ipu.optimizer.iterations.numpy()) == EPOCHS * updates
    lines = [r.getMessage() for r in caplog.records if "effective batch size" in r.getMessage()]
    assert lines == ["Training is not distributed and accumulating 4 batches per optimizer "
                     "step, your effective batch size is 32."]


def test_a_partial_micro_batch_weighs_its_samples(data):
    """220 samples: the last window holds micro-batches of 8, 8, 8 and 4 (Keras: one of 28)."""
    (x, y), val = data
    x, y = np.concatenate([x, x[:20]]), np.concatenate([y, y[:20]])
    on_ipu, on_cpu = _pair()
    assert_history_equal(_fit(on_ipu, x, y, val, MICRO)[0], _fit(on_cpu, x, y, val, MICRO * G)[0])
    assert_weights_equal(on_ipu.get_weights(), on_cpu.get_weights())


def test_no_effect_on_evaluate_and_predict(data):
    (x, y), val = data
    on_ipu, _ = _pair()
    plain, _ = build_pair("mlp", "sequential", "sgd", steps_per_execution=8)
    assert_logs_equal(on_ipu.evaluate(*val, batch_size=MICRO, verbose=0),
                      plain.evaluate(*val, batch_size=MICRO, verbose=0))
    np.testing.assert_array_equal(on_ipu.predict(val[0], batch_size=MICRO, verbose=0),
                                  plain.predict(val[0], batch_size=MICRO, verbose=0))


def test_steps_per_execution_must_be_a_multiple(data):
    (x, y), _ = data
    on_ipu, _ = _pair(steps_per_execution=6)
    before = on_ipu.get_weights()
    with pytest.raises(AccumulationStepsError,
                       match=r"`steps_per_execution` value \(set to 6\) is not divisible by "
                             r"`gradient_accumulation_steps_per_replica` \(4\)"):
        on_ipu.fit(x, y, batch_size=MICRO, verbose=0)
    assert_weights_equal(on_ipu.get_weights(), before)


class _CustomStep(ipu.Sequential):
    def train_step(self, data):
        return super().train_step(data)


def test_custom_train_step_is_refused(data):
    (x, y), _ = data
    model = _CustomStep([keras.Input((8, 8, 1)), keras.layers.Flatten(), keras.layers.Dense(2)])
    model.compile("sgd", "sparse_categorical_crossentropy", steps_per_execution=4)
    model.set_gradient_accumulation_options(gradient_accumulation_steps_per_replica=2)
    with pytest.raises(AccumulationStepsError, match="`train_step` for the model .* overridden"):
        model.fit(x, y % 2, batch_size=MICRO, verbose=0)


@pytest.mark.parametrize("kwargs,match", [
    ({"gradient_accumulation_steps_per_replica": 0}, "positive integer, but got 0"),
    ({"gradient_accumulation_steps_per_replica": 2.0}, "positive integer, but got 2.0"),
    ({"gradient_accumulation_reduction_method": "max"}, "SUM, MEAN, RUNNING_MEAN"),
    ({"opt": "sgd"}, "Found `opt` key"),
    ({"num_mini_batches": 2}, "Found `num_mini_batches` key"),
    ({"experimental_normalize_gradients": True}, "has now been removed"),
    ({"momentum": 0.9}, r"Received: \['momentum'\]"),
    ({"use_v2_gradient_accumulation_optimizer": 1}, "expected a bool"),
])
def test_option_errors(kwargs, match):
    model, _ = build_pair()
    with pytest.raises(ValueError, match=match):
        model.set_gradient_accumulation_options(**kwargs)


def test_v2_optimizer_and_dtype_kwargs(data):
    (x, y), val = data
    on_ipu, on_cpu = build_pair("mlp", "sequential", "sgd", steps_per_execution=8)
    on_ipu.set_gradient_accumulation_options(
        gradient_accumulation_steps_per_replica=G, gradient_accumulation_reduction_method="MEAN",
        use_v2_gradient_accumulation_optimizer=True, dtype="float32",
        offload_weight_update_variables=False)
    _fit(on_ipu, x[:64], y[:64], val, MICRO)
    _fit(on_cpu, x[:64], y[:64], val, MICRO * G)
    assert_weights_equal(on_ipu.get_weights(), on_cpu.get_weights())
