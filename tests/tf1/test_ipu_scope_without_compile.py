"""TF1 ops built in `ipu_scope` without `ipu_compiler.compile` run on the simulated IPU.

As the SDK's auto-clustering did, `Session.run` of such ops compiles each cluster of IPU
ops (`_src/tf1/auto_cluster.py`) and runs it on the simulator, where the profile of the
last execution counts it. TensorFlow running the same graph without the scope is the
oracle.
"""
import contextlib
import warnings

import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.tf1 import auto_cluster

v1 = tf.compat.v1
IPU = "/device:IPU:0"
RNG = np.random.default_rng(3)
X = RNG.standard_normal((4, 3)).astype(np.float32)


def _ops_of(session):
    """The TensorFlow ops of the planned matmuls of the session's executable (named as in
    the cluster); `executions` (tests/conftest.py) lists the sessions that ran."""
    return [p["node"].split("/", 1)[-1] for p in session.executable.info.get("plans", [])]


def test_basic_graph_runs_as_one_cluster_on_the_ipu(executions):
    """Graphcore's tutorial_basic.py: (pa + pb) + (pa + pc) -> [3. 8.]."""
    with tf.Graph().as_default(), v1.Session() as sess:
        with tf.device("cpu"):
            pa, pb, pc = (v1.placeholder(np.float32, [2], name=n) for n in "abc")
        with ipu.scopes.ipu_scope(IPU):
            result = (pa + pb) + (pa + pc)
        got = sess.run(result, {pa: [1.0, 1.0], pb: [0.0, 1.0], pc: [1.0, 5.0]})
    T.EXACT.assert_close(got, [3.0, 8.0])
    assert len(executions) == 1
    assert executions[0].executable.info["equations"] >= 3  # the three additions, one executable
    assert ipu.profiling.last_report().total_cycles > 0


def _mlp(x, scope):
    with scope:
        w = v1.get_variable("w", [3, 5], initializer=v1.constant_initializer(0.25))
        h = tf.nn.relu(tf.matmul(x, w) - 0.1)
        return tf.nn.softmax(tf.reduce_sum(h, axis=1, keepdims=True) * h)


def _run(scope, fetch_fn, feeds, steps=1):
    with tf.Graph().as_default(), v1.Session() as sess:
        x = v1.placeholder(np.float32, [None, 3])
        fetch = fetch_fn(x, scope)
        sess.run(v1.global_variables_initializer())
        return [sess.run(fetch, {x: f}) for f in feeds for _ in range(steps)]


def test_inference_matches_the_cpu_and_the_matmul_is_profiled(executions):
    got = _run(ipu.scopes.ipu_scope(IPU), _mlp, [X])
    expected = _run(contextlib.nullcontext(), _mlp, [X])
    T.FLOAT32.assert_close(got[0], expected[0])
    assert len(executions) == 1
    assert "MatMul" in _ops_of(executions[0])
    assert [p["kind"] for p in ipu.profiling.last_report().plans] == ["matmul"]


def test_each_input_shape_compiles_once(compiled, executions):
    feeds = [X, X[:2], X + 1.0]
    got = _run(ipu.scopes.ipu_scope(IPU), _mlp, feeds, steps=2)
    expected = _run(contextlib.nullcontext(), _mlp, feeds, steps=2)
    for g, e in zip(got, expected):
        T.FLOAT32.assert_close(g, e)
    assert len(compiled) == 2  # batch 4 and batch 2
    assert len(executions) == 6


def _training(x, scope):
    with scope:
        w = v1.get_variable("w", [3, 2], initializer=v1.constant_initializer(0.1))
        loss = tf.reduce_mean(tf.square(tf.nn.relu(tf.matmul(x, w)) - 1.0))
        train = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    return loss, train, w


def test_training_matches_the_cpu_with_the_gradients_on_the_ipu(executions):
    got = _run(ipu.scopes.ipu_scope(IPU), _training, [X], steps=3)
    forward_and_backward = len(executions)
    expected = _run(contextlib.nullcontext(), _training, [X], steps=3)
    for (loss, _, w), (cpu_loss, _, cpu_w) in zip(got, expected):
        T.FLOAT32.assert_close(loss, cpu_loss)
        T.FLOAT32.assert_close(w, cpu_w)
    assert len(executions) == forward_and_backward  # the CPU run executed nothing
    assert forward_and_backward > 3  # each step: the loss and the gradient clusters
    gradients = [e for e in executions if "MatMul_grad" in " ".join(_ops_of(e))]
    assert gradients


def test_ops_in_a_compile_call_are_compiled_once_not_clustered(executions):
    with tf.Graph().as_default(), v1.Session() as sess:
        x = v1.placeholder(np.float32, [4, 3])
        with ipu.scopes.ipu_scope(IPU):
            out = ipu.ipu_compiler.compile(lambda a: tf.nn.relu(a * 2.0), [x])
        got = sess.run(out, {x: X})
    T.EXACT.assert_close(got[0], np.maximum(X * 2.0, 0.0))
    assert len(executions) == 1


def test_ops_placed_on_the_cpu_inside_the_scope_stay_there(executions):
    with tf.Graph().as_default(), v1.Session() as sess:
        x = v1.placeholder(np.float32, [4, 3])
        with ipu.scopes.ipu_scope(IPU):
            with tf.device("/device:CPU:0"):
                y = x * 3.0
        got = sess.run(y, {x: X})
    T.EXACT.assert_close(got, X * 3.0)
    assert executions == []


def test_an_op_the_simulator_cannot_run_warns_and_runs_on_the_cpu(executions):
    auto_cluster._WARNED.discard("StringLength")
    with tf.Graph().as_default(), v1.Session() as sess:
        words = v1.placeholder(tf.string, [2])
        with pytest.warns(RuntimeWarning, match=r"\(StringLength\).*runs on the CPU"):
            with ipu.scopes.ipu_scope(IPU):
                n = tf.strings.length(words) * 2
        got = sess.run(n, {words: ["ipu", "keras"]})
    T.EXACT.assert_close(got, [6, 10])
    assert len(executions) == 1  # the multiplication, on the IPU


def test_the_graph_keeps_no_ipu_device_for_the_session():
    with tf.Graph().as_default() as graph:
        x = v1.placeholder(np.float32, [4, 3])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            _training(x, ipu.scopes.ipu_scope(IPU))
    assert not [op.name for op in graph.get_operations() if "IPU" in op.device]


def _loop_and_condition(x, scope):
    with scope:
        _, y = tf.while_loop(lambda i, y: i < 4, lambda i, y: (i + 1, y * 2.0 + 1.0), [0, x])
        return tf.cond(tf.reduce_sum(y) > 10.0, lambda: y * 10.0, lambda: y - 1.0)


def test_a_while_loop_and_a_condition_join_one_cluster(executions):
    feeds = [X, -X * 0.01]  # both branches
    got = _run(ipu.scopes.ipu_scope(IPU), _loop_and_condition, feeds)
    assert len(executions) == 2  # one execution per Session.run
    expected = _run(contextlib.nullcontext(), _loop_and_condition, feeds)
    for g, e in zip(got, expected):
        T.FLOAT32.assert_close(g, e)


def test_a_cluster_that_cannot_be_compiled_warns_and_runs_on_the_cpu(executions):
    auto_cluster._WARNED.discard("Mul")
    with tf.Graph().as_default(), v1.Session() as sess:
        z = v1.placeholder(tf.complex64, [2])
        with ipu.scopes.ipu_scope(IPU):
            squared = z * z
        with pytest.warns(RuntimeWarning, match=r"(?s)cannot be compiled.*complex"):
            got = sess.run(squared, {z: [1 + 2j, 3j]})
    T.EXACT.assert_close(got, np.array([1 + 2j, 3j]) ** 2)
    assert executions == []
