"""Dependency rules of the strict tile mode: which operand elements an output slice needs.

A tile owns a contiguous flat range of each output. Given the coordinates of the
elements it owns, `needed_masks` returns, per operand, a boolean array of the
operand's shape marking the elements the tile must hold (its own or received) to
compute them. The rule of an op is its `kind`, the op's `tile_rule` fact (with
`tile_moves`, `tile_fill`, `tile_index` and `tile_axes`, see `ops/registry.py`):

* "elementwise": numpy broadcasting, element for element (math and activation ops);
* "rows": every leading axis element for element, the last axis whole (softmax, the
  cross-entropies, in_top_k, l2_loss);
* "reduce": kept axes element for element, reduced axes whole;
* "channel": the channel axis element for element, every other axis whole (bias_add,
  its gradient, batch norm);
* "matmul": rows of A and columns of B, the contracted axis whole;
* "window" (pools) and "conv": batch and channels element for element, spatial axes
  whole (a superset of the windows: over-approximate);
* "probe": ops that only move data: the kernel runs once on element numbers instead
  of values and the output tells which element each output element copies;
* "region": an op that computes part of its output, the rest operand 0 in place (its
  `region` fact, a slice apply): operand 0 element for element, and of each operand
  its region's runs take, the elements whose output positions the tile owns;
* "fallback": every operand element (not tile-local; counted and reported).

An "elementwise" op whose operands do not broadcast to its outputs falls back.
A rule is an axis map per operand: per operand axis, the output axis whose coordinate
selects it, or `FULL` for the whole axis. A rule that claims too little is caught by
the strict engine (the tile computes from poison where it lacked data); one that
claims too much shows as exchange beyond what the cost model charges.
"""
import numpy as np

from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops._common import channel_axis
from ipu_keras._src.ops.registry import FULL, get_op


def kind_of(op, in_shapes, out_shapes, params):
    """The rule kind of `op` for these shapes (see the module docstring)."""
    kind = get_op(op).tile_rule_for(params)
    if kind == "elementwise":
        try:
            shape = tuple(np.broadcast_shapes(*in_shapes)) if in_shapes else ()
        except ValueError:
            return "fallback"
        if all(tuple(s) == shape for s in out_shapes):
            return "elementwise"
        return "fallback"
    return kind


def needed_masks(kind, op, args, out_shapes, params, j, coords, probe=None):
    """Per operand, a boolean mask of the elements needed for output `j` at `coords`.

    `coords` is the tuple of coordinate arrays (`np.unravel_index`) of the owned
    elements; `probe` the element numbers the "probe" rule computed for output `j`.
    """
    shapes, opdef = [np.shape(a) for a in args], get_op(op)
    if kind == "probe":
        masks = _probe_masks(shapes, probe)
        fill = opdef.tile_fill
        if opdef.tile_index is not None:
            masks[1] = opdef.tile_index(shapes, params, coords)
        elif fill is not None and len(shapes) > fill:
            masks[fill][...] = bool((probe == 0).any())  # the fill, if the tile owns padding
        return masks
    if kind == "fallback":
        return [np.ones(s, bool) for s in shapes]
    if kind == "region":
        return _region_masks(opdef, args, out_shapes[j], params, coords)
    if opdef.tile_axes is not None:
        axis_maps = opdef.tile_axes(shapes, out_shapes[j], params)
    else:
        axis_maps = _AXIS_MAPS[kind](op, shapes, out_shapes[j], params)
    masks = []
    for shape, axis_map in zip(shapes, axis_maps):
        mask = np.zeros(shape, bool)
        index = tuple(
            slice(None) if k is FULL else
            (np.zeros_like(coords[k]) if d == 1 and out_shapes[j][k] != 1 else coords[k])
            for d, k in zip(shape, axis_map))
        mask[index] = True
        masks.append(mask)
    return masks


def probe(op, args, params, moved=None):
    """Runs `op`'s kernel on element numbers: per output, the global number + 1 of the
    operand element each output element copies (0: none, e.g. padding)."""
    opdef = get_op(op)
    moved = opdef.tile_moves if moved is None else moved
    moved = range(len(args)) if moved == "all" else moved
    codes, offset = [], 1
    for i, a in enumerate(args):
        a = np.asarray(a)
        if i in moved:
            codes.append(np.arange(offset, offset + a.size, dtype=np.int64).reshape(a.shape))
            offset += a.size
        elif a.dtype.kind == "f" or i == opdef.tile_fill:  # a float operand or a fill: no source
            codes.append(np.zeros(a.shape, np.int64))
        else:
            codes.append(a)
    out = opdef.kernel(*codes, **params)
    return [np.asarray(o) for o in (out if isinstance(out, (tuple, list)) else (out,))]


def _probe_masks(shapes, numbers):
    masks, offset = [], 1
    numbers = numbers[numbers > 0]
    for shape in shapes:
        size = int(np.prod(shape, dtype=np.int64))
        mask = np.zeros(size, bool)
        mine = numbers[(numbers >= offset) & (numbers < offset + size)] - offset
        mask[mine] = True
        masks.append(mask.reshape(shape))
        offset += size
    return masks


def _region_masks(opdef, args, out_shape, params, coords):
    """The "region" rule: the owned elements of operand 0 (the output's own buffer),
    and each region run's operand elements that land on an owned output position."""
    owned = np.zeros(int(np.prod(out_shape, dtype=np.int64)), bool)
    owned[np.ravel_multi_index(coords, out_shape) if out_shape else 0] = True
    arrays = [np.asarray(a) for a in args]
    masks = [owned.reshape(out_shape).copy()] + [np.zeros(a.shape, bool) for a in arrays[1:]]
    types = [TensorType(a.shape, a.dtype) for a in arrays]
    for k, *runs in opdef.region(types, [TensorType(out_shape, arrays[0].dtype)], **params):
        source, target = run_indices(*runs)
        masks[k].reshape(-1)[source[owned[target]]] = True
    return masks


def run_indices(first, pitch, length, count, at, step):
    """The flat operand and output indices of a group of runs (a `view` or `region`
    group without its operand): run `j` from `first + j * pitch` and `at + j * step`."""
    run = np.arange(length, dtype=np.int64)
    j = np.arange(count, dtype=np.int64)[:, None]
    return (first + j * pitch + run).reshape(-1), (at + j * step + run).reshape(-1)


# -- axis maps: (op, operand shapes, output shape, params) -> per operand, per axis -------


def _elementwise(op, shapes, out, params):
    return [tuple(a + len(out) - len(s) for a in range(len(s))) for s in shapes]


def _rows(op, shapes, out, params):
    lead = min(len(shapes[0]) - 1, len(out))
    return [tuple(a if a < lead else FULL for a in range(len(s))) for s in shapes]


def _reduce(op, shapes, out, params):
    (shape,) = shapes
    rank = len(shape)
    if "axis" in params:
        axes, keep = {params["axis"] % rank}, False
    else:
        axes = {a % rank for a in np.atleast_1d(params["axes"]).tolist()} if rank else set()
        keep = bool(params.get("keep_dims", False))
    axis_map, k = [], 0
    for a in range(rank):
        axis_map.append(FULL if a in axes else k)
        k += 1 if keep or a not in axes else 0
    return [tuple(axis_map)]


def _channel(op, shapes, out, params):
    c_out = channel_axis(len(out), params)
    return [tuple(c_out if a == channel_axis(len(s), params) else FULL for a in range(len(s)))
            for s in shapes]


def _window(op, shapes, out, params):
    rank = len(out)
    return [tuple(0 if a == 0 else rank - 1 if a == rank - 1 else FULL for a in range(rank))
            if len(s) == rank else (FULL,) * len(s) for s in shapes]


def _matmul(op, shapes, out, params):
    rank = len(out)
    rows = (FULL, rank - 2) if params.get("transpose_a") else (rank - 2, FULL)
    cols = (rank - 1, FULL) if params.get("transpose_b") else (FULL, rank - 1)
    return [tuple(a + rank - len(s) for a in range(len(s) - 2)) + last
            for s, last in zip(shapes, (rows, cols))]


def contracted_axes(params, ranks):
    """A matmul's contracted axis in each operand (A, B), from its transposes."""
    a, b = ranks
    return (a - 2 if params.get("transpose_a") else a - 1,
            b - 1 if params.get("transpose_b") else b - 2)


_AXIS_MAPS = {"elementwise": _elementwise, "rows": _rows, "reduce": _reduce,
              "channel": _channel, "window": _window, "matmul": _matmul}
"""Per rule kind, its generic axis maps ("conv" has only the ops' own `tile_axes`)."""
