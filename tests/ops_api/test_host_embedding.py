"""Host embeddings (`ipu.embedding_ops.create_host_embedding`, issue 31, item 7): lookups
on the simulated IPU read the host's table, and training updates it as SGD on an
ordinary embedding variable does in TensorFlow on the CPU (TensorFlow 1 and 2). The IR
ops' own rules (host transfer cost, kernels, strict mode) are in
`tests/ops/test_host_embedding_rules.py`."""
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.device import cost
from ipu_keras._src.device.targets import get_target
from ipu_keras._src.ops import host_embedding as host
from ipu_keras.errors import HostEmbeddingError, OpArgumentError
from ipu_keras.ops import embedding_ops as E

v1 = tf.compat.v1
TABLE = np.random.default_rng(3).normal(size=(16, 4)).astype(np.float32)
BATCHES = [np.array([[1, 2], [2, 15]], np.int32), np.array([[0, 2], [9, 9]], np.int32),
           np.array([[15, 3], [2, 1]], np.int32)]
LR = 0.25


# -- through TensorFlow ----------------------------------------------------------------------

def _model(lookup):
    """A step: look the batch up, a loss of the rows; minimize with plain SGD."""
    def body(ids):
        rows = lookup(ids)
        loss = tf.reduce_sum(tf.square(rows - 0.5) * tf.constant([1.0, 2.0, 3.0, 4.0]))
        train = v1.train.GradientDescentOptimizer(LR).minimize(loss)
        with tf.control_dependencies([train]):
            return tf.identity(loss)

    return body


def _host_training():
    with tf.Graph().as_default(), v1.Session() as sess:
        ids = v1.placeholder(np.int32, [2, 2])
        embedding = E.create_host_embedding(
            "words", [16, 4], np.float32, optimizer_spec=E.HostEmbeddingOptimizerSpec(LR),
            initializer=TABLE)
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            (loss,) = ipu.ipu_compiler.compile(_model(embedding.lookup), [ids])
        sess.run(v1.global_variables_initializer())
        with embedding.register(sess):
            losses = [sess.run(loss, {ids: batch}) for batch in BATCHES]
        names = [v.op.name for v in v1.global_variables()]
        return losses, sess.run(embedding.get_embedding_tensor()), names


def _cpu_training():
    """The oracle: the table as an ordinary variable, trained by the same SGD."""
    with tf.Graph().as_default(), v1.Session() as sess:
        ids = v1.placeholder(np.int32, [2, 2])
        table = v1.Variable(TABLE, use_resource=True)
        loss = _model(lambda i: tf.nn.embedding_lookup(table, i))(ids)
        sess.run(v1.global_variables_initializer())
        return [sess.run(loss, {ids: batch}) for batch in BATCHES], sess.run(table)


def test_tf1_training_updates_the_host_table_as_sgd_on_the_cpu(executions):
    losses, table, names = _host_training()
    assert len(executions) == len(BATCHES)
    want_losses, want_table = _cpu_training()
    T.FLOAT32.assert_close(losses, want_losses)
    T.FLOAT32.assert_close(table, want_table)
    assert not np.allclose(table, TABLE)
    assert names == ["words", "words/__dummy"]      # the SDK's variables
    report = ipu.profiling.last_report()
    assert report.cycles["host_io"] > 0


def test_eager_lookups_of_a_frozen_embedding_in_ipu_strategy(executions):
    variable = tf.Variable(TABLE)
    embedding = E.HostEmbedding("frozen", variable)
    ids = np.array([[3, 40], [-2, 7]], np.int32)   # clipped to [0, 15] by default
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope(), embedding.register() as registered:
        assert registered is embedding and host.is_registered("frozen")
        rows = strategy.run(tf.function(embedding.lookup), args=(ids,))
    assert not host.is_registered("frozen") and len(executions) == 1
    want = tf.nn.embedding_lookup(TABLE, np.clip(ids, 0, 15)).numpy()
    assert rows.shape == (2, 2, 4)
    T.EXACT.assert_close(rows.numpy(), want)
    np.testing.assert_array_equal(variable.numpy(), TABLE)


def test_a_lookup_outside_register_is_refused():
    embedding = E.HostEmbedding("unbound", tf.Variable(TABLE))
    strategy = ipu.ipu_strategy.IPUStrategy()
    with pytest.raises(HostEmbeddingError, match="'unbound' outside `with embedding.register"):
        strategy.run(tf.function(embedding.lookup), args=(np.zeros([2], np.int32),))


def test_the_sdk_surface_and_its_refusals():
    spec = E.HostEmbeddingSGDGAOptimizerSpec(0.5, 4)
    assert spec.get_learning_rate() == 0.5 and spec.get_accumulation_factor() == 4
    assert isinstance(spec, E.HostEmbeddingOptimizerSpec)
    assert spec.create_slot_variables(None, "x") == []
    embedding = E.create_host_embedding("e", [4, 2], tf.float32)
    np.testing.assert_array_equal(embedding.get_embedding_tensor().numpy(), np.zeros((4, 2)))
    with pytest.raises(NotImplementedError, match="HostEmbedding.register"):
        embedding()
    with pytest.raises(OpArgumentError, match="partition_strategy 'TOKEN' or 'ENCODING'.*"
                       "'ROW'"):
        E.HostEmbedding("e", tf.Variable(TABLE), partition_strategy="ROW")
    with pytest.raises(OpArgumentError, match="optimizer_spec. Received: 0.1"):
        E.HostEmbedding("e", tf.Variable(TABLE), optimizer_spec=0.1)
    with pytest.raises(OpArgumentError, match="embedding_tensor. Received: \\[1, 2\\]"):
        E.HostEmbedding("e", [1, 2])
    with pytest.raises(OpArgumentError, match="rank-2 shape.*shape=\\[4\\]"):
        E.create_host_embedding("e", [4], tf.float32)
    with tf.Graph().as_default():
        graph_embedding = E.create_host_embedding("g", [4, 2], tf.float32)
        with pytest.raises(OpArgumentError, match="a session when eager execution is "
                           "disabled. Received: session=None"):
            graph_embedding.register()
    with E.HostEmbedding("twice", tf.Variable(TABLE)).register():
        with pytest.raises(HostEmbeddingError, match="name='twice'"):
            E.HostEmbedding("twice", tf.Variable(TABLE)).register().__enter__()


def test_tf2_training_with_a_tape_that_watches_the_dummy():
    """In TensorFlow 2 the update rides on the gradient of `<name>/__dummy`: a tape over the
    variables the step read (as Keras' optimizers see them) updates the host table."""
    variable = tf.Variable(TABLE)
    embedding = E.HostEmbedding("tf2", variable, optimizer_spec=E.HostEmbeddingOptimizerSpec(LR))
    weights = tf.Variable([1.0, 2.0, 3.0, 4.0])

    @tf.function
    def step(ids):
        with tf.GradientTape() as tape:
            rows = embedding.lookup(ids)
            loss = tf.reduce_sum(tf.square(rows - 0.5) * weights)
        watched = tape.watched_variables()
        grads = tape.gradient(loss, watched)
        for v, g in zip(watched, grads):
            v.assign_sub(LR * g)
        return loss

    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope(), embedding.register():
        losses = [strategy.run(step, args=(batch,)).numpy() for batch in BATCHES]

    oracle_table, oracle_weights = tf.Variable(TABLE), tf.Variable([1.0, 2.0, 3.0, 4.0])
    want = []
    for batch in BATCHES:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(tf.nn.embedding_lookup(oracle_table, batch) - 0.5)
                                 * oracle_weights)
        for v, g in zip([oracle_table, oracle_weights],
                        tape.gradient(loss, [oracle_table, oracle_weights])):
            v.assign_sub(LR * tf.convert_to_tensor(g))
        want.append(loss.numpy())
    T.FLOAT32.assert_close(losses, want)
    T.FLOAT32.assert_close(variable.numpy(), oracle_table.numpy())
    T.FLOAT32.assert_close(weights.numpy(), oracle_weights.numpy())


@pytest.fixture
def two_replicas():
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = 2
    cfg.ipu_model.tiles_per_ipu = 16
    cfg.configure_ipu_system()
    yield
    ipu.config.reset_ipu_configuration()


def _lookup_loop(lookup):
    """4 steps x 2 replicas of `lookup` on the infeed's ids: (rows, the execution's report)."""
    ids = np.arange(16, dtype=np.int32)[::-1].reshape(8, 2)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(ids))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        strategy.run(tf.function(lambda: ipu.loops.repeat(
            4, lambda i: outfeed.enqueue(lookup(i)), infeed_queue=infeed)))
    return outfeed.dequeue().numpy(), ipu.profiling.last_report(), ids


def test_replicas_look_up_the_one_host_table_in_a_device_loop(two_replicas):
    embedding = E.HostEmbedding("shared", tf.Variable(TABLE))
    with embedding.register():
        rows, report, ids = _lookup_loop(embedding.lookup)
    T.EXACT.assert_close(rows, TABLE[ids].reshape(4, 2, 2, 4))   # [step, replica, 2, 4]
    # The same loop with the table on the device: the difference is the host transfers,
    # one per lookup: the 2 ids out (8 bytes), the 2 rows back (32 bytes), a host sync;
    # both replicas' bytes cross the host's one link, each IPU's through its own stage.
    on_device, device_report, _ = _lookup_loop(lambda i: tf.nn.embedding_lookup(TABLE, i))
    T.EXACT.assert_close(on_device, rows)
    target = get_target("ipu2", tiles_per_ipu=16)
    assert (report.cycles["host_io"] - device_report.cycles["host_io"]
            == 4 * (cost.host_io_cycles(32, target, 2)
                    + cost.host_io_cycles(8, target, 2, out=True)))
    assert report.memory["total_bytes"] < device_report.memory["total_bytes"]


def test_training_in_a_device_loop_matches_sgd_step_by_step():
    batches = np.stack(BATCHES)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(batches))
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    variable = tf.Variable(TABLE)
    embedding = E.HostEmbedding("looped", variable,
                                optimizer_spec=E.HostEmbeddingOptimizerSpec(LR))

    def body(ids):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(embedding.lookup(ids) - 0.5))
        watched = tape.watched_variables()
        for v, g in zip(watched, tape.gradient(loss, watched)):
            v.assign_sub(LR * g)
        return outfeed.enqueue(loss)

    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope(), embedding.register():
        strategy.run(tf.function(lambda: ipu.loops.repeat(3, body, infeed_queue=infeed)))

    oracle, want = tf.Variable(TABLE), []
    for batch in BATCHES:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(tf.nn.embedding_lookup(oracle, batch) - 0.5))
        oracle.assign_sub(LR * tf.convert_to_tensor(tape.gradient(loss, oracle)))
        want.append(loss.numpy())
    T.FLOAT32.assert_close(outfeed.dequeue().numpy(), want)
    T.FLOAT32.assert_close(variable.numpy(), oracle.numpy())


def test_a_constant_table_is_looked_up_and_not_written_back():
    embedding = E.HostEmbedding("constant", tf.constant(TABLE))
    with embedding.register():
        rows = embedding.lookup(np.array([[4, 1]], np.int32))   # eagerly, on the CPU
    T.EXACT.assert_close(rows.numpy(), TABLE[[[4, 1]]])
    assert not host.is_registered("constant")
