"""`ipu_compiler.compile` in a TensorFlow 1 graph run by `tf.compat.v1.Session`.

Every test builds a fresh `tf.Graph()`, so graph mode does not leak into the rest of
the suite. The same graph functions run by TensorFlow on the CPU are the oracle.
"""
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T

v1 = tf.compat.v1


def _graph():
    graph = tf.Graph()
    return graph, graph.as_default()


def _cpu_run(build, feeds_of, steps=1):
    """Runs `build()` on the CPU only (no IPU code) and returns each step's results."""
    with tf.Graph().as_default(), v1.Session() as sess:
        fetches, placeholders = build()
        sess.run(v1.global_variables_initializer())
        return [sess.run(fetches, dict(zip(placeholders, feeds_of(i)))) for i in range(steps)]


def _dense_model(x):
    w = v1.get_variable("w", shape=[3, 2], initializer=v1.random_uniform_initializer(seed=1))
    b = v1.get_variable("b", shape=[2], initializer=v1.constant_initializer(0.25))
    y = tf.nn.relu(tf.matmul(x, w) + b)
    loss = tf.reduce_sum(y * y)
    train = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    with tf.control_dependencies([train]):
        return tf.identity(loss)


def _feeds(i):
    return [np.arange(6, dtype=np.float32).reshape(2, 3) / (i + 1)]


def test_training_step_keeps_variables_in_the_session_across_runs():
    with tf.Graph().as_default(), v1.Session() as sess:
        x = v1.placeholder(np.float32, [2, 3])
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            loss = ipu.ipu_compiler.compile(_dense_model, [x])
        assert isinstance(loss, list) and len(loss) == 1
        sess.run(v1.global_variables_initializer())
        got = [sess.run(loss, {x: _feeds(i)[0]})[0] for i in range(3)]
        weights = sess.run(v1.global_variables())

    def build():
        x = v1.placeholder(np.float32, [2, 3])
        with v1.variable_scope("", use_resource=True):
            return [_dense_model(x), v1.global_variables()], [x]

    cpu = _cpu_run(build, _feeds, steps=3)
    np.testing.assert_allclose(got, [c[0] for c in cpu], **T.FLOAT32.kwargs)
    for mine, theirs in zip(weights, cpu[-1][1]):
        np.testing.assert_allclose(mine, theirs, **T.FLOAT32.kwargs)


def test_repeat_with_infeed_outfeed_and_global_step_on_the_cpu():
    data = np.arange(12, dtype=np.float32).reshape(6, 2)
    with tf.Graph().as_default(), v1.Session() as sess:
        dataset = tf.data.Dataset.from_tensor_slices(data).repeat()
        with tf.device("cpu"):
            infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
            step = v1.train.get_or_create_global_step()
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        def body(total, x):
            w = v1.get_variable("w", shape=[2], initializer=v1.constant_initializer(0.5))
            y = w * x
            with tf.control_dependencies([v1.assign_add(w, x * 0.1)]):
                enqueue = outfeed.enqueue(y)
            with tf.control_dependencies([enqueue]):
                return total + tf.reduce_sum(y)

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            total = ipu.ipu_compiler.compile(
                lambda: ipu.loops.repeat(3, body, [tf.constant(0.0)], infeed), [])
        increment = v1.assign_add(step, 1)
        ipu.utils.move_variable_initialization_to_cpu()
        dequeue = outfeed.dequeue()
        sess.run(infeed.initializer)
        with pytest.raises(ValueError, match="can only be accessed once"):
            infeed.initializer  # noqa: B018 - the property is what is tested
        sess.run(v1.global_variables_initializer())
        runs = [(sess.run(total)[0], sess.run(dequeue), sess.run(increment)) for _ in range(2)]

    expected_outfeeds = []
    with tf.Graph().as_default(), v1.Session() as cpu:  # the same arithmetic, by TF on the CPU
        x = v1.placeholder(np.float32, [2])
        w = tf.Variable(np.full(2, 0.5, np.float32))
        y = w * x
        with tf.control_dependencies([y]):
            update = w.assign_add(x * 0.1)
        cpu.run(w.initializer)
        for r in range(2):
            expected_outfeeds.append([cpu.run([y, update], {x: data[3 * r + i]})[0]
                                      for i in range(3)])
    for r, (got_total, got_outfeed, got_step) in enumerate(runs):
        assert got_step == r + 1
        np.testing.assert_allclose(got_outfeed, expected_outfeeds[r], **T.FLOAT32_FEW_OPS.kwargs)
        np.testing.assert_allclose(got_total, np.sum(expected_outfeeds[r]),
                                   **T.FLOAT32_FEW_OPS.kwargs)
