"""Eager ops under `tf.device('/device:IPU:0')` run on the simulated IPU (driver/eager.py).

No `tf.function`, no strategy: each op is compiled on its own (cached by signature), runs
on the simulator, and is the last execution that `profiling.last_report()` profiles.
TensorFlow on the CPU is the oracle; an op that cannot run on the IPU says so.
"""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.driver import eager
from tests.conftest import configured_ipus

IPU = "/device:IPU:0"
RNG = np.random.default_rng(31)
A = RNG.standard_normal((4, 8)).astype(np.float32)
B = RNG.standard_normal((8, 3)).astype(np.float32)


@pytest.fixture(scope="module", autouse=True)
def device():
    yield from configured_ipus(1)


def _last_execution():
    report = ipu.profiling.last_report()
    return None if report is None else report.to_dict()


def test_import_installs_the_ipu_device():
    assert eager.installed()


_IMPORTED_FIRST = """
import sys
import ipu_keras as ipu
assert "tensorflow" not in sys.modules
import tensorflow as tf
with tf.device("/device:IPU:0"):
    c = tf.matmul(tf.ones([2, 3]), tf.ones([3, 2]))
print(ipu.profiling.last_report().plans[0]["kind"], c.numpy().sum())
"""


def test_ipu_keras_imported_before_tensorflow_installs_the_device_when_it_loads():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", _IMPORTED_FIRST], capture_output=True,
                          text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["matmul", "12.0"]


def test_matmul_runs_on_the_ipu_and_is_the_last_execution_profiled():
    a, b = tf.constant(A), tf.constant(B)
    with tf.device(IPU):
        c = tf.matmul(a, b)
    report = ipu.profiling.last_report()
    assert isinstance(c, tf.Tensor) and c.shape == (4, 3)
    T.FLOAT32.assert_close(c.numpy(), tf.matmul(a, b).numpy())
    assert report.total_cycles > 0
    assert [(p["kind"], p["shape"]) for p in report.plans] == [("matmul", [4, 3])]


def test_ops_with_compile_time_inputs_match_the_cpu_without_a_warning():
    a = tf.constant(A)

    def ops():
        x = tf.concat([a, a * 2.0], axis=0)
        x = tf.transpose(tf.nn.relu(x - 0.5), [1, 0])
        return tf.reduce_sum(tf.reshape(x, [4, 16]), axis=1), tf.argmax(x, axis=0)

    expected = ops()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with tf.device(IPU):
            got = ops()
    T.FLOAT32.assert_close(got[0].numpy(), expected[0].numpy())
    T.EXACT.assert_close(got[1].numpy(), expected[1].numpy())
    assert got[1].dtype == tf.int64


def test_every_op_under_the_scope_executes_on_the_simulator(executions):
    a = tf.constant(A)
    b = a + 1.0  # outside the scope: TensorFlow on the CPU
    assert executions == []
    with tf.device(IPU):
        c = tf.exp(tf.negative(a * b))
    assert len(executions) == 3  # Mul, Neg, Exp
    T.FLOAT32.assert_close(c.numpy(), np.exp(-(A * (A + 1.0))))


def test_a_repeated_op_is_compiled_once(compiled):
    x = tf.constant(RNG.standard_normal((5, 7)).astype(np.float32))
    with tf.device(IPU):
        for _ in range(3):
            y = tf.math.square(x)
        z = tf.math.square(tf.constant(np.ones((5, 7), np.float32)))
        w = tf.math.square(tf.constant(np.ones((2, 7), np.float32)))  # another signature
    assert compiled == ["Square", "Square"]
    T.FLOAT32.assert_close(y.numpy(), np.square(x.numpy()))
    T.EXACT.assert_close(z.numpy(), np.ones((5, 7)))
    assert w.shape == (2, 7)


def test_gradient_tape_under_the_ipu_matches_the_cpu():
    def grads():
        a = tf.constant(A)
        with tf.GradientTape() as tape:
            tape.watch(a)
            loss = tf.reduce_sum(tf.tanh(tf.matmul(a, tf.constant(B))))
        return tape.gradient(loss, a)

    expected = grads()
    with tf.device(IPU):
        got = grads()
    T.FLOAT32.assert_close(got.numpy(), expected.numpy())


def test_variable_ops_run_on_the_host_and_say_so_once():
    eager._WARNED.discard("resources")
    with pytest.warns(RuntimeWarning, match=r"(?s)runs on the CPU.*variables"):
        with tf.device(IPU):
            v = tf.Variable(np.ones(3, np.float32))
            v.assign_add([1.0, 2.0, 3.0])
            y = v * 2.0
    T.EXACT.assert_close(y.numpy(), [4.0, 6.0, 8.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with tf.device(IPU):
            v.assign_sub([1.0, 1.0, 1.0])  # said already for resources
    T.EXACT.assert_close(v.numpy(), [1.0, 2.0, 3.0])


def test_an_op_the_simulator_cannot_run_warns_and_runs_on_the_cpu():
    eager._WARNED.discard("StringLength")
    with pytest.warns(RuntimeWarning, match="'StringLength'.*runs on the CPU"):
        with tf.device(IPU):
            n = tf.strings.length(tf.constant(["ipu", "keras"]))
    T.EXACT.assert_close(n.numpy(), [3, 5])


def test_tf_function_called_eagerly_on_the_ipu_warns_with_the_remedy():
    @tf.function
    def double(x):
        return x * 2.0

    eager._WARNED.clear()
    with pytest.warns(RuntimeWarning, match="IPUStrategy.run or ipu_compiler.compile"):
        with tf.device(IPU):
            y = double(tf.constant(A))
    T.EXACT.assert_close(y.numpy(), A * 2.0)


def test_ops_outside_an_ipu_scope_are_left_to_tensorflow():
    before = _last_execution()
    with tf.device("/device:CPU:0"):
        c = tf.matmul(tf.constant(A), tf.constant(B))
    assert _last_execution() == before
    T.FLOAT32.assert_close(c.numpy(), A @ B)


def test_eager_ipu_scope_places_ops_as_tf_device_does():
    a, b = tf.constant(A), tf.constant(B)
    with ipu.scopes.ipu_scope(IPU):
        c = tf.nn.relu(tf.matmul(a, b))
    T.FLOAT32.assert_close(c.numpy(), tf.nn.relu(tf.matmul(a, b)).numpy())
    assert [p["kind"] for p in ipu.profiling.last_report().plans] == []  # the Relu ran last


def test_compiled_calls_under_the_scope_keep_their_host_work_on_the_host(monkeypatch):
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        v = tf.Variable(np.ones(3, np.float32))

    @tf.function
    def step(x):
        v.assign_add(x)
        return v * 2.0

    one_ops = []
    monkeypatch.setattr(eager, "_run", lambda *args: one_ops.append(args[0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no op of the variable sync is said to leave the IPU
        with tf.device(IPU):
            out = strategy.run(step, args=(tf.constant([1.0, 2.0, 3.0]),))
            listed = ipu.ipu_compiler.compile(lambda x: x + 1.0, [tf.constant(A)])
    assert one_ops == []  # both ran as compiled programs only
    T.EXACT.assert_close(out.numpy(), [4.0, 6.0, 8.0])
    T.EXACT.assert_close(listed[0].numpy(), A + 1.0)


def test_without_a_configured_system_a_repeated_op_is_compiled_once(compiled):
    active = ipu.config.get_active_config()
    ipu.config.reset_ipu_configuration()  # each look-up now gives a new default config
    try:
        x = tf.constant(np.full((3, 3), 2.0, np.float32))
        with tf.device(IPU):
            for _ in range(3):
                y = tf.math.sqrt(x)
    finally:
        active.configure_ipu_system()
    assert compiled == ["Sqrt"]
    T.FLOAT32.assert_close(y.numpy(), np.sqrt(np.full((3, 3), 2.0)))


def test_the_cache_keeps_the_most_recently_used_signatures(compiled, monkeypatch):
    monkeypatch.setattr(eager, "MAX_CACHED_OPS", 2)
    monkeypatch.setattr(eager, "_CACHE", {})
    x = tf.constant(A)
    with tf.device(IPU):
        for op in (tf.math.abs, tf.math.ceil, tf.math.abs, tf.math.floor, tf.math.abs,
                   tf.math.ceil):
            y = op(x)
    assert compiled == ["Abs", "Ceil", "Floor", "Ceil"]  # Ceil was evicted by Floor
    T.EXACT.assert_close(y.numpy(), np.ceil(A))
