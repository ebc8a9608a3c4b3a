"""Op family 'array', indexing half: slices, gathers, scatters and one-hot.

IR ops: `strided_slice` (static per-axis start, size and stride: TensorFlow's masks are
resolved at import time by `strided_slice_spec`), `strided_slice_grad` (the slice
scattered into zeros), `slice_apply` (a binary op of a slice and an update, written into
the slice: the compiler makes it), `gather`, `gather_nd`, `scatter_nd` (update or add into a
tensor), `segment_sum` and `one_hot`. Index operands stay dynamic; index values
outside the indexed dimension raise `IndexOutOfRangeError` (an `IndexError`), as
TensorFlow on the CPU rejects them.
"""
import itertools
import math

import numpy as np

from ipu_keras.errors import IndexOutOfRangeError, UnsupportedOpError
from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops._common import per_output_element
from ipu_keras._src.ops.array import broadcast_to, ints, reshape
from ipu_keras._src.ops.registry import MAX_VIEW_GROUPS, Work, get_op, register_op, tf_import

TF_TYPES = (
    "Slice", "StridedSlice", "StridedSliceGrad", "GatherV2", "ResourceGather", "GatherNd",
    "OneHot", "UnsortedSegmentSum", "TensorScatterUpdate", "TensorScatterAdd", "ScatterNd",
    "ResourceScatterAdd", "ResourceScatterSub", "ResourceScatterUpdate",
)

IR_OPS = ("strided_slice", "strided_slice_grad", "slice_apply", "gather", "gather_nd",
          "scatter_nd", "segment_sum", "one_hot")
SCATTER_MODES = ("update", "add")

_copy_cost = per_output_element("copy")


def _check_indices(indices, bound, what, op):
    if indices.size and (indices.min() < 0 or indices.max() >= bound):
        bad = indices[(indices < 0) | (indices >= bound)].reshape(-1)[0]
        raise IndexOutOfRangeError(
            f"{what} index out of range, expected 0 <= index < {bound}. Received: "
            f"index={int(bad)}. Check the indices fed to the op; TensorFlow on the CPU "
            "rejects them too.", op=op)


# ---------------------------------------------------------------------------------------
# Strided slices


def _np_slices(begin, sizes, strides):
    """Numpy slices taking `size` elements from `begin` in steps of `stride`, per axis."""
    out = []
    for start, size, stride in zip(begin, sizes, strides):
        if size == 0:
            out.append(slice(0, 0))
            continue
        stop = start + (size - 1) * stride + (1 if stride > 0 else -1)
        out.append(slice(start, stop if stop >= 0 else None, stride))
    return tuple(out)


def _slice_shape(in_types, *, begin, sizes, strides):
    x = in_types[0]
    assert len(begin) == len(sizes) == len(strides) == x.rank, (x, begin, sizes, strides)
    return [TensorType(sizes, x.dtype)]


def _strided_slice(x, *, begin, sizes, strides):
    return np.ascontiguousarray(x[_np_slices(begin, sizes, strides)])


def _slice_view(in_types, out_types, *, begin, sizes, strides):
    """A slice of unit steps is a view of its operand (IPU TensorFlow's `CreateSlice` takes
    `Tensor::slice` of its input, and copies it only when the slice is not lowered in
    place, which its in-place analysis allows unless another user writes the input in
    place: graphcore/tensorflow@b2127bb, `driver/ops/tensor_ops.cc` and
    `driver/tools/inplace_util.cc`, `ConvertToInplaceReadOnly`). Its runs are the rows of
    the whole trailing axes after the last sliced one (`cut`); the axes before it, from
    the last sliced one (`outer`) on, step through the operand by one pitch, and make a
    group. A slice with other steps copies here."""
    shape = in_types[0].shape
    if any(s != 1 and n > 1 for s, n in zip(strides, sizes)) or not all(sizes):
        return None
    if not shape:
        return (((0, 0, 1, 1, 1, 0, 1),),)
    sliced = [d for d in range(len(shape)) if (begin[d], sizes[d]) != (0, shape[d])]
    cut = max(sliced, default=0)
    outer = max([d for d in sliced if d < cut], default=0)
    pitch = [math.prod(shape[d + 1:]) for d in range(len(shape))]   # flat step per axis
    length = sizes[cut] * pitch[cut]
    if cut == 0:
        return (((0, begin[0] * pitch[0], length, length, 1, 0, length),),)
    count = sizes[outer] * math.prod(shape[outer + 1:cut])
    if math.prod(sizes[:outer]) > MAX_VIEW_GROUPS:
        return None
    base = begin[outer] * pitch[outer] + begin[cut] * pitch[cut]
    firsts = [base + sum((b + i) * p for b, i, p in zip(begin, index, pitch))
              for index in itertools.product(*(range(n) for n in sizes[:outer]))]
    return (tuple((0, first, pitch[cut - 1], length, count, g * count * length, length)
                  for g, first in enumerate(firsts)),)


register_op("strided_slice", shape=_slice_shape, kernel=_strided_slice, cost=_copy_cost,
            mapping="linear",
            tile_rule="probe", tile_moves=(0,), view=_slice_view)


def _slice_grad_shape(in_types, *, shape, begin, sizes, strides):
    assert tuple(sizes) == in_types[0].shape, (sizes, in_types[0])
    return [TensorType(shape, in_types[0].dtype)]


def _strided_slice_grad(dy, *, shape, begin, sizes, strides):
    out = np.zeros(tuple(shape), dy.dtype)
    out[_np_slices(begin, sizes, strides)] = dy
    return out


register_op("strided_slice_grad", shape=_slice_grad_shape, kernel=_strided_slice_grad,
            cost=_copy_cost, mapping="linear",
            tile_rule="probe", tile_moves=(0,))


def _slice_apply_shape(in_types, *, binary, runs, params):
    base, update = in_types
    first, pitch, length, count, at, step = runs
    last = count - 1
    fits = (base.dtype == update.dtype and count * length == update.size
            and min(runs) >= 0 and at + last * step + length <= base.size
            and first + last * pitch + length <= update.size)
    if not fits:
        raise ValueError(f"Cannot apply '{binary}' of {update} to runs {tuple(runs)} of "
                         f"{base}: expected equal dtypes and runs inside both that take "
                         f"every element of the update. Received: {update}")
    return [base]


def _runs(x, first, pitch, length, count):
    """A view of `count` runs of `length` flat elements of `x`, run j from first + j *
    pitch (writable when `x` is)."""
    flat = x.reshape(-1)[first:]
    item = x.itemsize
    return np.lib.stride_tricks.as_strided(flat, (count, length), (pitch * item, item),
                                           writeable=x.flags.writeable)


def _slice_apply(base, update, *, binary, runs, params):
    first, pitch, length, count, at, step = runs
    out = base.copy()
    where = _runs(out, at, step, length, count)
    result = get_op(binary).kernel(where, _runs(update, first, pitch, length, count), **params)
    where[...] = result[0] if isinstance(result, tuple) else result
    return out


def _slice_apply_cost(in_types, out_types, *, binary, runs, params):
    part = TensorType((in_types[1].size,), in_types[1].dtype)
    return get_op(binary).cost([part, part], [part], **params)


def _slice_apply_region(in_types, out_types, *, binary, runs, params):
    """The update's runs and where they go: one `view` group of operand 1."""
    return ((1, *runs),)


# `binary` (the name of a binary elementwise op, with its `params`) of operand 0's
# elements at `runs` (`first, pitch, length, count, at, step`: a `view` group's runs, of
# operand 1's elements from `first` to operand 0's from `at`) and operand 1's, written
# there in place; operand 0's other elements pass through: IPU TensorFlow's SliceApply,
# which its SliceOptimizer makes of a binary in-place op whose second operand is a
# concatenation (`compiler/passes/slice_apply.py`). No TensorFlow op imports to it.
register_op("slice_apply", shape=_slice_apply_shape, kernel=_slice_apply,
            cost=_slice_apply_cost, mapping="elementwise", region=_slice_apply_region)


def _dense_spec(rank, begin, end, strides, masks):
    """TF's sparse slice spec expanded to one entry per input axis.

    Returns `(dense, final)`: `dense` lists `(begin, end, stride, begin_masked,
    end_masked, shrink)` per input axis; `final` lists, per output axis, the input axis
    it comes from or "new" for an inserted axis (shrunk axes are left out).
    """
    n = len(begin)
    ellipsis = masks["ellipsis_mask"]
    new_after = sum(1 for i in range(n) if masks["new_axis_mask"] >> i & 1
                    and ellipsis & ((1 << i) - 1))
    if not ellipsis & ((1 << n) - 1):
        ellipsis, n = 1 << n, n + 1
        begin, end, strides = list(begin) + [0], list(end) + [0], list(strides) + [1]
    dense, final = [], []
    for i in range(n):
        if ellipsis >> i & 1:
            stop = min(rank - (n - i) + 1 + new_after, rank)
            while len(dense) < stop:
                final.append(len(dense))
                dense.append((0, 0, 1, True, True, False))
        elif masks["new_axis_mask"] >> i & 1:
            final.append("new")
        else:
            if len(dense) == rank:
                raise IndexError(f"Too many slice indices for a tensor of rank {rank}. "
                                 f"Received: {n} indices")
            shrink = bool(masks["shrink_axis_mask"] >> i & 1)
            if not shrink:
                final.append(len(dense))
            dense.append((int(begin[i]), int(end[i]), int(strides[i]),
                          bool(masks["begin_mask"] >> i & 1), bool(masks["end_mask"] >> i & 1),
                          shrink))
    return dense, final


def _canonical(dim, begin, end, stride, begin_masked, end_masked, shrink):
    """One axis: (start, size) with TF's clamping of out-of-range begin and end."""
    if stride == 0:
        raise ValueError("Strided slice strides must be non-zero. Received: stride=0")
    if shrink:
        if stride < 0:
            raise ValueError("Strided slice allows only positive strides on an index that "
                             f"removes an axis. Received: stride={stride}")
        start = begin + dim if begin < 0 else begin
        if not 0 <= start < dim:
            raise IndexError(f"Slice index {begin} is out of bounds for a dimension of "
                             f"size {dim}. Received: begin={begin}")
        return start, 1
    low, high = (0, dim) if stride > 0 else (-1, dim - 1)

    def clamp(x, masked, first):
        if masked:
            return (low if first else high) if stride > 0 else (high if first else low)
        x = x + dim if x < 0 else x
        return min(max(x, low), high)

    start, stop = clamp(begin, begin_masked, True), clamp(end, end_masked, False)
    length = stop - start
    if length == 0 or (length < 0) != (stride < 0):
        return 0, 0
    return start, -(-length // stride)  # ceil(length / stride): same signs here


def strided_slice_spec(shape, begin, end, strides, **masks):
    """TF's StridedSlice resolved against a static `shape`.

    Returns `(starts, sizes, strides, out_shape)`: the `strided_slice` op params (one
    entry per input axis) and the final shape after new and shrunk axes.
    """
    masks = {k: int(masks.get(k, 0)) for k in (
        "begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")}
    dense, final = _dense_spec(len(shape), begin, end, strides, masks)
    starts, sizes, steps = [], [], []
    for dim, spec in zip(shape, dense):
        start, size = _canonical(dim, *spec)
        starts.append(start)
        sizes.append(size)
        steps.append(spec[2])
    out_shape = tuple(1 if a == "new" else sizes[a] for a in final)
    return tuple(starts), tuple(sizes), tuple(steps), out_shape


def _node_spec(node, shape, first):
    begin, end, strides = (ints(node.static(first + i)) for i in range(3))
    masks = {k: node.attr(k, 0) for k in (
        "begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")}
    return strided_slice_spec(shape, begin, end, strides, **masks)


def strided_slice(b, x, begin, sizes, strides):
    if tuple(sizes) == x.type.shape and all(s == 1 for s in strides):
        return x
    return b.emit("strided_slice", [x], begin=tuple(begin), sizes=tuple(sizes),
                  strides=tuple(strides))


@tf_import("StridedSlice")
def _import_strided_slice(node, b):
    x = node.inputs[0]
    begin, sizes, strides, shape = _node_spec(node, x.type.shape, 1)
    return reshape(b, strided_slice(b, x, begin, sizes, strides), shape)


@tf_import("StridedSliceGrad")
def _import_strided_slice_grad(node, b):
    shape = ints(node.static(0))
    begin, sizes, strides, _ = _node_spec(node, shape, 1)
    dy = reshape(b, node.inputs[4], sizes)
    if sizes == shape and all(s == 1 for s in strides):
        return dy
    return b.emit("strided_slice_grad", [dy], shape=shape, begin=begin, sizes=sizes,
                  strides=strides)


@tf_import("Slice")
def _import_slice(node, b):
    x = node.inputs[0]
    begin, size = ints(node.static(1)), ints(node.static(2))
    sizes = tuple(d - s if n == -1 else n for d, s, n in zip(x.type.shape, begin, size))
    return strided_slice(b, x, begin, sizes, (1,) * x.type.rank)


# ---------------------------------------------------------------------------------------
# Gathers


def _gather_shape(in_types, *, axis, batch_dims):
    params, indices = in_types
    shape = params.shape[:axis] + indices.shape[batch_dims:] + params.shape[axis + 1:]
    return [TensorType(shape, params.dtype)]


def _gather(params, indices, *, axis, batch_dims):
    _check_indices(indices, params.shape[axis], "Gather", "gather")
    if batch_dims == 0:
        return np.asarray(np.take(params, indices, axis=axis))
    shape = _gather_shape([params, indices], axis=axis, batch_dims=batch_dims)[0].shape
    out = np.empty(shape, params.dtype)
    # The batch count is explicit: reshape's -1 is ambiguous when a tensor is empty.
    batch = int(np.prod(shape[:batch_dims]))
    rows = out.reshape((batch,) + shape[batch_dims:])  # a view: rows[k] = ... writes `out`
    params = params.reshape((batch,) + params.shape[batch_dims:])
    indices = indices.reshape((batch,) + indices.shape[batch_dims:])
    for k in range(batch):  # rows[k] may be a scalar: assign by index, not through a view
        rows[k] = np.take(params[k], indices[k], axis=axis - batch_dims)
    return out


def _gather_index_mask(shapes, params, coords):
    """Strict tile rule: the index elements that select the owned outputs of a gather (the
    probe sees only the moved params): the batch axes and the axes that replace `axis`."""
    index_shape = shapes[1]
    batch, axis = params["batch_dims"], params["axis"] % len(shapes[0])
    mask = np.zeros(index_shape, bool)
    mask[tuple(coords[:batch] + coords[axis:axis + len(index_shape) - batch])] = True
    return mask


register_op("gather", shape=_gather_shape, kernel=_gather, cost=_copy_cost,
            mapping="linear",
            tile_rule="probe", tile_moves=(0,),
            plan="gather", tile_index=_gather_index_mask)


def _gather_nd_shape(in_types, **_):
    params, indices = in_types
    k = indices.shape[-1]
    return [TensorType(indices.shape[:-1] + params.shape[k:], params.dtype)]


def _index_tuple(indices, shape, what, op):
    """The last axis of `indices` as a tuple of per-axis index arrays, checked."""
    for d in range(indices.shape[-1]):
        _check_indices(indices[..., d], shape[d], what, op)
    return tuple(np.moveaxis(indices, -1, 0))


def _gather_nd(params, indices):
    if indices.shape[-1] == 0:
        return np.array(np.broadcast_to(params, indices.shape[:-1] + params.shape))
    return np.asarray(params[_index_tuple(indices, params.shape, "GatherNd", "gather_nd")])


def _gather_nd_index_mask(shapes, params, coords):
    """Strict tile rule: the leading index axes of the owned outputs, each index row whole."""
    index_shape = shapes[1]
    mask = np.zeros(index_shape, bool)
    mask[tuple(coords[:len(index_shape) - 1] + (slice(None),))] = True
    return mask


register_op("gather_nd", shape=_gather_nd_shape, kernel=_gather_nd, cost=_copy_cost,
            mapping="linear",
            tile_rule="probe", tile_moves=(0,),
            plan="gather", tile_index=_gather_nd_index_mask)


def _gather_params(node, params_rank, indices_rank, axis):
    batch_dims = int(node.attr("batch_dims", 0))
    batch_dims = batch_dims + indices_rank if batch_dims < 0 else batch_dims
    axis = axis + params_rank if axis < 0 else axis
    if not batch_dims <= axis < params_rank:
        raise ValueError(f"'{node.name}' expects batch_dims <= axis < {params_rank}. "
                         f"Received: axis={axis}, batch_dims={batch_dims}")
    return dict(axis=axis, batch_dims=batch_dims)


@tf_import("GatherV2")
def _import_gather(node, b):
    params, indices = node.inputs[:2]
    axis = ints(node.static(2))[0]
    return b.emit("gather", [params, indices],
                  **_gather_params(node, params.type.rank, indices.type.rank, axis))


@tf_import("ResourceGather")
def _import_resource_gather(node, b):
    ref, indices = node.inputs
    variable_type = getattr(node, "variable_type", None)
    if variable_type is None:
        raise UnsupportedOpError(node.type, node.name, hint="the tracer does not give the "
                                 "variable's type (needs node.variable_type(ref))")
    var_type = variable_type(ref)
    params = b.emit("read_var", [], var=node.variable_index(ref), type=var_type)
    return b.emit("gather", [params, indices],
                  **_gather_params(node, var_type.rank, indices.type.rank, 0))


@tf_import("GatherNd")
def _import_gather_nd(node, b):
    if int(node.attr("batch_dims", 0)) != 0:
        raise UnsupportedOpError(node.type, node.name, hint="only batch_dims=0 is supported")
    return b.emit("gather_nd", list(node.inputs))


# ---------------------------------------------------------------------------------------
# Scatters and segment sums


def _scatter_shape(in_types, *, mode):
    assert mode in SCATTER_MODES, mode
    x, indices, updates = in_types
    expected = indices.shape[:-1] + x.shape[indices.shape[-1]:]
    if updates.shape != expected or updates.dtype != x.dtype:
        raise ValueError(f"Scatter into {x} with indices {indices} expects updates of shape "
                         f"{expected} and dtype {x.dtype}. Received: updates={updates}")
    return [x]


def _scatter_nd(x, indices, updates, *, mode):
    out = np.array(x)
    where = _index_tuple(indices, x.shape, "Scatter", "scatter_nd")
    if mode == "update":
        out[where] = updates
    else:
        _add_at(out, where, updates)
    return out


_LAYERED_ADDS = 1 << 8
"""`_add_at` takes layers from this many index rows up (fewer: `np.add.at` is as fast)."""
_MAX_LAYERS = 16
"""Indices repeated more often than this are summed one at a time by `np.add.accumulate`."""


def _add_at(out, where, updates):
    """`np.add.at(out, where, updates)`, `where` a tuple of (checked) index arrays over
    out's leading axes: each index's updates are added to it in their order, as numpy's
    add.at and TensorFlow's CPU kernels add them, so the sums have their bits.

    add.at runs element by element (an embedding gradient of 2,048 rows of 256: 6-10 ms).
    Here every index's first update is added in one fancy-indexed step, then every
    index's second, and so on (the indices of a step all distinct); an index repeated
    more than `_MAX_LAYERS` times (a padding token) is summed on its own, its value then
    its updates by `np.add.accumulate`, which adds strictly left to right."""
    lead = len(where)
    if not lead or where[0].size < _LAYERED_ADDS or not out.flags.c_contiguous:
        np.add.at(out, where, updates)
        return
    flat = np.ravel_multi_index(where, out.shape[:lead]).reshape(-1)
    order = np.argsort(flat, kind="stable")    # each index's updates together, in order
    ranked = flat[order]
    first = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])
    counts = np.diff(np.r_[first, len(ranked)])
    occurrence = np.arange(len(ranked)) - np.repeat(first, counts)
    light = np.repeat(counts <= _MAX_LAYERS, counts)
    rows = out.reshape((-1,) + out.shape[lead:])
    values = updates.reshape((len(flat),) + out.shape[lead:])
    for layer in range(min(int(counts.max()), _MAX_LAYERS)):
        taken = order[(occurrence == layer) & light]
        rows[flat[taken]] += values[taken]
    for start, count in zip(first[counts > _MAX_LAYERS], counts[counts > _MAX_LAYERS]):
        index = ranked[start]
        terms = np.concatenate([rows[index][None], values[order[start:start + count]]])
        rows[index] = np.add.accumulate(terms, axis=0)[-1]


def _scatter_cost(in_types, out_types, **_):
    return Work("copy", out_types[0].size + in_types[2].size)


register_op("scatter_nd", shape=_scatter_shape, kernel=_scatter_nd, cost=_scatter_cost,
            mapping="linear")


def _scatter_importer(mode):
    def importer(node, b):
        return b.emit("scatter_nd", list(node.inputs), mode=mode)

    return importer


tf_import("TensorScatterUpdate")(_scatter_importer("update"))
tf_import("TensorScatterAdd")(_scatter_importer("add"))


def _resource_scatter(mode):
    """`var[indices] op= updates` as read, scatter_nd and assign (duplicates accumulate)."""

    def importer(node, b):
        ref, indices, updates = node.inputs
        var_type = node.variable_type(ref)
        index = node.variable_index(ref)
        old = b.emit("read_var", [], var=index, type=var_type)
        where = reshape(b, indices, indices.type.shape + (1,))
        full = indices.type.shape + var_type.shape[1:]
        if updates.type.shape != full:  # a scalar update applies to every indexed row
            updates = broadcast_to(b, updates, full)
        if mode == "sub":
            updates = b.emit("neg", [updates])
        new = b.emit("scatter_nd", [old, where, updates],
                     mode="update" if mode == "update" else "add")
        b.emit("write_var", [new], var=index, mode="assign")
        return []

    return importer


tf_import("ResourceScatterAdd")(_resource_scatter("add"))
tf_import("ResourceScatterSub")(_resource_scatter("sub"))
tf_import("ResourceScatterUpdate")(_resource_scatter("update"))


@tf_import("ScatterNd")
def _import_scatter_nd(node, b):
    indices, updates = node.inputs[:2]
    zeros = broadcast_to(b, b.const(0, updates.type.dtype), ints(node.static(2)))
    return b.emit("scatter_nd", [zeros, indices, updates], mode="add")


def _segment_sum_shape(in_types, *, num_segments):
    data, ids = in_types
    return [TensorType((num_segments,) + data.shape[ids.rank:], data.dtype)]


def _segment_sum(data, ids, *, num_segments):
    """Rows with a negative segment id are dropped, as in TensorFlow."""
    out = np.zeros((num_segments,) + data.shape[ids.ndim:], data.dtype)
    keep = ids >= 0
    _check_indices(ids[keep], num_segments, "Segment", "segment_sum")
    _add_at(out, (ids[keep],), data[keep])
    return out


register_op("segment_sum", shape=_segment_sum_shape, kernel=_segment_sum,
            cost=lambda in_types, out_types, **_: Work("vector", in_types[0].size),
            mapping="linear")


@tf_import("UnsortedSegmentSum")
def _import_segment_sum(node, b):
    num = ints(node.static(2))[0]
    return b.emit("segment_sum", list(node.inputs[:2]), num_segments=num)


# ---------------------------------------------------------------------------------------
# One-hot


def _one_hot_shape(in_types, *, depth, axis):
    indices, on, off = in_types
    assert on.dtype == off.dtype and on.rank == off.rank == 0, (on, off)
    shape = indices.shape[:axis] + (depth,) + indices.shape[axis:]
    return [TensorType(shape, on.dtype)]


def _one_hot(indices, on, off, *, depth, axis):
    """Indices outside [0, depth) give a row of `off`, as in TensorFlow."""
    hot = np.expand_dims(indices, axis) == np.arange(depth).reshape(
        (depth,) + (1,) * (indices.ndim - axis))
    return np.where(hot, on, off).astype(on.dtype)


register_op("one_hot", shape=_one_hot_shape, kernel=_one_hot, cost=_copy_cost,
            mapping="linear")


@tf_import("OneHot")
def _import_one_hot(node, b):
    indices, _, on, off = node.inputs
    depth = ints(node.static(1))[0]
    axis = int(node.attr("axis", -1))
    axis = indices.type.rank if axis == -1 else axis
    return b.emit("one_hot", [indices, on, off], depth=depth, axis=axis)


__all__ = ["IR_OPS", "SCATTER_MODES", "TF_TYPES", "strided_slice", "strided_slice_spec"]
