"""`experimental_application_compile_op` and `ipu.embedded_runtime` on the simulator.

A function compiled to an executable file (our own format, no pickle) runs through the
embedded runtime one call per iteration of its loop: the results against TensorFlow on
the CPU computing the same body, variables frozen or passed at start, the restart after
the loop's last iteration, calls inside a tf.function, and the SDK's errors for misuse.
"""
import zipfile

import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.device.executable import Executable
from ipu_keras.errors import EmbeddedRuntimeDTypeError, EmbeddedRuntimeError
from ipu_keras.ops import application_compile_op, embedded_runtime
from tests.conftest import configured_ipus

ITERATIONS = 4
W = np.random.RandomState(0).randn(4, 3).astype("float32")


@pytest.fixture(scope="module", autouse=True)
def one_ipu():
    yield from configured_ipus(1)


def layer(x, w, b):
    return tf.tanh(tf.matmul(x, w)) + b


def compile_app(path, freeze, iterations=ITERATIONS):
    """A loop of `iterations` steps: each takes a [2, 4] batch, enqueues layer(x)."""
    dataset = tf.data.Dataset.from_tensors(tf.zeros([2, 4])).repeat()
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    w = tf.Variable(W, name="w")

    def body(b, x):
        return outfeed.enqueue({"result": layer(x, w, b), "sum": tf.reduce_sum(x)})

    def net(b):
        return ipu.loops.repeat(iterations, lambda x: body(b, x), [], infeed)

    result = application_compile_op.experimental_application_compile_op(
        net, inputs=[tf.constant(0.5)], output_path=str(path), freeze_variables=freeze)
    return result, w


@pytest.fixture(scope="module")
def frozen(tmp_path_factory):
    path, w = compile_app(tmp_path_factory.mktemp("app") / "frozen.poplar_exec", True)
    w.assign(np.zeros_like(W))   # after compiling: the file keeps the values it froze
    return path.numpy().decode()


@pytest.fixture(scope="module")
def unfrozen(tmp_path_factory):
    path, _ = compile_app(tmp_path_factory.mktemp("app") / "unfrozen.poplar_exec", False)
    return path.numpy().decode()


def batch(i):
    return np.full([2, 4], 0.1 * i, np.float32) + np.arange(8, dtype=np.float32).reshape(2, 4)


def test_each_call_runs_one_iteration_with_tensorflows_numbers(frozen):
    ctx = embedded_runtime.embedded_runtime_start(frozen, [np.float32(0.5)], "frozen")
    for i in range(ITERATIONS + 2):   # past the loop's end: the program starts again
        result, total = embedded_runtime.embedded_runtime_call([batch(i)], ctx)
        T.FLOAT32.assert_close(result.numpy(), layer(batch(i), W, 0.5).numpy())
        T.FLOAT32.assert_close(total.numpy(), batch(i).sum())
    report = ipu.profiling.last_report()
    assert report is not None and report.steps == ITERATIONS


def test_unfrozen_variables_are_start_inputs_by_position_or_name(unfrozen):
    ctx = embedded_runtime.embedded_runtime_start(unfrozen, {"w": 2 * W, "b": np.float32(1)},
                                                  "by_name")
    assert [s.name for s in ctx.signature().inputs] == ["b", "w"]
    assert ctx.output_types() == [tf.float32, tf.float32]
    (result, _), again = embedded_runtime.embedded_runtime_start_and_call(
        unfrozen, [np.float32(-1), W], [batch(1)], "by_position")
    T.FLOAT32.assert_close(result.numpy(), layer(batch(1), W, -1.0).numpy())
    (result, _) = embedded_runtime.embedded_runtime_call([batch(2)], ctx)
    T.FLOAT32.assert_close(result.numpy(), layer(batch(2), 2 * W, 1.0).numpy())
    assert again.name() == "by_position" and again.start_output().numpy() == b"by_position"


def test_calls_inside_a_tf_function(frozen):
    ctx = embedded_runtime.embedded_runtime_start(frozen, [np.float32(0.5)], "in_function")

    @tf.function
    def serve(x):
        result, _ = embedded_runtime.embedded_runtime_call([x], ctx)
        return result * 1.0

    for i in range(3):
        got = serve(tf.constant(batch(i)))
        assert got.shape == (2, 3)
        T.FLOAT32.assert_close(got.numpy(), layer(batch(i), W, 0.5).numpy())


def test_a_name_started_again_is_the_same_engine(frozen, unfrozen):
    first = embedded_runtime.embedded_runtime_start(frozen, [np.float32(0.5)], "twice")
    second = embedded_runtime.embedded_runtime_start(frozen, [np.float32(0.5)], "twice")
    assert first._runtime is second._runtime
    with pytest.raises(EmbeddedRuntimeError, match="already runs"):
        embedded_runtime.embedded_runtime_start(unfrozen, [np.float32(0.5), W], "twice")


def test_the_file_is_the_simulators_executable_format_without_pickle(frozen):
    with zipfile.ZipFile(frozen) as archive:
        assert sorted(archive.namelist()) == ["checksum", "constants.npz", "executable.json"]
    signature = Executable.load(frozen).info["application"]
    assert [t["shape"] for t in signature["streamed_inputs"]] == [[2, 4]]
    assert [t["shape"] for t in signature["streamed_outputs"]] == [[2, 3], []]
    T.EXACT.assert_close(signature["frozen"][0], W)


def test_a_temporary_file_is_named_as_the_sdks():
    path = application_compile_op.experimental_application_compile_op(
        lambda x: x * 2, inputs=[tf.ones([2])], name="double").numpy().decode()
    assert path.endswith(".poplar_exec") and "double" in path
    assert Executable.load(path).info["application"]["num_args"] == 1


@pytest.mark.parametrize("inputs, match", [
    ([], "expects 1 inputs, but 0 were provided"),
    ([np.zeros([2], np.float32)], r"Mismatched input shape at position 0 \('b'\). Expected "
                                  r"\[\], but input 0 has shape \[2\]"),
    ([np.int32(1)], r"Mismatched input dtype at position 0 \('b'\). Expected float32, but "
                    "input 0 has dtype int32"),
    ({"x": 1}, "Failed to find input tensor with name 'b' in input dictionary"),
    (np.float32(1), "Expected the inputs to be a list"),
])
def test_bad_start_inputs(frozen, inputs, match):
    with pytest.raises(EmbeddedRuntimeError, match=match):
        embedded_runtime.embedded_runtime_start(frozen, inputs, "bad_start")


def test_bad_call_inputs(frozen):
    ctx = embedded_runtime.embedded_runtime_start(frozen, [np.float32(0.5)], "bad_calls")
    with pytest.raises(EmbeddedRuntimeError, match="call expects 1 inputs, but 2 were"):
        embedded_runtime.embedded_runtime_call([batch(0), batch(0)], ctx)
    with pytest.raises(EmbeddedRuntimeError, match="Expected \\[2, 4\\], but input 0 has "
                                                   "shape \\[4\\]"):
        embedded_runtime.embedded_runtime_call([np.zeros(4, np.float32)], ctx)
    with pytest.raises(TypeError, match="Expected float32, but input 0 has dtype int32"):
        embedded_runtime.embedded_runtime_call([batch(0).astype(np.int32)], ctx)
    assert issubclass(EmbeddedRuntimeDTypeError, TypeError)
    result, _ = embedded_runtime.embedded_runtime_call([batch(3)], ctx)   # still serving
    T.FLOAT32.assert_close(result.numpy(), layer(batch(3), W, 0.5).numpy())
    result, _ = embedded_runtime.embedded_runtime_call([batch(1).tolist()], ctx)  # a list
    T.FLOAT32.assert_close(result.numpy(), layer(batch(1), W, 0.5).numpy())


def test_files_that_are_no_application_are_refused(tmp_path, frozen):
    popef = tmp_path / "application.popef"
    popef.write_bytes(b"POPEF\x00\x01binary")
    with pytest.raises(EmbeddedRuntimeError, match="Poplar executable or PopEF"):
        embedded_runtime.embedded_runtime_start(str(popef), [], "popef")
    with pytest.raises(EmbeddedRuntimeError, match="not a file"):
        embedded_runtime.embedded_runtime_start(str(tmp_path / "missing"), [], "missing")
    plain = tmp_path / "cache_entry.ipu_exec"
    executable = Executable.load(frozen)
    del executable.info["application"]
    executable.save(plain)
    with pytest.raises(EmbeddedRuntimeError, match="no application"):
        embedded_runtime.embedded_runtime_start(str(plain), [], "plain")
    damaged = tmp_path / "damaged.poplar_exec"
    data = bytearray(open(frozen, "rb").read())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    with pytest.raises(EmbeddedRuntimeError, match="cannot be used"):
        embedded_runtime.embedded_runtime_start(str(damaged), [np.float32(0)], "damaged")


def test_stopping_is_not_supported_as_in_the_sdk(frozen):
    ctx = embedded_runtime.embedded_runtime_start(frozen, [np.float32(0.5)], "stop")
    with pytest.raises(NotImplementedError, match="doesn't support stopping an engine"):
        embedded_runtime.embedded_runtime_stop(ctx)


def test_a_failing_program_fails_its_calls_with_an_internal_error(tmp_path):
    dataset = tf.data.Dataset.from_tensors(tf.zeros([], tf.int32)).repeat()
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    table = tf.constant(np.arange(5, dtype=np.float32))

    def net():
        return ipu.loops.repeat(2, lambda i: outfeed.enqueue(tf.gather(table, i)), [], infeed)

    path = application_compile_op.experimental_application_compile_op(
        net, output_path=str(tmp_path / "gather.poplar_exec"))
    ctx = embedded_runtime.embedded_runtime_start(path, [], "failing")
    (value,) = embedded_runtime.embedded_runtime_call([np.int32(3)], ctx)
    assert value.numpy() == 3.0
    for _ in range(2):   # the failed call, and every one after it
        with pytest.raises(tf.errors.InternalError, match="failing"):
            embedded_runtime.embedded_runtime_call([np.int32(99)], ctx)


def test_misuse_of_the_compile_op():
    with pytest.raises(TypeError, match="callable func. Received: func=3"):
        application_compile_op.experimental_application_compile_op(3)


def test_the_sdks_tensorflow_1_example_runs_unchanged(tmp_path):
    """The user guide's example (a loop doubling its infeed), in a TF1 graph: the compile
    op compiles when the Session runs it; each call op run doubles its batch."""
    v1 = tf.compat.v1
    path = str(tmp_path / "application.poplar_exec")
    with tf.Graph().as_default():
        dataset = tf.data.Dataset.from_tensors(tf.constant(1.0, shape=[4])).repeat()
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        scale = v1.get_variable("scale", initializer=np.float32(2.0), use_resource=True)

        def body(x):
            return outfeed.enqueue({"result": x * scale})

        compile_op = application_compile_op.experimental_application_compile_op(
            lambda: ipu.loops.repeat(16, body, [], infeed), output_path=path,
            freeze_variables=True)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            assert sess.run(compile_op).decode() == path
            sess.run(scale.assign(5.0))   # after compiling: the file keeps 2
        ctx = embedded_runtime.embedded_runtime_start(path, [], "tf1_engine")
        placeholder = v1.placeholder(tf.float32, shape=[4])
        (call,) = embedded_runtime.embedded_runtime_call([placeholder], ctx)
        assert call.shape == (4,)
        for i in range(3):
            with v1.Session() as sess:
                got = sess.run(call, {placeholder: np.full([4], i, np.float32)})
            T.EXACT.assert_close(got, np.full([4], 2.0 * i, np.float32))


def test_the_compile_op_inside_a_tf_function_compiles_when_it_runs(tmp_path):
    path = str(tmp_path / "in_function.poplar_exec")

    @tf.function
    def make(x):
        return application_compile_op.experimental_application_compile_op(
            lambda a: a * 3.0, inputs=[x], output_path=path)

    assert make(tf.ones([2])).numpy().decode() == path
    signature = Executable.load(path).info["application"]
    assert signature["inputs"] == [{"name": "a", "shape": [2], "dtype": "float32"}]
