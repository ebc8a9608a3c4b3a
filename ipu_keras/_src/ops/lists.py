"""Op family 'lists': TensorFlow's TensorList (TensorArray) ops as dense tensors.

A TensorList of static element shape and static length or capacity `n` is one dense IR
value of shape `(n,) + element_shape`: what TensorListReserve, EmptyTensorList and
TensorListFromTensor produce in place of TensorFlow's `variant`. So lists cross while
loops as ordinary loop variables, and TensorFlow's generic ops on lists (AddN of
gradient lists, ZerosLike) already mean the right thing on the dense value.

Owns the IR ops `list_reserve` (zeros), `list_get`/`list_set` (a dynamic index on axis
0) and `list_push`/`list_pop`. A list built by push-back has no length of its own: the
buffer is a shift register whose last row is the top of the stack (push shifts rows
up, pop shifts them down), which is how TensorFlow's while-loop gradients use their
accumulators (push every forward iteration, pop every backward one). TensorListLength
therefore answers the static length `n`, exact for every list built by Reserve or
FromTensor.
"""
import numpy as np

from ipu_keras.errors import IndexOutOfRangeError, StaticShapeRequiredError
from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops.registry import Work, register_op, tf_import

TF_TYPES = (
    "TensorListReserve", "EmptyTensorList", "TensorListFromTensor", "TensorListStack",
    "TensorListGetItem", "TensorListSetItem", "TensorListPushBack", "TensorListPopBack",
    "TensorListLength", "TensorListElementShape",
)
"""The TensorFlow op types this module imports."""

IR_OPS = ("list_reserve", "list_get", "list_set", "list_push", "list_pop")
"""The IR ops this module registers."""


def _element(buffer):
    return TensorType(buffer.shape[1:], buffer.dtype)


def _check_item(op, buffer, item):
    if buffer.rank < 1 or item != _element(buffer):
        raise ValueError(f"{op} expected an item of type {_element(buffer)}. "
                         f"Received: item={item}, list={buffer}")


def _check_index(op, index):
    if index.shape != () or not index.dtype.startswith("int"):
        raise ValueError(f"{op} expected a scalar integer index. Received: index={index}")


def _reserve_shape(in_types, *, shape, dtype):
    return [TensorType(tuple(shape), dtype)]


def _get_shape(in_types, **_):
    buffer, index = in_types
    _check_index("list_get", index)
    return [_element(buffer)]


def _set_shape(in_types, **_):
    buffer, index, item = in_types
    _check_index("list_set", index)
    _check_item("list_set", buffer, item)
    return [buffer]


def _push_shape(in_types, **_):
    buffer, item = in_types
    _check_item("list_push", buffer, item)
    if buffer.shape[0] < 1:
        raise ValueError(f"list_push expected a list with capacity. Received: list={buffer}")
    return [buffer]


def _pop_shape(in_types, **_):
    (buffer,) = in_types
    if buffer.rank < 1 or buffer.shape[0] < 1:
        raise ValueError(f"list_pop expected a non-empty list. Received: list={buffer}")
    return [buffer, _element(buffer)]


def _checked(index, length):
    i = int(index)
    if not 0 <= i < length:
        raise IndexOutOfRangeError(f"A TensorList index expected 0 <= index < {length}. "
                                   f"Received: index={i}")
    return i


def _list_get(buffer, index):
    return buffer[_checked(index, len(buffer))].copy()


def _list_set(buffer, index, item):
    out = buffer.copy()
    out[_checked(index, len(buffer))] = item
    return out


def _list_push(buffer, item):
    out = np.empty_like(buffer)
    out[:-1], out[-1] = buffer[1:], item
    return out


def _list_pop(buffer):
    out = np.empty_like(buffer)
    out[1:], out[0] = buffer[:-1], 0
    return out, buffer[-1].copy()


def _item_cost(in_types, out_types, **_):
    """An IPU updates the list in place: one element is copied."""
    return Work("copy", in_types[0].size // max(in_types[0].shape[0], 1))


register_op("list_reserve", shape=_reserve_shape,
            kernel=lambda *, shape, dtype: np.zeros(shape, dtype),
            cost=lambda in_types, out_types, **_: Work("copy", out_types[0].size),
            mapping="linear")
for _op, _shape, _kernel in (("list_get", _get_shape, _list_get),
                             ("list_set", _set_shape, _list_set),
                             ("list_push", _push_shape, _list_push),
                             ("list_pop", _pop_shape, _list_pop)):
    register_op(_op, shape=_shape, kernel=_kernel, cost=_item_cost, mapping="linear")


# -- importers ------------------------------------------------------------------------------


def _static_ints(node, i, what):
    try:
        value = np.asarray(node.static(i)).astype(int).reshape(-1).tolist()
    except StaticShapeRequiredError as err:
        raise StaticShapeRequiredError(
            f"The TensorList op '{node.name}' ({node.type}) needs a static {what}. {err} "
            "Give the TensorArray a fixed size and element_shape.") from None
    return value


def _element_shape(node, i):
    shape = _static_ints(node, i, "element shape")
    if np.ndim(node.static(i)) == 0 or any(d < 0 for d in shape):
        raise StaticShapeRequiredError(
            f"The TensorList op '{node.name}' ({node.type}) needs a fully known element "
            f"shape. Received: element_shape={node.static(i).tolist()}. Give the TensorArray "
            "an element_shape (or build it from a tensor of static shape).")
    return tuple(shape)


@tf_import("TensorListReserve", "EmptyTensorList")
def _import_reserve(node, b):
    element = _element_shape(node, 0)
    (length,) = _static_ints(node, 1, "length")
    if length < 0:
        raise StaticShapeRequiredError(
            f"The TensorList op '{node.name}' ({node.type}) needs a maximum number of "
            f"elements. Received: {length}. Give the while loop maximum_iterations.")
    return b.emit("list_reserve", [], shape=(length,) + element,
                  dtype=node.attr("element_dtype"))


@tf_import("TensorListFromTensor")
def _import_from_tensor(node, b):
    return node.inputs[0]


@tf_import("TensorListStack")
def _import_stack(node, b):
    buffer, out = node.inputs[0], node.out_types[0]
    if buffer.type != out:
        raise StaticShapeRequiredError(
            f"The TensorList op '{node.name}' stacks a list of type {buffer.type}, expected "
            f"to give {out}. Received: a list whose length is not static.")
    return buffer


@tf_import("TensorListGetItem")
def _import_get(node, b):
    return b.emit("list_get", node.inputs[:2])


@tf_import("TensorListSetItem")
def _import_set(node, b):
    return b.emit("list_set", node.inputs[:3])


@tf_import("TensorListPushBack")
def _import_push(node, b):
    return b.emit("list_push", node.inputs[:2])


@tf_import("TensorListPopBack")
def _import_pop(node, b):
    return list(b.emit("list_pop", node.inputs[:1]))


@tf_import("TensorListLength")
def _import_length(node, b):
    return b.const(node.inputs[0].type.shape[0], np.int32)


@tf_import("TensorListElementShape")
def _import_element_shape(node, b):
    return b.const(node.inputs[0].type.shape[1:], node.attr("shape_type"))
