"""`functional_ops.outlined_function`: one body program shared by every call.

Numerics against TensorFlow on the CPU running the same step (the decorator is a plain
function call there), forward, gradients and training through the function; the
executable's structure (one body block per function and direction, `Call` steps at each
call site), the report's listing, the code counted once and the cost of each call.
"""
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras._src.compiler.pipeline import compile_graph
from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.device import cost
from ipu_keras._src.device.executable import Executable
from ipu_keras._src.device.steps import Call
from ipu_keras._src.device.targets import get_target
from ipu_keras._src.driver import executor
from ipu_keras._src.reports.document import build
from ipu_keras._src.simulator.engine import Engine
from ipu_keras._src.tracer.trace import trace
from ipu_keras.errors import OutlinedFunctionError
from ipu_keras.ops import functional_ops
from tests.conftest import configured_ipus

RNG = np.random.RandomState(0)
W0 = RNG.randn(8, 8).astype("float32") / 3
X = RNG.randn(4, 8).astype("float32")


def make_step(outlined=True):
    """A step calling one block twice, and its variable."""
    w = tf.Variable(W0)

    def block(x):
        return tf.nn.relu(tf.matmul(x, w)) + 0.5 * x

    fn = functional_ops.outlined_function(block, name="blk") if outlined else block

    def step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(fn(fn(x))))
        grad = tape.gradient(loss, w)
        return loss, grad

    return step, w


class _NoStreams:
    pass


@pytest.fixture(scope="module")
def compiled():
    """The outlined and the inlined step compiled for a small IPU, and a run of the first."""
    target = get_target("ipu2", tiles_per_ipu=16)
    results = {}
    for outlined in (True, False):
        step, w = make_step(outlined)
        traced = trace(tf.function(step), (X,))
        results[outlined] = (compile_graph(traced.graph, target), w)
    exe, w = results[True]
    engine = Engine(exe)
    outputs = engine.run([X], [W0.copy()], _NoStreams())
    return results, engine, outputs


def test_forward_and_gradient_match_tensorflow_on_the_cpu():
    step, w = make_step()
    expected = [t.numpy() for t in tf.function(make_step(outlined=False)[0])(X)]
    with ipu.ipu_strategy.IPUStrategy().scope():
        got = ipu.ipu_strategy.IPUStrategy().run(tf.function(step), args=(X,))
    for a, b in zip(got, expected):
        T.FLOAT32.assert_close(np.asarray(a), b)


def test_training_through_an_outlined_function_matches_tensorflow():
    def run(outlined, runner):
        step, w = make_step(outlined)

        def train(x):
            loss, grad = step(x)
            w.assign_sub(0.05 * grad)
            return loss

        fn = tf.function(train)
        losses = [float(np.asarray(runner(fn))) for _ in range(3)]
        return losses, w.numpy()

    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        ipu_losses, ipu_w = run(True, lambda fn: strategy.run(fn, args=(X,)))
    cpu_losses, cpu_w = run(False, lambda fn: fn(X))
    T.FLOAT32.assert_close(np.array(ipu_losses), np.array(cpu_losses))
    T.FLOAT32.assert_close(ipu_w, cpu_w)
    assert ipu_losses[-1] < ipu_losses[0]


def test_one_body_block_per_function_and_direction_called_from_each_site(compiled):
    results, engine, _ = compiled
    exe = results[True][0]
    calls = [s for b in exe.blocks for s in b.steps if isinstance(s, Call)]
    assert sorted(s.name for s in calls) == ["blk", "blk", "blk (backward)", "blk (backward)"]
    bodies = {s.name: {c.body_block for c in calls if c.name == s.name} for s in calls}
    assert all(len(blocks) == 1 for blocks in bodies.values())   # shared, not copied
    for blocks in bodies.values():
        assert engine.counts[blocks.pop()] == 2                  # run once per call
    inlined = results[False][0]
    assert not any(isinstance(s, Call) for b in inlined.blocks for s in b.steps)


def test_the_outlined_run_gives_the_inlined_numbers(compiled):
    results, _, outputs = compiled
    inlined = Engine(results[False][0]).run([X], [W0.copy()], _NoStreams())
    for a, b in zip(outputs, inlined):
        T.FLOAT32.assert_close(a, b)


def test_the_report_lists_each_function_once_with_its_calls(compiled):
    results, engine, _ = compiled
    exe = results[True][0]
    report = json.loads(json.dumps(build(exe, "step", "key", engine.counts)))
    listed = {f["name"]: f for f in report["outlined_functions"]}
    assert sorted(listed) == ["blk", "blk (backward)"]
    for entry in listed.values():
        assert entry["call_sites"] == 2 and entry["calls"] == 2
        assert entry["cycles_per_call"] == exe.blocks[entry["block"]].cycles
        role = report["program"][entry["block"]]["role"]
        assert role == f"outlined function {entry['name']}"
    assert build(exe, "step", "key")["outlined_functions"][0]["calls"] is None


def test_code_is_counted_once(compiled):
    results, _, _ = compiled
    outlined = results[True][0].memory["categories"]
    inlined = results[False][0].memory["categories"]
    for kind in ("control_code", "vertex_state"):
        assert outlined[kind] < inlined[kind]


def test_each_call_pays_its_overhead_and_copies(compiled):
    results, engine, _ = compiled
    exe = results[True][0]
    rows = [r for r in exe.blocks[0].profile if r.op == "call"]
    assert len(rows) == 4
    target = get_target("ipu2", tiles_per_ipu=16)
    for row in rows:
        assert row.cycles["compute"] > cost.CALL_OVERHEAD_CYCLES   # overhead and copies
        assert row.cycles["sync"] == 2 * target.internal_sync_cycles
        assert len(row.blocks) == 1
    body_cycles = sum(sum(exe.blocks[r.blocks[0]].cycles.values()) for r in rows)
    main = sum(exe.blocks[0].cycles.values())
    assert sum(engine.cycles().values()) == main + body_cycles


def test_the_executable_saves_and_loads_with_its_calls(compiled, tmp_path):
    results, _, outputs = compiled
    path = tmp_path / "outlined.ipu_exec"
    results[True][0].save(path)
    loaded = Executable.load(path)
    again = Engine(loaded).run([X], [W0.copy()], _NoStreams())
    for a, b in zip(again, outputs):
        T.EXACT.assert_close(a, b)


def test_a_call_inside_a_loop_reuses_a_body_lowered_before_it():
    w = tf.constant(W0)
    blk = functional_ops.outlined_function(lambda x: tf.tanh(tf.matmul(x, w)))

    def fn(x):
        x = blk(x)
        for _ in tf.range(3):
            x = blk(x)
        return x

    exe = compile_graph(trace(tf.function(fn), (X,)).graph, get_target("ipu2", tiles_per_ipu=16))
    calls = [(i, s.body_block) for i, b in enumerate(exe.blocks) for s in b.steps
             if isinstance(s, Call)]
    assert len(calls) == 2 and len({body for _, body in calls}) == 1
    assert any(body < caller for caller, body in calls)   # the loop's call runs an earlier block
    engine = Engine(exe)
    (got,) = engine.run([X], [], _NoStreams())
    T.FLOAT32.assert_close(got, tf.function(fn)(X).numpy())
    assert engine.counts[calls[0][1]] == 4


def test_the_decorator_forms_and_the_sdk_arguments():
    double = functional_ops.outlined_function(unique_sharding=True, keep_input_layouts=False,
                                              name="my fn")(lambda x: x * 2)
    assert ipu.outlined_function is functional_ops.outlined_function
    T.EXACT.assert_close(tf.function(double)(tf.ones([2])).numpy(), np.full([2], 2.0))
    concrete = tf.function(double).get_concrete_function(tf.TensorSpec([2]))
    names = [op.get_attr("f").name for op in concrete.graph.get_operations()
             if op.type.endswith("PartitionedCall")]
    assert len(names) == 1 and "ipu_outlined__my_fn__" in names[0]


@pytest.mark.parametrize("kwargs, match", [
    ({"func": 3}, "expected a callable. Received: func=3"),
    ({"func": abs, "unique_sharding": "yes"}, "unique_sharding='yes'"),
    ({"func": abs, "keep_input_layouts": 1}, "keep_input_layouts=1"),
    ({"func": abs, "name": 7}, "name=7"),
])
def test_bad_arguments_are_refused_naming_the_value(kwargs, match):
    with pytest.raises(OutlinedFunctionError, match=match):
        functional_ops.outlined_function(**kwargs)


def test_bad_calls_are_refused():
    fn = functional_ops.outlined_function(lambda x: x + 1, name="f")
    with pytest.raises(OutlinedFunctionError, match="positional arguments only"):
        fn(x=tf.ones([1]))
    with pytest.raises(OutlinedFunctionError, match="argument 0 = <object"):
        fn(object())
    empty = functional_ops.outlined_function(lambda x: [], name="empty")
    with pytest.raises(OutlinedFunctionError, match="at least one tensor"):
        tf.function(empty)(tf.ones([1]))


class _Block(keras.layers.Layer):
    """A Keras layer whose call is an outlined function of its input and kernel."""

    def build(self, shape):
        self.w = self.add_weight(shape=(shape[-1], shape[-1]),
                                 initializer=keras.initializers.GlorotUniform(seed=1))
        self.fn = functional_ops.outlined_function(
            lambda x, w: tf.nn.gelu(tf.matmul(x, w)), name="block")

    def call(self, x):
        return self.fn(x, self.w)


def _keras_model():
    inputs = keras.Input((8,), batch_size=4)
    block = _Block()
    outputs = keras.layers.Dense(1, kernel_initializer=keras.initializers.GlorotUniform(
        seed=2))(block(block(inputs)))
    return keras.Model(inputs, outputs)


def test_a_keras_model_trains_through_an_outlined_layer_as_on_the_cpu(tmp_path):
    x = RNG.randn(32, 8).astype("float32")
    y = RNG.randn(32, 1).astype("float32")
    cpu = _keras_model()
    cpu.compile(keras.optimizers.SGD(0.05), "mse")
    expected = cpu.fit(x, y, batch_size=4, epochs=2, verbose=0, shuffle=False).history["loss"]
    ipu.profiling.enable_reports(str(tmp_path))
    try:
        with ipu.ipu_strategy.IPUStrategy().scope():
            model = _keras_model()
            model.compile(keras.optimizers.SGD(0.05), "mse", steps_per_execution=4)
            got = model.fit(x, y, batch_size=4, epochs=2, verbose=0,
                            shuffle=False).history["loss"]
        ipu.profiling.write_report()
    finally:
        ipu.profiling.disable_reports()
    T.FLOAT32.assert_close(np.array(got), np.array(expected))
    T.FLOAT32.assert_close(model.get_weights()[0], cpu.get_weights()[0])
    (path,) = tmp_path.glob("*train_step*/report.json")
    listed = json.loads(path.read_text())["outlined_functions"]
    # Two call sites per step, 4 steps per execution: each body ran 8 times.
    assert [(f["name"], f["call_sites"], f["calls"]) for f in listed] == [
        ("block", 2, 8), ("block (backward)", 2, 8)]


def test_a_body_assigning_a_variable_is_inlined_and_still_right():
    counter = tf.Variable(0.0)

    def counted(x):
        counter.assign_add(1.0)
        return x * 2

    blk = functional_ops.outlined_function(counted)

    def fn(x):
        return blk(blk(x))

    traced = trace(tf.function(fn), (X,))
    exe = compile_graph(traced.graph, get_target("ipu2", tiles_per_ipu=16))
    assert not any(isinstance(s, Call) for b in exe.blocks for s in b.steps)
    state = [np.float32(0)]
    (got,) = Engine(exe).run([X], state, _NoStreams())
    T.FLOAT32.assert_close(got, 4 * X)
    assert state[0] == 2.0


@pytest.fixture
def two_ipus():
    yield from configured_ipus(2)


def test_calls_on_two_ipus_get_one_body_per_ipu(two_ipus):
    w = tf.Variable(W0)
    blk = functional_ops.outlined_function(lambda x: tf.nn.relu(tf.matmul(x, w)),
                                           unique_sharding=True, name="blk")

    def step(x):
        with tf.GradientTape() as tape:
            with ipu.scopes.ipu_shard(0):
                y = blk(x)
            with ipu.scopes.ipu_shard(1):
                loss = tf.reduce_sum(tf.square(blk(blk(y))))
        return loss, tape.gradient(loss, w)

    with ipu.ipu_strategy.IPUStrategy().scope():
        got = ipu.ipu_strategy.IPUStrategy().run(tf.function(step), args=(X,))
    for a, b in zip(got, tf.function(step)(X)):
        T.FLOAT32.assert_close(np.asarray(a), b.numpy())
    exe = executor.last_compiled().executable
    calls = [(s.name, s.body_block) for b in exe.blocks for s in b.steps
             if isinstance(s, Call)]
    forward = [body for name, body in calls if name == "blk"]
    assert len(forward) == 3 and len(set(forward)) == 2   # IPU 0's body, IPU 1's body


def test_a_tensorflow_1_graph_outlines_its_calls_too(tmp_path):
    """In a TF1 graph run by a Session (whose cluster renames the library's functions),
    the calls and their gradient are outlined and give the CPU's numbers."""
    v1 = tf.compat.v1
    ipu.profiling.enable_reports(str(tmp_path))
    try:
        with tf.Graph().as_default():
            w = v1.get_variable("w", initializer=W0, use_resource=True)
            blk = functional_ops.outlined_function(lambda x: tf.nn.relu(tf.matmul(x, w)))
            x = v1.placeholder(tf.float32, X.shape)

            def net(x):
                loss = tf.reduce_sum(tf.square(blk(blk(x))))
                return loss, tf.gradients(loss, w)[0]

            with ipu.scopes.ipu_scope("/device:IPU:0"):
                on_ipu = ipu.ipu_compiler.compile(net, [x])
            on_cpu = net(x)
            with v1.Session() as sess:
                sess.run(v1.global_variables_initializer())
                got, expected = sess.run([on_ipu, on_cpu], {x: X})
        ipu.profiling.write_report()
    finally:
        ipu.profiling.disable_reports()
    for a, b in zip(got, expected):
        T.FLOAT32.assert_close(a, b)
    (path,) = tmp_path.glob("*/report.json")
    listed = json.loads(path.read_text())["outlined_functions"]
    assert [(f["name"], f["call_sites"], f["calls"]) for f in listed] == [
        ("function", 2, 2), ("function (backward)", 2, 2)]


def test_get_variable_in_the_body_is_one_variable_for_every_call():
    """As the SDK's function_block1 example: TF1's get_variable inside the body."""
    v1 = tf.compat.v1
    with tf.Graph().as_default():
        @functional_ops.outlined_function
        def blk(a):
            with v1.variable_scope("vs", use_resource=True):
                w = v1.get_variable("w", initializer=W0)
            return tf.matmul(a, w)

        x = v1.placeholder(tf.float32, X.shape)
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            (on_ipu,) = ipu.ipu_compiler.compile(lambda x: blk(blk(x)), [x])
        assert [v.name for v in v1.global_variables()] == ["vs/w:0"]
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            got = sess.run(on_ipu, {x: X})
    T.FLOAT32.assert_close(got, X @ W0 @ W0)
