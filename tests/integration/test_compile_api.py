"""ipu_compiler.compile, scopes, control flow and errors, against TensorFlow on the CPU."""
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T
from ipu_keras.errors import UnsupportedOpError
from tests.conftest import configured


def test_tutorial_basic_graph():
    def basic_graph(pa, pb, pc):
        o1 = pa + pb
        o2 = pa + pc
        return o1 + o2

    a = np.array([1.0, 1.0], np.float32)
    b = np.array([0.0, 1.0], np.float32)
    c = np.array([1.0, 5.0], np.float32)
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        result = ipu.ipu_compiler.compile(basic_graph, [a, b, c])
    assert len(result) == 1
    np.testing.assert_array_equal(result[0], [3.0, 8.0])


def test_while_loop_and_cond_match_tensorflow():
    def fn(x, n):
        def body(i, acc):
            acc = tf.cond(tf.reduce_sum(acc) > 10.0, lambda: acc * 0.5, lambda: acc + x)
            return i + 1, acc

        _, out = tf.while_loop(lambda i, _: i < n, body, [tf.constant(0), tf.zeros_like(x)])
        return out

    x = np.array([1.5, 2.0, -0.5], np.float32)
    n = np.array(9, np.int32)
    expected = tf.function(fn)(x, n).numpy()
    T.FLOAT32.assert_close(ipu.ipu_compiler.compile(fn, [x, n])[0], expected)


def test_python_numbers_are_compile_time_constants_and_cached_per_value():
    def fn(x, scale):
        return x * scale

    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(ipu.ipu_compiler.compile(fn, [x, 2.0])[0], [2, 2, 2])
    np.testing.assert_array_equal(ipu.ipu_compiler.compile(fn, [x, 3.0])[0], [3, 3, 3])


def test_loops_repeat_with_an_infeed_matches_tensorflow():
    data = np.arange(24, dtype=np.float32).reshape(6, 4)
    dataset = tf.data.Dataset.from_tensor_slices(data).batch(2, drop_remainder=True)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset, prefetch_depth=2)

    def body(total, batch):
        return total + tf.reduce_sum(batch, axis=0)

    def program():
        return ipu.loops.repeat(3, body, [tf.zeros(4)], infeed)

    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        total = strategy.run(program)
    T.FLOAT32.assert_close(total, data.sum(axis=0))


def test_unsupported_op_is_named():
    def fn(x):
        return tf.math.real(tf.signal.fft(tf.complex(x, x)))

    with pytest.raises(UnsupportedOpError) as info:
        ipu.ipu_compiler.compile(fn, [np.ones(8, np.float32)])
    message = str(info.value)
    assert "'Complex'" in message or "'FFT'" in message
    assert "ipu_keras.supported_ops()" in message


def test_unsupported_op_names_the_keras_layer():
    import keras

    class Spectrum(keras.layers.Layer):
        def call(self, x):
            return tf.math.real(tf.signal.fft(tf.cast(x, tf.complex64)))

    layer = Spectrum(name="spectrum")
    with pytest.raises(UnsupportedOpError) as info:
        ipu.ipu_compiler.compile(lambda x: layer(x), [np.ones((2, 8), np.float32)])
    assert info.value.layer == "spectrum"
    assert "in Keras layer 'spectrum'" in str(info.value)


def test_supported_ops_lists_tensorflow_op_types():
    names = ipu.supported_ops()
    assert {"MatMul", "AddV2", "While", "ReadVariableOp", "IteratorGetNext"} <= set(names)
    assert "FFT" not in names


def test_the_ipu_model_runs_a_program_its_tiles_cannot_hold(monkeypatch, caplog):
    # 8 tiles of 624 KiB cannot hold two 4 MiB operands and their product; IPU hardware
    # (ipu_keras without the flag) stops, the IPU Model runs it (memory.check_memory).
    rng = np.random.default_rng(0)   # small integers: every sum exact in any order
    a, b = (rng.integers(-2, 3, (1024, 1024)).astype(np.float32) for _ in range(2))
    with configured(1, tiles_per_ipu=8):
        monkeypatch.setenv("TF_POPLAR_FLAGS", "")
        with pytest.raises(ipu.errors.OutOfTileMemoryError, match="Out of memory on tile"):
            ipu.ipu_compiler.compile(tf.matmul, [a, b])
        monkeypatch.setenv("TF_POPLAR_FLAGS", "--use_ipu_model")
        with caplog.at_level("WARNING", logger="ipu_keras"):
            result = ipu.ipu_compiler.compile(tf.matmul, [a, b])
    T.EXACT.assert_close(result[0], tf.matmul(a, b).numpy())
    assert "8 tile(s) out of memory" in caplog.text and "IPU Model" in caplog.text


def test_running_on_ipu_model_follows_the_flag(monkeypatch):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--use_ipu_model --log_cycle_count")
    assert ipu.utils.running_on_ipu_model() is True
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--log_cycle_count")
    assert ipu.utils.running_on_ipu_model() is False


@pytest.mark.parametrize("api", ["compile", "strategy"])
def test_results_are_host_tensors_inside_an_eager_ipu_scope(api, monkeypatch):
    # The device's results come back as host arrays; inside an eager `ipu_scope` (a
    # tf.device naming the IPU, a device TensorFlow has not) they must still become
    # tensors, on the CPU, also when the eager context has no soft placement (as after
    # some TensorFlow 1 sessions in the process).
    from ipu_keras._src.driver import executor

    monkeypatch.setattr(executor, "run", lambda fn, args, kwargs: (np.arange(3.0),))
    soft = tf.config.get_soft_device_placement()
    tf.config.set_soft_device_placement(False)
    try:
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            if api == "compile":
                (out,) = ipu.ipu_compiler.compile(lambda: None, [])
            else:
                (out,) = ipu.ipu_strategy.IPUStrategy().run(lambda: None)
    finally:
        tf.config.set_soft_device_placement(soft)
    assert out.device.endswith("CPU:0")
    T.EXACT.assert_close(out.numpy(), np.arange(3.0))
