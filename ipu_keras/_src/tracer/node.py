"""`Node`: the view of one TensorFlow op that importers in `ipu_keras._src.ops` see.

It hides TensorFlow from the op registry: attributes come back as plain Python and
numpy values, inputs as IR values (or `StateRef`s for resources), and compile-time
values of operands through TensorFlow's constant inference.
"""
import numpy as np
import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2

from ipu_keras.errors import StaticShapeRequiredError
from ipu_keras._src.ir.types import TensorType, dtype_name

_MISSING = object()


def numpy_dtype(tf_dtype):
    return dtype_name(tf.as_dtype(tf_dtype).as_numpy_dtype)


def tensor_type(tensor):
    """The IR type of a TensorFlow tensor, or None when its shape is not fully known."""
    shape = tensor.shape
    if shape.rank is None or any(d is None for d in shape.as_list()):
        return None
    return TensorType(tuple(shape.as_list()), numpy_dtype(tensor.dtype))


def _convert_attr(value):
    if isinstance(value, tf.DType):
        return numpy_dtype(value)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return [_convert_attr(v) for v in value]
    if hasattr(value, "unknown_rank") and hasattr(value, "dim"):  # TensorShapeProto
        return tuple(d.size for d in value.dim)
    if hasattr(value, "tensor_shape") and hasattr(value, "dtype"):  # TensorProto
        return tf.make_ndarray(value)
    return value


class Node:
    """One TensorFlow op, as an importer sees it."""

    def __init__(self, op, inputs, importer):
        self.op = op
        self.type = op.type
        self.name = op.name
        self.inputs = inputs
        self._importer = importer
        self.called = {}            # attr -> the IR graph imported for it
        self.initial_facts = None   # of a while loop: the facts of its initial carries

    @property
    def layer(self):
        return self._importer.layer_of(self.name)

    @property
    def out_types(self):
        types = [tensor_type(t) for t in self.op.outputs]
        if any(t is None for t in types):
            types = self._importer.infer_types(self.op, self.inputs)
        if types is None:
            raise StaticShapeRequiredError(
                f"The op '{self.name}' ({self.type}) needs a static output shape, expected "
                f"fully defined shapes. Received: {[str(t.shape) for t in self.op.outputs]}. "
                "Give the model a fixed batch size and input shape (or the loop variables "
                "a fixed shape)."
            )
        return types

    def attr(self, name, default=_MISSING):
        if name not in self.op.node_def.attr:
            if default is _MISSING:
                raise KeyError(f"Op '{self.name}' ({self.type}) has no attribute '{name}'.")
            return default
        if name.startswith("_"):
            value = self.op.node_def.attr[name]
            return _convert_attr(getattr(value, value.WhichOneof("value")))
        return _convert_attr(self.op.get_attr(name))

    def static(self, i):
        value = self._importer.static_value(self.op.inputs[i], self.inputs[i])
        if value is None:
            raise StaticShapeRequiredError(
                f"Input {i} of '{self.name}' ({self.type}) must be known at compile time, "
                f"expected a constant or a static shape. Received: a value computed at run time "
                f"from '{self.op.inputs[i].name}'."
            )
        return value

    def variable_index(self, ref):
        return self._importer.state.variable(self._expect(ref, "variable"))

    def variable_type(self, ref):
        return self._importer.state.variables[self.variable_index(ref)].type

    def infeed_index(self, ref, types):
        return self._importer.state.infeed(self._expect(ref, "iterator"), types)

    def outfeed_index(self, queue_id, types):
        queue = self._importer.outfeed_queue(queue_id)
        return self._importer.state.outfeed(queue, types)

    def function_name(self, attr):
        """The name of the library function that attribute `attr` names."""
        return self.op.node_def.attr[attr].func.name

    def function(self, attr, args):
        """Import the function named by attribute `attr`, binding its inputs to `args`.

        For a function run once per execution of the op (a call, a branch): what is
        known of `args` at compile time is known of its inputs.
        """
        self.called[attr] = self.function_named(self.function_name(attr), args)
        return self.called[attr]

    def function_named(self, fn_name, args):
        """Import the function `fn_name` of the graph's library, its inputs bound to `args`."""
        return self._importer.import_function(fn_name, args, self.op.graph)

    def loop(self, cond_attr, body_attr, args):
        """Import a while loop's cond and body, binding their inputs to the carries `args`.

        Their inputs are assumed only what holds on every iteration. Returns (cond, body).
        """
        names = [self.op.node_def.attr[a].func.name for a in (cond_attr, body_attr)]
        self.initial_facts, cond, body = self._importer.import_loop(*names, args, self.op.graph)
        self.called = {cond_attr: cond, body_attr: body}
        return cond, body

    def _expect(self, ref, kind):
        if getattr(ref, "kind", None) != kind:
            raise StaticShapeRequiredError(
                f"The op '{self.name}' ({self.type}) expected a {kind} resource it can "
                f"follow to its source. Received: {ref!r}."
            )
        return ref.obj


def set_outfeed_marker(op, queue_id):
    """Mark an op as an outfeed enqueue of queue `queue_id` (used by IPUOutfeedQueue)."""
    op._set_attr("_ipu_outfeed", attr_value_pb2.AttrValue(i=queue_id))
