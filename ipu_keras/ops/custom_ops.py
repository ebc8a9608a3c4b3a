"""`ipu.custom_ops` (`ipu.ops.custom_ops`): user operations.

`precompiled_user_op` splices a Poplar program built by user C++ (with its codelets)
into the IPU graph, and `cpu_user_operation` calls a user C++ function on the host: both
load a compiled shared library that the numpy simulator cannot run, so they raise
`UnsupportedCustomOpError` naming the function and the library, and say to write the op
in TensorFlow instead (the simulator compiles TensorFlow ops for the IPU; a
`tf.custom_gradient` gives it the gradient the C++ gradient builder gave).

`codelet_expression_op` is supported: its elementwise expression is a Python function,
applied here to the input tensors, so the simulator runs it like any TensorFlow ops. As
in the SDK the result has the first input's dtype and no gradient flows through it.
"""
import tensorflow as tf

from ipu_keras._src import compat
from ipu_keras.errors import UnsupportedCustomOpError

_WRITE_IN_TENSORFLOW = (
    "Write the op with TensorFlow operations instead (with tf.custom_gradient for a "
    "custom gradient): the simulator compiles those for the IPU.")


def _refuse(function, library_path, what):
    raise UnsupportedCustomOpError(
        f"ipu.custom_ops.{function} cannot run on the simulated IPU: it {what} from a "
        f"compiled shared library, and the numpy simulator cannot execute user C++ or "
        f"Poplar codelets. Received: library_path={library_path!r}. {_WRITE_IN_TENSORFLOW}")


def precompiled_user_op(inputs, library_path, gp_path="", outs=None, name="UserOp",
                        op_name="Build", separate_gradients=False, inputs_with_gradients=None,
                        attributes=None, gradient_attributes=None):
    """Refused: a Poplar program built by user C++ (and codelets in `gp_path`).

    Raises:
        UnsupportedCustomOpError: always; the simulator cannot run the library.
    """
    del inputs, gp_path, outs, name, op_name, separate_gradients, inputs_with_gradients
    del attributes, gradient_attributes
    _refuse("precompiled_user_op", library_path,
            "builds a Poplar program (and its codelets) with user C++")


def cpu_user_operation(inputs, library_path, outs=None, name="UserOp", op_name="Callback",
                       separate_gradients=False, inputs_with_gradients=None, attributes=None,
                       gradient_attributes=None):
    """Refused: a user C++ function run on the host between the IPU's copies.

    Raises:
        UnsupportedCustomOpError: always; the simulator cannot run the library.
    """
    del inputs, outs, name, op_name, separate_gradients, inputs_with_gradients
    del attributes, gradient_attributes
    _refuse("cpu_user_operation", library_path, "calls a user C++ host function")


def codelet_expression_op(vertex_expression, *args):
    """An elementwise expression of the input tensors, as one fused operation.

    Args:
        vertex_expression: A Python function of len(args) values using arithmetic and
            comparison operators, e.g. `lambda x, y: x * x + y`.
        *args: The input tensors.

    Returns:
        The expression's value, with the dtype of the first input. Like the SDK's fused
        codelet, it has no gradient.
    """
    if not callable(vertex_expression):
        raise UnsupportedCustomOpError(
            "codelet_expression_op expected a Python function as vertex_expression (the "
            "simulator evaluates it on the inputs; it compiles no codelet source). "
            f"Received: vertex_expression of type {type(vertex_expression).__name__}")
    if not args:   # as Python says of a missing argument
        raise TypeError("codelet_expression_op() expected at least one input tensor after "
                        "vertex_expression. Received: no args")
    tensors = [tf.convert_to_tensor(a) for a in args]
    result = tf.convert_to_tensor(vertex_expression(*tensors))
    return tf.stop_gradient(tf.cast(result, tensors[0].dtype))


for _name in ("precompiled_user_op", "cpu_user_operation"):
    compat.declare(f"ipu.custom_ops.{_name}", compat.NOT_SUPPORTED,
                   "raises UnsupportedCustomOpError: user C++ and Poplar codelets cannot run "
                   "on the simulator; write the op in TensorFlow", "2.1")
compat.declare("ipu.custom_ops.codelet_expression_op", compat.SUPPORTED,
               "the expression function applied to the input tensors (TensorFlow ops on the "
               "simulated IPU); first input's dtype, no gradient", "2.1")
