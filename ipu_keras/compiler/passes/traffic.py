"""Exchange volume per tile: what each tile receives to run one equation.

It follows from where a value is (its `Mapping`) and where its consumer needs it:

* an operand of the output's size is needed element for element where the output
  is; a tile receives the part of its output range it does not already hold (exact
  for linear mappings, by interval overlap);
* an operand of another size (a broadcast bias, a gathered table, a slice's source)
  contributes at most one element per output element on the tile:
  `min(operand size, output elements on the tile)`;
* a variable write receives the value's elements that are not already on the
  variable's tiles;
* a reduction reduces its input where it lies, then each output tile receives the
  other tiles' partial results: `(partials - 1)` per output element, where
  `partials = min(reduction factor, tiles holding the input)`;
* a planned op (matmul, convolution, gather) receives what its plan says.
"""
import numpy as np

from ipu_keras.ops.registry import get_op

PARTIAL_BYTES = 4
"""Bytes of one reduction partial (reductions accumulate in float32 or int32)."""

_NO_EXCHANGE = ("const", "read_var", "while", "if", "call", "infeed", "outfeed")


def received_bytes(eqn, tile_map):
    """Bytes each tile receives in the exchange before `eqn` computes (array per tile)."""
    n = tile_map.num_tiles
    if eqn.op in _NO_EXCHANGE or (not eqn.outputs and eqn.op != "write_var"):
        return np.zeros(n, np.int64)
    plan = tile_map.plan_of(eqn)
    if plan is not None:
        out = np.zeros(n, np.int64)
        out[(plan.start + np.arange(plan.tiles)) % n] = plan.receive_bytes
        return out
    if eqn.op == "write_var":
        var = tile_map.variables[eqn.params["var"]]
        return _needed(eqn.inputs[0], var, eqn.inputs[0].type.size, tile_map)
    anchor = eqn.outputs[0]
    mapping = tile_map.values[anchor.id]
    if get_op(eqn.op).mapping == "reduce":
        partials, out_elements = reduction_partials(eqn, tile_map)
        return out_elements * (partials - 1) * PARTIAL_BYTES
    if anchor.id in tile_map.aliases:
        return np.zeros(n, np.int64)
    total = np.zeros(n, np.int64)
    for v in eqn.inputs:
        total += _needed(v, mapping, anchor.type.size, tile_map)
    return total


def _needed(value, mapping, size, tile_map):
    """Bytes of `value` the tiles of `mapping` (holding `size` elements) must receive."""
    n = tile_map.num_tiles
    lo, hi = mapping.bounds(size, n)
    wanted = hi - lo
    source = tile_map.values.get(value.id)
    if value.type.size != size:
        return np.minimum(value.type.size, wanted) * value.type.itemsize
    if source is None:
        return wanted * value.type.itemsize
    if source == mapping:
        return np.zeros(n, np.int64)
    slo, shi = source.bounds(size, n)
    local = np.maximum(0, np.minimum(hi, shi) - np.maximum(lo, slo))
    return (wanted - local) * value.type.itemsize


def reduction_partials(eqn, tile_map):
    """(partials per output element, output elements per tile) of a reduce-mapped op."""
    n = tile_map.num_tiles
    x, out = eqn.inputs[0], eqn.outputs[0]
    out_elements = tile_map.values[out.id].elements(out.type.size, n)
    factor = max(1, x.type.size // max(1, out.type.size))
    source = tile_map.values.get(x.id)
    spread = source.tiles if source is not None else 1
    return max(1, min(factor, spread)), out_elements


def input_elements(value, tile_map):
    """Elements of `value` per tile (for ops that work where their input lies)."""
    mapping = tile_map.values.get(value.id)
    if mapping is None:
        return np.full(tile_map.num_tiles, value.type.size, np.int64)
    return mapping.elements(value.type.size, tile_map.num_tiles)
