"""Output shapes that TensorFlow could not infer, re-inferred from compile-time facts.

TensorFlow types each op when it builds the graph, from the constants it can see there.
Inside a function body (a while loop's, a branch's) an operand can be a placeholder to
TensorFlow and still be known to the tracer: a loop-invariant carry, an element popped
from a list of one constant (`tracer.facts`). `infer_types` runs TensorFlow's shape
inference for the op again, in a scratch graph where such operands are constants and
the others placeholders of their IR types.
"""
import tensorflow as tf

from ipu_keras._src.tracer.node import tensor_type


def infer_types(op, inputs, facts):
    """The IR types of `op`'s outputs given what is known of `inputs`, or None if unknown."""
    if any(value.HasField("func") for value in op.node_def.attr.values()):
        return None  # control flow: its bodies are imported, not re-inferred
    graph = tf.Graph()
    try:
        with graph.as_default():
            operands = [_operand(t, v, facts) for t, v in zip(op.inputs, inputs)]
            attrs = {k: v for k, v in op.node_def.attr.items() if not k.startswith("_")}
            scratch = graph._create_op_internal(
                op.type, operands, [t.dtype for t in op.outputs], attrs=attrs)
    except (ValueError, TypeError, tf.errors.OpError):
        return None  # facts that TensorFlow rejects: leave the error to the importer
    types = [tensor_type(t) for t in scratch.outputs]
    return None if any(t is None for t in types) else types


def _operand(tensor, value, facts):
    if tensor.dtype in (tf.resource, tf.variant):  # the IR value of a list is its buffer
        return tf.compat.v1.placeholder(tensor.dtype, tensor.shape)
    const = facts.const(value)
    if const is not None:
        return tf.constant(const, dtype=tensor.dtype)
    return tf.compat.v1.placeholder(tensor.dtype, value.type.shape)
