"""Op family 'array': shapes and data movement (no arithmetic on the values).

IR ops: `reshape`, `transpose`, `concat`, `split`, `tile`, `broadcast_to`, `pad`,
`reverse`, `bitcast` and `cumsum`. Every shape-like operand becomes a static param at
import time, so kernels never see dynamic shapes. TensorFlow ops whose result depends
only on static shapes (Shape, Size, Rank, Range, BroadcastGradientArgs, ...) import as
constants, and pass-throughs (StopGradient, Snapshot, ...) emit no equation at all.

Indexing ops (slices, gathers, scatters, one-hot) live in `ops/indexing.py`.
"""
import math

import numpy as np

from ipu_keras.errors import StaticShapeRequiredError
from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops import simd
from ipu_keras._src.ops._common import no_cost, per_output_element
from ipu_keras._src.ops.registry import register_op, tf_import

TF_TYPES = (
    "Reshape", "ExpandDims", "Squeeze", "Transpose", "ConcatV2", "Pack", "Unpack", "Split",
    "SplitV", "Tile", "BroadcastTo", "Fill", "Range", "Shape", "ShapeN", "Size", "Rank",
    "BroadcastGradientArgs", "Pad", "PadV2", "MirrorPad", "ReverseV2", "StopGradient",
    "Snapshot", "PreventGradient", "EnsureShape", "CheckNumerics", "InvertPermutation",
    "Bitcast", "Cumsum", "ConcatOffset", "Empty",
)

IR_OPS = ("reshape", "transpose", "concat", "split", "tile", "broadcast_to", "pad", "reverse",
          "bitcast", "cumsum", "invert_permutation")
PAD_MODES = ("constant", "reflect", "symmetric")

_copy_cost = per_output_element("copy")


def ints(values):
    """A flat tuple of python ints from an array, list or scalar."""
    return tuple(int(v) for v in np.asarray(values).reshape(-1))


def _axis(axis, rank):
    """A possibly negative axis as a non-negative one, checked against `rank`."""
    axis = int(np.asarray(axis).reshape(-1)[0])
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"Axis out of range, expected -{rank} <= axis < {rank}. "
                         f"Received: axis={axis}")
    return axis % rank if rank else 0


# ---------------------------------------------------------------------------------------
# IR ops


def _reshape_shape(in_types, *, shape):
    shape = tuple(shape)
    if math.prod(shape) != in_types[0].size:
        raise ValueError(f"Cannot reshape {in_types[0]} to shape {shape}, expected the same "
                         f"number of elements. Received: shape={shape}")
    return [TensorType(shape, in_types[0].dtype)]


def _reshape(x, *, shape):
    return np.reshape(x, tuple(shape))


register_op("reshape", shape=_reshape_shape, kernel=_reshape, cost=no_cost,
            mapping="elementwise",
            tile_rule="probe", tile_moves=(0,))


def _transpose_shape(in_types, *, perm):
    return [TensorType([in_types[0].shape[p] for p in perm], in_types[0].dtype)]


def _transpose(x, *, perm):
    return np.ascontiguousarray(np.transpose(x, tuple(perm)))


register_op("transpose", shape=_transpose_shape, kernel=_transpose, cost=_copy_cost,
            mapping="linear",
            tile_rule="probe", tile_moves=(0,))


def _concat_shape(in_types, *, axis):
    first = in_types[0]
    for t in in_types[1:]:
        same = t.rank == first.rank and all(
            a == b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != axis)
        if not same or t.dtype != first.dtype:
            raise ValueError(f"Cannot concatenate {first} and {t} on axis {axis}, expected "
                             f"equal dtypes and equal sizes off that axis. Received: {t}")
    shape = list(first.shape)
    shape[axis] = sum(t.shape[axis] for t in in_types)
    return [TensorType(shape, first.dtype)]


def _concat(*xs, axis):
    return np.concatenate(xs, axis=axis)


def _concat_view(in_types, out_types, *, axis):
    """The operands end to end: for each index of the axes before `axis`, each operand's
    block of the axes from `axis` on (IPU TensorFlow lowers a concatenation as
    `poplar::concat` of its operands' tensors, a view, with no copy:
    graphcore/tensorflow@b2127bb, `driver/visitors/visitor_full.cc`,
    `FullVisitor::HandleConcatenate`; its dataflow analysis makes the result an alias
    of every operand, `driver/tools/hlo_poplar_dataflow_analysis.cc`)."""
    outer = math.prod(out_types[0].shape[:axis])
    blocks = [t.size // outer if outer else 0 for t in in_types]
    at = np.cumsum([0] + blocks)
    return (tuple((k, 0, block, block, outer, int(at[k]), int(at[-1]))
                  for k, block in enumerate(blocks) if block),)


register_op("concat", shape=_concat_shape, kernel=_concat, cost=_copy_cost,
            mapping="linear",
            tile_rule="probe", tile_moves="all", view=_concat_view)


def _split_shape(in_types, *, axis, sizes):
    x = in_types[0]
    if sum(sizes) != x.shape[axis]:
        raise ValueError(f"Split sizes must add up to dimension {axis} of {x}. "
                         f"Received: sizes={tuple(sizes)}")
    return [TensorType(x.shape[:axis] + (n,) + x.shape[axis + 1:], x.dtype) for n in sizes]


def _split(x, *, axis, sizes):
    cuts = np.cumsum(sizes)[:-1]
    return tuple(np.ascontiguousarray(p) for p in np.split(x, cuts, axis=axis))


def _split_view(in_types, out_types, *, axis, sizes):
    """Each part is a slice of the operand on `axis`, a view (TensorFlow's XLA bridge
    builds a split as one static slice per part, graphcore/tensorflow@b2127bb,
    `compiler/tf2xla/kernels/split_op.cc`, which IPU TensorFlow lowers as
    `indexing._slice_view` says): for each index of the axes before `axis`, the part's
    block of the axes from `axis` on."""
    x = in_types[0]
    outer = math.prod(x.shape[:axis])
    inner = math.prod(x.shape[axis + 1:])
    offsets = np.cumsum((0,) + tuple(sizes))[:-1]
    return tuple(((0, int(c) * inner, x.shape[axis] * inner, n * inner, outer, 0, n * inner),)
                 for c, n in zip(offsets, sizes))


register_op("split", shape=_split_shape, kernel=_split, cost=_copy_cost, mapping="linear",
            tile_rule="probe", tile_moves=(0,), view=_split_view)


def _tile_shape(in_types, *, multiples):
    x = in_types[0]
    return [TensorType([d * m for d, m in zip(x.shape, multiples)], x.dtype)]


def _tile(x, *, multiples):
    return np.tile(x, tuple(multiples))


register_op("tile", shape=_tile_shape, kernel=_tile, cost=_copy_cost, mapping="linear",
            tile_rule="probe", tile_moves=(0,))


def _broadcast_shape(in_types, *, shape):
    np.broadcast_shapes(in_types[0].shape, tuple(shape))
    return [TensorType(shape, in_types[0].dtype)]


def _broadcast_to(x, *, shape):
    return np.array(np.broadcast_to(x, tuple(shape)))


register_op("broadcast_to", shape=_broadcast_shape, kernel=_broadcast_to, cost=_copy_cost,
            mapping="linear",
            tile_rule="probe", tile_moves=(0,))


def _pad_shape(in_types, *, paddings, mode):
    assert mode in PAD_MODES, mode
    x = in_types[0]
    if any(lo < 0 or hi < 0 for lo, hi in paddings):
        raise ValueError(f"pad expected non-negative paddings. Received: paddings="
                         f"{[list(p) for p in paddings]} for {x}")
    return [TensorType([d + lo + hi for d, (lo, hi) in zip(x.shape, paddings)], x.dtype)]


def _pad(x, *value, paddings, mode):
    """`value` is the constant fill (a scalar array) in mode "constant", else absent."""
    pads = [tuple(p) for p in paddings]
    if mode == "constant":
        fill = value[0] if value else 0
        return simd.pad(x, pads, fill)
    return np.pad(x, pads, mode=mode)


register_op("pad", shape=_pad_shape, kernel=_pad, cost=_copy_cost, mapping="linear",
            tile_rule="probe", tile_moves=(0,), tile_fill=1)


def _reverse(x, *, axes):
    return np.ascontiguousarray(np.flip(x, tuple(axes)))


register_op("reverse", shape=lambda in_types, *, axes: [in_types[0]], kernel=_reverse,
            cost=_copy_cost, mapping="linear",
            tile_rule="probe", tile_moves=(0,))


def _bitcast_shape(in_types, *, dtype):
    x = in_types[0]
    size_in, size_out = x.itemsize, np.dtype(dtype).itemsize
    if size_in > size_out:
        return [TensorType(x.shape + (size_in // size_out,), dtype)]
    if size_in < size_out and (not x.shape or x.shape[-1] != size_out // size_in):
        raise ValueError(f"Cannot bitcast {x} to {dtype}, expected a last dimension of "
                         f"{size_out // size_in}. Received: shape={x.shape}")
    return [TensorType(x.shape[:-1] if size_in < size_out else x.shape, dtype)]


def _bitcast(x, *, dtype):
    out = np.ascontiguousarray(x).view(dtype)
    size_in, size_out = x.dtype.itemsize, np.dtype(dtype).itemsize
    if size_in > size_out:
        return out.reshape(x.shape + (size_in // size_out,))
    return out.reshape(x.shape[:-1]) if size_in < size_out else out


register_op("bitcast", shape=_bitcast_shape, kernel=_bitcast, cost=no_cost,
            mapping="linear")


def _cumsum(x, *, axis, exclusive, reverse):
    if reverse:
        x = np.flip(x, axis)
    out = np.cumsum(x, axis=axis, dtype=x.dtype)
    if exclusive:
        out = np.concatenate([np.zeros_like(np.take(out, [0], axis)),
                              np.take(out, np.arange(x.shape[axis] - 1), axis)], axis=axis)
    return np.ascontiguousarray(np.flip(out, axis) if reverse else out)


register_op("cumsum", shape=lambda in_types, **_: [in_types[0]], kernel=_cumsum,
            cost=per_output_element("vector"), mapping="linear")


# ---------------------------------------------------------------------------------------
# Import helpers shared with `ops/indexing.py`


def reshape(b, x, shape):
    """`x` reshaped to `shape`, without an equation when the shape does not change."""
    shape = tuple(int(d) for d in shape)
    return x if x.type.shape == shape else b.emit("reshape", [x], shape=shape)


def out_shape(node, i=0):
    return node.out_types[i].shape


# ---------------------------------------------------------------------------------------
# Importers: reshapes and data movement


@tf_import("Reshape", "ExpandDims", "Squeeze")
def _import_reshape(node, b):
    return reshape(b, node.inputs[0], out_shape(node))


@tf_import("StopGradient", "Snapshot", "PreventGradient", "EnsureShape", "CheckNumerics")
def _import_pass_through(node, b):
    return node.inputs[0]


@tf_import("Transpose")
def _import_transpose(node, b):
    x = node.inputs[0]
    perm = tuple(p % x.type.rank for p in ints(node.static(1)))
    if perm == tuple(range(x.type.rank)):
        return x
    return b.emit("transpose", [x], perm=perm)


def concat(b, values, axis):
    return values[0] if len(values) == 1 else b.emit("concat", list(values), axis=axis)


@tf_import("ConcatV2")
def _import_concat(node, b):
    values = node.inputs[:-1]
    axis = _axis(node.static(len(values)), values[0].type.rank)
    return concat(b, values, axis)


@tf_import("ConcatOffset")
def _import_concat_offset(node, b):
    """Where each input starts in the concatenation: a constant of the static shapes."""
    shapes = [np.asarray(node.static(i)) for i in range(1, len(node.inputs))]
    axis = int(node.static(0)) % len(shapes[0])
    starts = np.cumsum([0] + [shape[axis] for shape in shapes[:-1]])
    offsets = []
    for shape, start in zip(shapes, starts):
        offset = np.zeros_like(shape)
        offset[axis] = start
        offsets.append(b.const(offset))
    return offsets


@tf_import("Pack")
def _import_pack(node, b):
    rank = node.inputs[0].type.rank
    axis = _axis(node.attr("axis", 0), rank + 1)
    shape = node.inputs[0].type.shape
    parts = [reshape(b, x, shape[:axis] + (1,) + shape[axis:]) for x in node.inputs]
    return concat(b, parts, axis)


def split(b, x, axis, sizes):
    """`x` cut along `axis` into pieces of the given sizes: a list of Values."""
    if len(sizes) == 1:
        return [x]
    out = b.emit("split", [x], axis=axis, sizes=tuple(sizes))
    return list(out)


@tf_import("Unpack")
def _import_unpack(node, b):
    x = node.inputs[0]
    axis = _axis(node.attr("axis", 0), x.type.rank)
    shape = x.type.shape[:axis] + x.type.shape[axis + 1:]
    return [reshape(b, p, shape) for p in split(b, x, axis, [1] * x.type.shape[axis])]


@tf_import("Split")
def _import_split(node, b):
    x = node.inputs[1]
    axis = _axis(node.static(0), x.type.rank)
    num = int(node.attr("num_split"))
    return split(b, x, axis, [x.type.shape[axis] // num] * num)


@tf_import("SplitV")
def _import_split_v(node, b):
    x = node.inputs[0]
    axis = _axis(node.static(2), x.type.rank)
    sizes = list(ints(node.static(1)))
    if -1 in sizes:
        sizes[sizes.index(-1)] = x.type.shape[axis] - (sum(sizes) + 1)
    return split(b, x, axis, sizes)


@tf_import("Tile")
def _import_tile(node, b):
    multiples = ints(node.static(1))
    x = node.inputs[0]
    if all(m == 1 for m in multiples):
        return x
    return b.emit("tile", [x], multiples=multiples)


def broadcast_to(b, x, shape):
    shape = tuple(shape)
    return x if x.type.shape == shape else b.emit("broadcast_to", [x], shape=shape)


@tf_import("BroadcastTo")
def _import_broadcast_to(node, b):
    return broadcast_to(b, node.inputs[0], out_shape(node))


@tf_import("Fill")
def _import_fill(node, b):
    return broadcast_to(b, node.inputs[1], out_shape(node))


@tf_import("Empty")
def _import_empty(node, b):
    """Uninitialised memory in TensorFlow (zeros with `init`); zeros here, deterministically."""
    return broadcast_to(b, b.const(0, node.out_types[0].dtype), out_shape(node))


def _paddings(node, i):
    return tuple(tuple(p) for p in np.asarray(node.static(i)).tolist())


@tf_import("Pad", "PadV2")
def _import_pad(node, b):
    x = node.inputs[0]
    paddings = _paddings(node, 1)
    if not any(lo or hi for lo, hi in paddings):
        return x
    value = node.inputs[2] if node.type == "PadV2" else b.const(0, x.type.dtype)
    return b.emit("pad", [x, value], paddings=paddings, mode="constant")


@tf_import("MirrorPad")
def _import_mirror_pad(node, b):
    mode = str(node.attr("mode")).lower()
    return b.emit("pad", [node.inputs[0]], paddings=_paddings(node, 1), mode=mode)


@tf_import("ReverseV2")
def _import_reverse(node, b):
    x = node.inputs[0]
    axes = tuple(sorted({_axis(a, x.type.rank) for a in ints(node.static(1))}))
    axes = tuple(a for a in axes if x.type.shape[a] > 1)
    return b.emit("reverse", [x], axes=axes) if axes else x


@tf_import("Bitcast")
def _import_bitcast(node, b):
    x = node.inputs[0]
    dtype = np.dtype(node.attr("type")).name
    return x if dtype == x.type.dtype else b.emit("bitcast", [x], dtype=dtype)


@tf_import("Cumsum")
def _import_cumsum(node, b):
    x = node.inputs[0]
    axis = _axis(node.static(1), x.type.rank)
    return b.emit("cumsum", [x], axis=axis, exclusive=bool(node.attr("exclusive", False)),
                  reverse=bool(node.attr("reverse", False)))


# ---------------------------------------------------------------------------------------
# Importers: results known at compile time


@tf_import("Shape")
def _import_shape(node, b):
    return b.const(node.inputs[0].type.shape, node.attr("out_type", "int32"))


@tf_import("ShapeN")
def _import_shape_n(node, b):
    dtype = node.attr("out_type", "int32")
    return [b.const(x.type.shape, dtype) for x in node.inputs]


@tf_import("Size")
def _import_size(node, b):
    return b.const(node.inputs[0].type.size, node.attr("out_type", "int32"))


@tf_import("Rank")
def _import_rank(node, b):
    return b.const(node.inputs[0].type.rank, "int32")


def range_values(start, limit, delta, dtype):
    """TensorFlow's Range: `start + i * delta` in `dtype`, for i below TF's size rule."""
    dtype = np.dtype(dtype)
    if delta == 0:
        raise ValueError(f"Range needs a non-zero delta. Received: delta={delta}")
    if dtype.kind in "iu":
        size = (abs(int(limit) - int(start)) + abs(int(delta)) - 1) // abs(int(delta))
    else:
        size = math.ceil(abs((float(limit) - float(start)) / float(delta)))
    size = size if (limit - start) * delta > 0 else 0
    step = np.arange(size).astype(dtype) * np.asarray(delta, dtype)
    return (np.asarray(start, dtype) + step).astype(dtype)


@tf_import("Range")
def _import_range(node, b):
    start, limit, delta = (np.asarray(node.static(i)).item() for i in range(3))
    dtype = node.attr("Tidx")
    return b.const(range_values(start, limit, delta, dtype), dtype)


def broadcast_gradient_args(s0, s1):
    """The axes each of two broadcast operands' gradients is summed over (TF's BCast)."""
    s0, s1 = list(s0), list(s1)
    if s0 == s1:
        return [], []
    rank = max(len(s0), len(s1))
    p0, p1 = [1] * (rank - len(s0)) + s0, [1] * (rank - len(s1)) + s1
    if any(a != c and 1 not in (a, c) for a, c in zip(p0, p1)):
        raise ValueError(f"Incompatible shapes for broadcasting, expected equal or 1 "
                         f"sizes. Received: s0={s0}, s1={s1}")
    return [i for i in range(rank) if p0[i] == 1], [i for i in range(rank) if p1[i] == 1]


@tf_import("BroadcastGradientArgs")
def _import_broadcast_gradient_args(node, b):
    s0, s1 = (ints(node.static(i)) for i in range(2))
    r0, r1 = broadcast_gradient_args(s0, s1)
    dtype = node.attr("T")
    return [b.const(np.asarray(r0, dtype)), b.const(np.asarray(r1, dtype))]


def _invert_permutation(perm):
    if sorted(perm.tolist()) != list(range(perm.size)):
        raise ValueError(f"InvertPermutation expects a permutation of 0..{perm.size - 1}. "
                         f"Received: x={perm.tolist()}")
    return np.argsort(perm).astype(perm.dtype)


register_op("invert_permutation", shape=lambda in_types: [in_types[0]],
            kernel=_invert_permutation, cost=per_output_element("copy"), mapping="linear")


@tf_import("InvertPermutation")
def _import_invert_permutation(node, b):
    """A constant when the permutation is static (as it is in gradients), else an op."""
    try:
        perm = np.asarray(node.static(0))
    except StaticShapeRequiredError:
        return b.emit("invert_permutation", [node.inputs[0]])
    return b.const(_invert_permutation(perm), perm.dtype.name)


__all__ = [
    "IR_OPS", "PAD_MODES", "TF_TYPES", "broadcast_gradient_args", "broadcast_to", "concat",
    "ints", "range_values", "reshape", "split",
]
