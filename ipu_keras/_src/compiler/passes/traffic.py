"""Exchange volume per tile: what each tile receives to run one equation.

It follows from where a value is (its `Mapping`) and where its consumer needs it,
counted for every operand and every output (each output anchored on its own mapping),
by the op's `exchange` fact (`ops/registry.py`):

* an operand of the output's size is needed element for element where the output
  is; a tile receives the part of its output range it does not already hold (exact
  for linear mappings, by interval overlap);
* an operand of another size (a broadcast bias, a gathered table, a slice's source)
  contributes at most one element per output element on the tile:
  `min(operand size, output elements on the tile)`;
* a row op ("rows": softmax, log_softmax, the cross-entropies, in_top_k) needs the
  whole rows of its operands behind the output rows the tile owns, less what it holds;
* a variable write receives the value's elements that are not already on the
  variable's tiles;
* a reduction ("tree") reduces its input where it lies, then its partials converge on
  the output's tiles through a tree of supersteps (`reduction.py`);
* an op that computes a region of its output, the rest in place (a `region` fact: a
  slice apply), receives the elements of the operands that make the region, each on
  the tile that holds its output position, less those already there;
* a view (a reshape, a static slice, a concatenation: `tile_map.py`) receives nothing:
  its consumers receive the elements they need from wherever its sources hold them;
* the engine's own ops (constants, variable reads, feeds, control flow: "none") and
  ops without outputs receive nothing;
* a planned op (matmul, convolution, gather) receives what its plan says.
"""
import numpy as np

from ipu_keras._src.compiler.passes import reduction
from ipu_keras._src.compiler.passes.views import (ViewMapping, held_elements, placements,
                                                   region_groups)
from ipu_keras._src.ops.registry import get_op

PARTIAL_BYTES = reduction.PARTIAL_BYTES


def received_bytes(eqn, tile_map):
    """Bytes each tile receives in the exchange(s) of `eqn` (a read-only array per tile,
    computed once per equation and tile map)."""
    received = tile_map.received.get(eqn)
    if received is None:
        received = tile_map.received[eqn] = _received_bytes(eqn, tile_map)
        received.flags.writeable = False
    return received


def _received_bytes(eqn, tile_map):
    n, exchange = tile_map.num_tiles, get_op(eqn.op).exchange
    if exchange == "none" or (not eqn.outputs and exchange != "variable"):
        return np.zeros(n, np.int64)
    plan = tile_map.plan_of(eqn)
    if plan is not None:
        out = np.zeros(n, np.int64)
        out[(plan.start + np.arange(plan.tiles)) % n] = plan.receive_bytes
        return out
    if exchange == "variable":
        var = tile_map.variables[eqn.params["var"]]
        return _needed(eqn.inputs[0], var, eqn.inputs[0].type.size, tile_map)
    if tile_map.is_view(eqn.outputs[0].id):
        return np.zeros(n, np.int64)
    if exchange == "rows":
        return _rows_needed(eqn, tile_map)
    groups = region_groups(eqn)
    if groups is not None:
        return _region_needed(eqn, groups, tile_map)
    if exchange == "tree":
        stages, info = reduction_tree(eqn, tile_map)
        return reduction.received_per_tile(stages, info[1], info[2], info[0], n)
    total = np.zeros(n, np.int64)
    for out in eqn.outputs:
        mapping = tile_map.values[out.id]
        for v in eqn.inputs:
            total += _needed(v, mapping, out.type.size, tile_map)
    return total


def _needed(value, mapping, size, tile_map):
    """Bytes of `value` the tiles of `mapping` (holding `size` elements) must receive."""
    n = tile_map.num_tiles
    lo, hi = mapping.bounds(size, n)
    if value.type.size != size:
        return np.minimum(value.type.size, hi - lo) * value.type.itemsize
    return missing_bytes(value, lo, hi, tile_map)


def missing_bytes(value, lo, hi, tile_map):
    """Bytes of `value`'s flat ranges [lo, hi) (per tile) each tile does not hold."""
    n = tile_map.num_tiles
    wanted = hi - lo
    source = tile_map.values.get(value.id)
    if source is None:
        return wanted * value.type.itemsize
    local = held_elements(source, value.type.size, lo, hi, n)
    return (wanted - local) * value.type.itemsize


def region_placements(eqn, groups, tile_map):
    """(operand, where its region elements must be: a `ViewMapping`) of an op with a
    `region` fact (`views.placements`)."""
    out = eqn.outputs[0]
    placed = placements(groups, out.id, tile_map.values[out.id], out.type.size,
                        tile_map.num_tiles)
    return [(eqn.inputs[k], layout) for k, layout in sorted(placed.items())]


def region_elements(eqn, groups, tile_map):
    """Elements of its output's region each tile computes (an op with a `region`)."""
    return sum(layout.elements() for _, layout in region_placements(eqn, groups, tile_map))


def _region_needed(eqn, groups, tile_map):
    """Bytes of the region's operand elements each tile lacks where its outputs are."""
    n = tile_map.num_tiles
    total = np.zeros(n, np.int64)
    for value, layout in region_placements(eqn, groups, tile_map):
        source = tile_map.values.get(value.id)
        local = 0    # (none counted for an operand that is a view)
        if source is not None and not isinstance(source, ViewMapping):
            local = layout.held(*source.bounds(value.type.size, n))
        total += (layout.elements() - local) * value.type.itemsize
    return total


def _row_length(type_, rows):
    return type_.size // max(1, rows)


def _rows_needed(eqn, tile_map):
    """Row ops: per output, the operands' whole rows behind the output rows a tile owns."""
    n = tile_map.num_tiles
    shape = eqn.inputs[0].type.shape
    rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
    total = np.zeros(n, np.int64)
    for out in eqn.outputs:
        lo, hi = tile_map.values[out.id].bounds(out.type.size, n)
        width = max(1, _row_length(out.type, rows))
        first, last = lo // width, -(-hi // width)
        for v in eqn.inputs:
            length = _row_length(v.type, rows)
            vlo, vhi = first * length, np.maximum(first, last) * length
            total += np.where(hi > lo, missing_bytes(v, vlo, vhi, tile_map), 0)
    return total


def reduction_partials(eqn, tile_map):
    """(partials per output element, output elements per tile, whether each tile holds
    input of its own output elements) of a reduce-mapped op."""
    n = tile_map.num_tiles
    x, out = eqn.inputs[0], eqn.outputs[0]
    out_elements = tile_map.values[out.id].elements(out.type.size, n)
    factor = max(1, x.type.size // max(1, out.type.size))
    source = tile_map.values.get(x.id)
    spread = source.tiles if source is not None else 1
    holds = np.zeros(n, bool)
    if source is not None:
        holds = source.elements(x.type.size, n) > 0
        if _reduces_trailing_axes(eqn):
            # Each output element reduces `factor` consecutive elements: they span at
            # most this many chunks of the input's mapping.
            spread = min(spread, 1 + -(-(factor - 1) // source.per_tile))
    return max(1, min(factor, spread)), out_elements, holds


def _reduces_trailing_axes(eqn):
    """Whether `eqn` reduces exactly the last axes of its input (contiguous groups)."""
    rank = len(eqn.inputs[0].type.shape)
    axes = get_op(eqn.op).reduced_axes(eqn.params, rank)
    if axes is None:
        return False
    return bool(axes) and axes == list(range(rank - len(axes), rank))


def reduction_tree(eqn, tile_map):
    """(stages of `reduction.tree`, `reduction_partials`) of a reduce-mapped op."""
    info = reduction_partials(eqn, tile_map)
    partials, out_elements, holds = info
    stages = reduction.tree(partials, out_elements, eqn.outputs[0].type.size,
                            tile_map.num_tiles, holds, partial_dtype(eqn), tile_map.target)
    return stages, info


def partial_dtype(eqn):
    """Partials accumulate in float32 (floats) or int32 (others)."""
    return "float32" if eqn.inputs[0].type.dtype in ("float16", "float32") else "int32"


def input_elements(value, tile_map):
    """Elements of `value` per tile (for ops that work where their input lies)."""
    mapping = tile_map.values.get(value.id)
    if mapping is None:
        return np.full(tile_map.num_tiles, value.type.size, np.int64)
    return mapping.elements(value.type.size, tile_map.num_tiles)
