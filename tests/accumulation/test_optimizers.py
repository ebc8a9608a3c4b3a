"""`ipu.optimizers.GradientAccumulationOptimizer[V2]` inside `loops.repeat` vs TensorFlow.

A linear model trained on the simulated IPU for `STEPS` micro-batches of `BATCH` through an
infeed, accumulating `M` micro-batches per weight update, against the same model trained
by TensorFlow on the CPU on batches `M` times larger: MEAN and RUNNING_MEAN equal it, SUM
equals it with the learning rate divided by `M`; the wrapped optimizer's `iterations` and
learning-rate schedule advance once per weight update. Every usage error of the original.
"""
import numpy as np
import pytest
import keras
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras.errors import GradientAccumulationError
from ipu_keras.gradient_accumulation import GradientAccumulationReductionMethod as Method
from ipu_keras._src.conformance import tolerances as T

M, BATCH, STEPS = 4, 8, 8


def _data():
    rng = np.random.default_rng(0)
    return (rng.random((BATCH * STEPS, 5), dtype=np.float32),
            rng.random((BATCH * STEPS, 3), dtype=np.float32))


def _model():
    keras.utils.set_random_seed(1)
    return keras.Sequential([keras.Input((5,)), keras.layers.Dense(3)])


def _loss(model, x, y):
    return tf.reduce_mean((model(x) - y) ** 2)


def _train_on_ipu(make_optimizer, steps=STEPS, updates_per_body=1):
    x, y = _data()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH, drop_remainder=True)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = _model()
        optimizer = make_optimizer()
        iterator = iter(dataset)

        @tf.function
        def loop():
            def body(xb, yb):
                with tf.GradientTape() as tape:
                    loss = _loss(model, xb, yb)
                grads = tape.gradient(loss, model.trainable_variables)
                for _ in range(updates_per_body):
                    optimizer.apply_gradients(zip(grads, model.trainable_variables))
            ipu.loops.repeat(steps, body, infeed_queue=iterator)

        strategy.run(loop)
    return model, optimizer


def _train_on_cpu(optimizer, batch):
    x, y = _data()
    model = _model()
    for start in range(0, len(x), batch):
        with tf.GradientTape() as tape:
            loss = _loss(model, x[start:start + batch], y[start:start + batch])
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return model


def _assert_weights_equal(got, expected):
    for a, b in zip(got.get_weights(), expected.get_weights()):
        np.testing.assert_allclose(a, b, **T.FLOAT32.kwargs)


def test_reduction_method_parse():
    assert Method.parse(Method.MEAN) is Method.MEAN
    assert Method.parse("running_mean") is Method.RUNNING_MEAN
    assert Method.parse("Sum") is Method.SUM
    with pytest.raises(ValueError,
                       match="SUM, MEAN, RUNNING_MEAN.*Received: reduction_method='max'"):
        Method.parse("max")
    with pytest.raises(ValueError, match="Valid values"):
        Method.parse(1)


@pytest.mark.parametrize("method", ["mean", "running_mean", Method.MEAN])
def test_mean_equals_a_batch_m_times_larger(method):
    wrapper = ipu.optimizers.GradientAccumulationOptimizerV2
    model, optimizer = _train_on_ipu(
        lambda: wrapper(keras.optimizers.SGD(0.1, momentum=0.5), M, reduction_method=method))
    reference = _train_on_cpu(keras.optimizers.SGD(0.1, momentum=0.5), BATCH * M)
    _assert_weights_equal(model, reference)
    assert int(optimizer.iterations.numpy()) == STEPS // M  # the wrapped optimizer's counter


def test_sum_equals_a_larger_batch_with_the_learning_rate_scaled():
    model, _ = _train_on_ipu(lambda: ipu.optimizers.GradientAccumulationOptimizer(
        keras.optimizers.SGD(0.1 / M), M))
    reference = _train_on_cpu(keras.optimizers.SGD(0.1), BATCH * M)
    _assert_weights_equal(model, reference)


def test_learning_rate_schedule_advances_once_per_weight_update():
    def schedule():
        return keras.optimizers.schedules.ExponentialDecay(0.2, decay_steps=1, decay_rate=0.5)

    model, optimizer = _train_on_ipu(lambda: ipu.optimizers.GradientAccumulationOptimizerV2(
        keras.optimizers.SGD(schedule()), M, reduction_method="mean"))
    reference = _train_on_cpu(keras.optimizers.SGD(schedule()), BATCH * M)
    _assert_weights_equal(model, reference)
    assert int(optimizer.iterations.numpy()) == 2
    np.testing.assert_allclose(float(optimizer.learning_rate.numpy()), 0.05)


def test_num_mini_batches_must_be_positive():
    with pytest.raises(ValueError, match="positive number. Received: num_mini_batches=0"):
        ipu.optimizers.GradientAccumulationOptimizerV2(keras.optimizers.SGD(), 0)


def test_keras_form_with_one_mini_batch_is_the_wrapped_optimizer():
    sgd = keras.optimizers.SGD()
    assert ipu.optimizers.GradientAccumulationOptimizer(sgd, 1) is sgd


def test_must_not_be_wrapped():
    inner = ipu.optimizers.GradientAccumulationOptimizerV2(keras.optimizers.SGD(), 2)
    with pytest.raises(GradientAccumulationError, match="must not be wrapped.*num_mini_batches=2"):
        ipu.optimizers.GradientAccumulationOptimizerV2(inner, 2)


def test_loop_count_must_be_a_multiple():
    with pytest.raises(GradientAccumulationError,
                       match="4 number of mini batches inside a loop with 6 iterations"):
        _train_on_ipu(lambda: ipu.optimizers.GradientAccumulationOptimizerV2(
            keras.optimizers.SGD(), M), steps=6)


def test_one_weight_update_per_loop():
    with pytest.raises(GradientAccumulationError, match="multiple resource update.*2 calls"):
        _train_on_ipu(lambda: ipu.optimizers.GradientAccumulationOptimizerV2(
            keras.optimizers.SGD(), M), updates_per_body=2)


def test_outside_a_repeat_loop():
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = _model()
        optimizer = ipu.optimizers.GradientAccumulationOptimizerV2(keras.optimizers.SGD(), M)

        def step(x, y):
            with tf.GradientTape() as tape:
                loss = _loss(model, x, y)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        x, y = _data()
        with pytest.raises(GradientAccumulationError, match="only allowed inside of training"):
            strategy.run(step, args=[x[:BATCH], y[:BATCH]])
    # A failed compile leaves the weights as they were.
    _assert_weights_equal(model, _model())
