"""The TensorFlow 1 session path: compiled clusters, feeds and variables in a `tf.Graph`.

`in_graph_mode()` says whether a call is building a TF1 graph (not eager, not inside a
`tf.function`); the thin API modules (`ipu_compiler`, `loops`, the feed queues,
`scopes`, `utils`) then hand over to `cluster` and `feeds` here.
"""
import contextlib
import logging

import tensorflow as tf

logger = logging.getLogger("ipu_keras")


def in_graph_mode():
    """True when building a TF1 graph: graph mode, and not inside a `tf.function`."""
    if tf.executing_eagerly() or tf.inside_function():
        return False
    return True


def move_initialization_to_cpu(graph):
    """Places every global variable's initialiser, and the ops it is computed from, on the CPU.

    Ops already given a device other than an IPU keep it. Returns the moved ops' names.
    """
    moved, stack = [], []
    for var in graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES):
        stack.append(var.initializer)
    seen = set()
    while stack:
        op = stack.pop()
        if op.name in seen or op.type in ("VarHandleOp", "VariableV2"):
            continue
        seen.add(op.name)
        if not op.device or "IPU" in op.device.upper():
            op._set_device("/device:CPU:0")  # noqa: SLF001 - as the original does
            moved.append(op.name)
        stack.extend(t.op for t in op.inputs)
    return moved


@contextlib.contextmanager
def resource_variables():
    """A TF1 `ipu_scope`'s variable scope: variables made inside are resource variables."""
    scope = tf.compat.v1.get_variable_scope()
    with tf.compat.v1.variable_scope(scope, use_resource=True, auxiliary_name_scope=False):
        yield
