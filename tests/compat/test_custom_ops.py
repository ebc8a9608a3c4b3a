"""`ipu.custom_ops` (also `ipu.ops.custom_ops`): the user C++ operations are refused with
`UnsupportedCustomOpError` (a NotImplementedError) naming the function and the library and
pointing at writing the op in TensorFlow, eagerly and inside a compiled function, instead
of an AttributeError; `codelet_expression_op` runs its elementwise expression on the
simulated IPU and equals TensorFlow on the CPU."""
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T
from ipu_keras.errors import UnsupportedCustomOpError

LIBRARY = "/opt/ops/libcustom_rotate.so"
OUTS = {"output_types": [tf.float32], "output_shapes": [tf.TensorShape([4])]}


def test_the_module_is_reached_as_in_the_sdk():
    from ipu_keras.ops import custom_ops

    assert ipu.custom_ops is custom_ops is ipu.ops.custom_ops
    assert "custom_ops" in dir(ipu) and "custom_ops" in dir(ipu.ops)


@pytest.mark.parametrize("function,what", [
    ("precompiled_user_op", "builds a Poplar program"),
    ("cpu_user_operation", "calls a user C++ host function"),
])
def test_user_cpp_operations_are_refused_naming_the_library(function, what):
    call = getattr(ipu.custom_ops, function)
    with pytest.raises(UnsupportedCustomOpError) as raised:
        call([tf.ones([4])], LIBRARY, outs=OUTS, name="rotate")
    message = str(raised.value)
    assert f"ipu.custom_ops.{function} cannot run on the simulated IPU" in message
    assert what in message and f"Received: library_path='{LIBRARY}'" in message
    assert "Write the op with TensorFlow operations instead" in message
    assert isinstance(raised.value, NotImplementedError)


def test_refused_inside_a_compiled_function_too():
    strategy = ipu.ipu_strategy.IPUStrategy()

    @tf.function
    def step(x):
        return ipu.custom_ops.precompiled_user_op([x], LIBRARY, gp_path="/opt/ops/c.gp",
                                                  outs=OUTS)

    with strategy.scope(), pytest.raises(UnsupportedCustomOpError, match="precompiled_user_op"):
        strategy.run(step, args=(tf.ones([4]),))


def _expression(x, y, z):
    return x * x + y * z / (1.0 + x * x)


def test_codelet_expression_op_equals_tensorflow_on_the_cpu():
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal((3, 5)).astype(np.float32) for _ in range(3))
    strategy = ipu.ipu_strategy.IPUStrategy()

    @tf.function
    def step(x, y, z):
        return ipu.custom_ops.codelet_expression_op(_expression, x, y, z)

    with strategy.scope():
        got = strategy.run(step, args=(a, b, c))
    expected = _expression(tf.constant(a), tf.constant(b), tf.constant(c))
    T.FLOAT32.assert_close(got.numpy(), expected.numpy())
    assert got.dtype == tf.float32


def test_codelet_expression_op_has_the_first_inputs_dtype_and_no_gradient():
    x = tf.constant([1.5, -2.0, 3.0])
    y = tf.constant([2, 3, 4], tf.int32)
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = ipu.custom_ops.codelet_expression_op(lambda u, v: u * tf.cast(v, u.dtype), x, y)
    assert out.dtype == tf.float32
    T.EXACT.assert_close(out.numpy(), np.array([3.0, -6.0, 12.0], np.float32))
    assert tape.gradient(out, x) is None


def test_codelet_source_text_is_refused():
    with pytest.raises(UnsupportedCustomOpError, match="expected a Python function as "
                                                       "vertex_expression.*Received: "
                                                       "vertex_expression of type str"):
        ipu.custom_ops.codelet_expression_op("return in0 * in1;", tf.ones([2]), tf.ones([2]))
