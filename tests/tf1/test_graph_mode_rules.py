"""The TF1 path's rules: return types, resource variables, static shapes, transactions."""
import json

import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras.errors import InfeedExhaustedError, StaticShapeRequiredError

v1 = tf.compat.v1


def test_op_only_function_returns_an_op_that_runs_the_cluster():
    with tf.Graph().as_default(), v1.Session() as sess:
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            w = v1.get_variable("w", shape=[2], initializer=v1.ones_initializer())
            op = ipu.ipu_compiler.compile(lambda: w.assign_add([1.0, 2.0]).op, [])
        assert isinstance(op, tf.Operation)
        sess.run(v1.global_variables_initializer())
        sess.run(op)
        sess.run(op)
        np.testing.assert_array_equal(sess.run(w), [3.0, 5.0])


def test_ipu_scope_makes_resource_variables_and_runs_uncompiled_ops_on_the_ipu():
    with tf.Graph().as_default(), v1.Session() as sess:
        x = v1.placeholder(np.float32, [2])
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            v = v1.get_variable("v", shape=[2], initializer=v1.ones_initializer())
            y = x * v
        assert isinstance(v, tf.Variable) and "Resource" in type(v).__name__
        sess.run(v1.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(y, {x: [2.0, 3.0]}), [2.0, 3.0])
        # that y ran on the IPU: tests/tf1/test_ipu_scope_without_compile.py


def test_non_resource_variable_gives_the_originals_error_with_the_remedy():
    with tf.Graph().as_default():
        v = v1.get_variable("ref", shape=[2], use_resource=False)
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match="(?s)Cannot assign a device.*use_resource=True"):
            ipu.ipu_compiler.compile(lambda: v * 2.0, [])


def test_placeholder_without_static_shape_is_refused():
    with tf.Graph().as_default():
        x = v1.placeholder(np.float32, [None, 2])
        with pytest.raises(StaticShapeRequiredError, match="fully defined shape"):
            ipu.ipu_compiler.compile(lambda a: a + 1.0, [x])


def test_failed_execution_leaves_the_session_variables_untouched():
    with tf.Graph().as_default(), v1.Session() as sess:
        dataset = tf.data.Dataset.from_tensor_slices(np.ones((4, 2), np.float32))
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            w = v1.get_variable("w", shape=[2], initializer=v1.zeros_initializer())

            def body(x):
                return w.assign_add(x).op

            run = ipu.ipu_compiler.compile(lambda: ipu.loops.repeat(3, body, [], infeed), [])
        sess.run([infeed.initializer, v1.global_variables_initializer()])
        sess.run(run)
        np.testing.assert_array_equal(sess.run(w), [3.0, 3.0])
        with pytest.raises(tf.errors.OpError, match=InfeedExhaustedError.__name__):
            sess.run(run)  # one element left: the second execution fails part-way
        np.testing.assert_array_equal(sess.run(w), [3.0, 3.0])


def test_move_variable_initialization_to_cpu_places_initialisers_on_the_cpu():
    with tf.Graph().as_default() as graph:
        with tf.device("/device:IPU:0"):
            v = v1.get_variable("v", shape=[2], use_resource=True,
                                initializer=v1.random_uniform_initializer())
        ipu.utils.move_variable_initialization_to_cpu()
        assert "CPU" in v.initializer.device
        assert all("CPU" in op.device for op in graph.get_operations()
                   if op.name.startswith("v/Initializer"))


def test_event_trace_returns_the_last_executions_report():
    with tf.Graph().as_default(), v1.Session() as sess:
        x = v1.placeholder(np.float32, [2])
        out = ipu.ipu_compiler.compile(lambda a: a * 3.0, [x])
        trace = ipu.gen_ipu_ops.ipu_event_trace()
        sess.run(out, {x: [1.0, 2.0]})
        events = sess.run(trace)
    assert len(events) == 1
    assert json.loads(events[0])["total_cycles"] > 0


def test_op_only_cluster_without_variables_still_runs_and_outfeeds():
    data = np.arange(8, dtype=np.float32).reshape(4, 2)
    with tf.Graph().as_default(), v1.Session() as sess:
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(data))
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        op = ipu.ipu_compiler.compile(
            lambda: ipu.loops.repeat(2, lambda x: outfeed.enqueue(x * 2.0), [], infeed), [])
        dequeue = outfeed.dequeue()
        sess.run(infeed.initializer)
        got = []
        for _ in range(2):
            sess.run(op)
            got.append(sess.run(dequeue))
    with tf.Graph().as_default(), v1.Session() as cpu:
        expected = cpu.run(tf.constant(data) * 2.0)
    np.testing.assert_array_equal(np.concatenate(got), expected)


def test_infeed_deleter_releases_the_iterator():
    with tf.Graph().as_default(), v1.Session() as sess:
        dataset = tf.data.Dataset.range(4).batch(2, drop_remainder=True)
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
        run = ipu.ipu_compiler.compile(
            lambda: ipu.loops.repeat(1, lambda t, x: t + tf.reduce_sum(x),
                                     [tf.constant(0, tf.int64)], infeed), [])
        sess.run(infeed.initializer)
        assert sess.run(run)[0] == 1
        sess.run(infeed.deleter)
        with pytest.raises(tf.errors.OpError, match="initializer"):
            sess.run(run)
