"""Replication in the low-level API: R copies of one program, each on its own data.

With more IPUs than a program's shards, R = IPUs / shards replicas run it. The infeed
deals consecutive elements round robin (replica r takes elements r, r + R, ...), the
outfeed gains a replica axis at position 1, `cross_replica_sum`/`mean` reduce over all
replicas or groups of them, and `replication_index()` tells each replica its index.
Data-parallel training (`CrossReplicaOptimizer`, the mean of the replicas' gradients)
equals TensorFlow on the CPU trained on the R micro-batches of each step as one batch:
each replica's loss is the mean over its B samples, so the mean over replicas of their
gradients is the gradient of the mean loss over all R x B samples.
"""
import logging

import keras
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T
from ipu_keras.errors import FeedError, ReplicationError

F32 = np.float32


@pytest.fixture
def ipus(request):
    def configure(n):
        cfg = ipu.config.IPUConfig()
        cfg.auto_select_ipus = n
        cfg.ipu_model.tiles_per_ipu = 16
        cfg.configure_ipu_system()
    yield configure
    ipu.config.reset_ipu_configuration()


def _run(fn):
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        return strategy.run(fn)


@pytest.mark.parametrize("replicas", [2, 4])
def test_infeed_deals_round_robin_and_collectives_reduce(ipus, replicas):
    ipus(replicas)
    data = np.arange(16 * 3, dtype=F32).reshape(16, 3)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(data))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    steps = 16 // replicas

    def body(x):
        return outfeed.enqueue({
            "x": x, "sum": ipu.cross_replica_ops.cross_replica_sum(x),
            "mean": ipu.cross_replica_ops.cross_replica_mean(x),
            "pairs": ipu.cross_replica_ops.cross_replica_sum(x, replica_group_size=2),
            "index": ipu.replication_ops.replication_index()})

    _run(lambda: ipu.loops.repeat(steps, body, infeed_queue=infeed))
    out = {k: v.numpy() for k, v in outfeed.dequeue().items()}
    dealt = data.reshape(steps, replicas, 3)           # step k, replica r: element kR + r
    T.EXACT.assert_close(out["x"], dealt)
    T.EXACT.assert_close(out["sum"], np.repeat(dealt.sum(1, keepdims=True), replicas, 1))
    T.FLOAT32.assert_close(out["mean"], np.repeat(dealt.mean(1, keepdims=True), replicas, 1))
    pairs = dealt.reshape(steps, replicas // 2, 2, 3).sum(2, keepdims=True)
    T.EXACT.assert_close(out["pairs"], np.repeat(pairs, 2, 2).reshape(steps, replicas, 3))
    T.EXACT.assert_close(out["index"], np.tile(np.arange(replicas), (steps, 1)))


def test_last_mode_keeps_the_replica_axis(ipus):
    ipus(2)
    data = np.arange(8, dtype=F32).reshape(8, 1)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(data))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(ipu.ipu_outfeed_queue.IPUOutfeedMode.LAST)
    _run(lambda: ipu.loops.repeat(4, lambda x: outfeed.enqueue(x * 2), infeed_queue=infeed))
    T.EXACT.assert_close(outfeed.dequeue().numpy(), [[12.0], [14.0]])


def test_a_trailing_group_smaller_than_the_replicas_is_dropped_with_a_warning(ipus, caplog):
    ipus(4)
    data = np.arange(6, dtype=F32)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(data))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    _run(lambda: ipu.loops.repeat(1, lambda x: outfeed.enqueue(x), infeed_queue=infeed))
    T.EXACT.assert_close(outfeed.dequeue().numpy(), [[0, 1, 2, 3]])
    with caplog.at_level(logging.WARNING, logger="ipu_keras"), \
            pytest.raises(ipu.errors.InfeedExhaustedError):
        _run(lambda: ipu.loops.repeat(1, lambda x: outfeed.enqueue(x), infeed_queue=infeed))
    assert any("the last 2 element(s) are dropped" in r.getMessage() for r in caplog.records)


def test_a_group_size_that_does_not_divide_the_replicas_is_refused(ipus):
    ipus(4)
    with pytest.raises(ReplicationError, match="replica_group_size=3, replication factor 4"):
        ipu.ipu_compiler.compile(
            lambda x: ipu.cross_replica_ops.cross_replica_sum(x, replica_group_size=3),
            [np.ones(2, F32)])


def _mlp():
    keras.utils.set_random_seed(3)
    hidden, logits = keras.layers.Dense(16, activation="relu"), keras.layers.Dense(4)
    hidden.build((None, 8))
    logits.build((None, 16))
    return hidden, logits


def _loss(hidden, logits, x, y):
    return tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
        y, logits(hidden(x)), from_logits=True))


@pytest.mark.parametrize("replicas", [2, 4])
def test_data_parallel_training_equals_tensorflow_on_the_batches_of_all_replicas(
        ipus, replicas):
    ipus(replicas)
    steps, batch = 6, 4
    rng = np.random.default_rng(0)
    x = rng.standard_normal((steps * replicas * batch, 8)).astype(F32)
    y = rng.integers(0, 4, steps * replicas * batch).astype(np.int32)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch, drop_remainder=True)
    hidden, logits = _mlp()
    expected = [w.copy() for w in hidden.get_weights() + logits.get_weights()]
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    losses = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        optimizer = ipu.optimizers.CrossReplicaOptimizer(keras.optimizers.SGD(0.1))
        optimizer.build(hidden.trainable_variables + logits.trainable_variables)

        def body(features, labels):
            with tf.GradientTape() as tape:
                loss = _loss(hidden, logits, features, labels)
            variables = hidden.trainable_variables + logits.trainable_variables
            optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
            return losses.enqueue(loss)

        strategy.run(tf.function(lambda: ipu.loops.repeat(steps, body, infeed_queue=infeed)))
    got = hidden.get_weights() + logits.get_weights()

    hidden_cpu, logits_cpu = _mlp()
    cpu_optimizer = keras.optimizers.SGD(0.1)
    cpu_losses = []
    for k in range(steps):   # step k: the R micro-batches the replicas took, as one batch
        rows = slice(k * replicas * batch, (k + 1) * replicas * batch)
        with tf.GradientTape() as tape:
            loss = _loss(hidden_cpu, logits_cpu, x[rows], y[rows])
        variables = hidden_cpu.trainable_variables + logits_cpu.trainable_variables
        cpu_optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        cpu_losses.append(float(loss))
    for g, e in zip(got, hidden_cpu.get_weights() + logits_cpu.get_weights()):
        T.FLOAT32.assert_close(g, e)
    assert not np.allclose(got[0], expected[0])
    per_replica = losses.dequeue().numpy()
    assert per_replica.shape == (steps, replicas)
    T.FLOAT32.assert_close(per_replica.mean(axis=1), cpu_losses)


def test_an_all_reduce_costs_link_time_that_grows_with_the_replicas(ipus):
    exchange = {}
    for replicas in (1, 2, 4):
        ipus(replicas)
        ipu.ipu_compiler.compile(lambda x: ipu.cross_replica_ops.cross_replica_sum(x * 2),
                                 [np.ones(4096, F32)])
        exchange[replicas] = ipu.profiling.last_report().cycles["exchange"]
        ipu.config.reset_ipu_configuration()
    assert exchange[1] < exchange[2] < exchange[4]


def test_a_failing_replica_abandons_the_execution_and_keeps_the_weights(ipus):
    ipus(2)
    w = tf.Variable(np.ones(3, F32))

    def element(i):
        tf.debugging.assert_less(i, tf.constant(3, tf.int64), message="bad element")
        return tf.cast(tf.fill([3], i), tf.float32)

    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.range(8).map(element))

    def body(x):
        w.assign_add(ipu.cross_replica_ops.cross_replica_sum(x))

    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        with pytest.raises(FeedError, match="bad element"):
            strategy.run(tf.function(lambda: ipu.loops.repeat(4, body, infeed_queue=infeed)))
    T.EXACT.assert_close(w.numpy(), np.ones(3, F32))
