"""`ipu_compiler.compile`: compile a function into one IPU executable and run it."""
import tensorflow as tf

from ipu_keras._src.driver import executor as _executor
from ipu_keras._src.tf1 import auto_cluster, cluster, in_graph_mode


def compile(computation, inputs=None):  # noqa: A001 - the IPU API's name
    """Compiles `computation` for the simulated IPU, runs it, and returns its outputs.

    Args:
        computation: A Python function or `tf.function`.
        inputs: A list of arguments for `computation` (tensors, numpy arrays, or any
            other values, which are treated as compile-time constants).

    Returns:
        A list of `tf.Tensor`s: the flattened outputs of `computation` (empty if it
        returns nothing), as the original's list of output tensors. When building a
        TensorFlow 1 graph, the list holds graph tensors that `Session.run` evaluates
        (each run executes the compiled function), or an operation when `computation`
        returns only operations.
    """
    if not callable(computation):
        raise TypeError(
            f"ipu_compiler.compile expected a callable computation (a Python function or "
            f"tf.function). Received: computation={computation!r}.")
    if in_graph_mode():
        with auto_cluster.compiling():  # its ops are compiled here, not auto-clustered
            return cluster.compile_in_graph(computation, list(inputs or ()))
    result = _executor.run(computation, tuple(inputs or ()), {})
    if result is None:
        return []
    return [_executor.host_tensor(x) for x in tf.nest.flatten(result, expand_composites=True)]
