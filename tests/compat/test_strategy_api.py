"""`IPUStrategy` as user code touches a `tf.distribute.Strategy`; TensorFlow values back."""
import inspect
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T


@tf.function
def affine(x, scale):
    return {"y": x * scale + 1.0, "parts": (tf.reduce_sum(x), x[0])}


def test_run_returns_tensors_in_the_structure_of_fn():
    strategy = ipu.ipu_strategy.IPUStrategy()
    x = np.arange(4, dtype=np.float32)
    result = strategy.run(affine, args=(x, 2.0))
    assert isinstance(result["y"], tf.Tensor) and isinstance(result["parts"][0], tf.Tensor)
    np.testing.assert_array_equal(result["y"].numpy(), affine(x, 2.0)["y"].numpy())
    assert result["parts"][0].numpy() == 6.0
    assert float(tf.reduce_max(result["y"])) == 7.0  # TensorFlow ops take the results


def test_strategy_surface():
    strategy = ipu.ipu_strategy.IPUStrategy()
    assert strategy.num_replicas_in_sync == 1
    assert strategy.extended.non_slot_devices(None) == "/device:IPU:0"
    assert strategy.extended.worker_devices == ("/device:IPU:0",)
    dataset = tf.data.Dataset.range(3)
    assert strategy.experimental_distribute_dataset(dataset) is dataset
    assert list(strategy.distribute_datasets_from_function(
        lambda ctx: tf.data.Dataset.range(ctx.num_replicas_in_sync))) == [0]
    with strategy.scope() as inside:
        assert inside is strategy


def test_reduce_follows_tf_distribute():
    strategy = ipu.ipu_strategy.IPUStrategy()
    value = strategy.run(affine, args=(np.ones(4, np.float32), 3.0))["y"]
    same = strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None)
    np.testing.assert_array_equal(same.numpy(), value.numpy())
    oracle = tf.distribute.get_strategy()  # TensorFlow's default strategy: one replica too
    for op in ("SUM", "MEAN"):
        got = strategy.reduce(op, value, axis=0)
        want = oracle.reduce(op, value, axis=0)
        np.testing.assert_allclose(got.numpy(), want.numpy())
    with pytest.raises(ValueError, match="Received: reduce_op='MAX'"):
        strategy.reduce("MAX", value, axis=0)


def test_compile_returns_a_list_of_tensors():
    result = ipu.ipu_compiler.compile(lambda a: (a + 1.0, a * 2.0),
                                      [np.ones(3, np.float32)])
    assert isinstance(result, list) and all(isinstance(r, tf.Tensor) for r in result)
    np.testing.assert_array_equal(result[1].numpy(), [2, 2, 2])
    assert ipu.ipu_compiler.compile(lambda: None) == []


def _loop_with(outfeed):
    variable = tf.Variable(0.0)

    @tf.function
    def loop(n):
        for i in tf.range(n):
            variable.assign_add(1.0)
            outfeed.enqueue({"step": tf.cast(i, tf.float32), "total": variable * 1.0})

    return loop


def test_outfeed_dequeue_returns_tensors():
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    ipu.ipu_strategy.IPUStrategy().run(_loop_with(outfeed), args=[3])
    result = outfeed.dequeue()
    assert isinstance(result["step"], tf.Tensor)
    np.testing.assert_array_equal(result["total"].numpy(), [1, 2, 3])
    last = ipu.ipu_outfeed_queue.IPUOutfeedQueue(ipu.ipu_outfeed_queue.IPUOutfeedMode.LAST)
    ipu.ipu_strategy.IPUStrategy().run(_loop_with(last), args=[3])
    assert last.dequeue()["step"].numpy() == 2.0


def test_feed_signatures_are_the_current_ones():
    outfeed = inspect.signature(ipu.ipu_outfeed_queue.IPUOutfeedQueue)
    assert list(outfeed.parameters) == ["outfeed_mode", "device_ordinal", "buffer_depth",
                                        "optimise_latency"]
    infeed = inspect.signature(ipu.ipu_infeed_queue.IPUInfeedQueue)
    assert list(infeed.parameters) == ["dataset", "device_ordinal", "prefetch_depth",
                                       "optimise_latency"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the current form does not warn
        ipu.ipu_outfeed_queue.IPUOutfeedQueue(ipu.ipu_outfeed_queue.IPUOutfeedMode.ALL, 0, 2)
        batches = tf.data.Dataset.range(2).batch(1, drop_remainder=True)
        ipu.ipu_infeed_queue.IPUInfeedQueue(batches, 0, 2)
    with pytest.raises(TypeError):
        ipu.ipu_outfeed_queue.IPUOutfeedQueue(no_such_argument=1)


def test_tf2_user_guide_loop_with_experimental_run_v2(fresh_warnings):
    """The TF2 user guide's custom loop as SDK 2.1 wrote it: feed names, experimental_run_v2,
    `.numpy()` on the results."""
    rng = np.random.default_rng(0)
    x = rng.random((64, 8), dtype=np.float32)
    y = rng.integers(0, 4, 64).astype(np.int32)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(16, drop_remainder=True)
    with pytest.warns(DeprecationWarning):
        strategy = ipu.ipu_strategy.IPUStrategyV1()
    with strategy.scope():
        with pytest.warns(DeprecationWarning, match="feed_name"):
            infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset, "infeed")
            outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue("outfeed")
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
        optimizer = keras.optimizers.SGD(0.1)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        @tf.function
        def training_loop():
            for _ in tf.range(4):
                features, labels = next(infeed)
                with tf.GradientTape() as tape:
                    loss = loss_fn(labels, model(features, training=True))
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                outfeed.enqueue(loss)
            return model.trainable_variables[1] * 1.0  # the bias after the loop

        weights = model.get_weights()
        with pytest.warns(DeprecationWarning, match="use `IPUStrategy.run`"):
            bias = strategy.experimental_run_v2(training_loop)
        losses = outfeed.dequeue().numpy()
    assert isinstance(bias, tf.Tensor)
    np.testing.assert_array_equal(bias.numpy(), model.get_weights()[1])

    # TensorFlow on the CPU, same start, same batches.
    reference = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
    reference.set_weights(weights)
    ref_optimizer = keras.optimizers.SGD(0.1)
    expected = []
    for features, labels in dataset:
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, reference(features, training=True))
        grads = tape.gradient(loss, reference.trainable_variables)
        ref_optimizer.apply_gradients(zip(grads, reference.trainable_variables))
        expected.append(loss.numpy())
    np.testing.assert_allclose(losses, expected, **T.FLOAT32.kwargs)
