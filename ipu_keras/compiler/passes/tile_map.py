"""Tile mapping: where the elements of every value live.

A `Mapping` spreads a value's elements in contiguous chunks of `per_tile` over
`tiles` consecutive tiles from `start`. Elementwise ops keep the mapping of an
operand of their shape (so they need no exchange); other values are spread
linearly with a minimum grain, each new one starting where the previous ended so
that small values do not all land on tile 0. Variables are mapped first.
"""
import dataclasses
import math

import numpy as np

from ipu_keras.ops.registry import get_op

GRAIN_BYTES = 64
"""Minimum bytes of one value on a tile (a vector-aligned chunk)."""


@dataclasses.dataclass(frozen=True)
class Mapping:
    start: int
    tiles: int
    per_tile: int

    def elements(self, size, num_tiles):
        """Elements per tile as a vector of length `num_tiles`."""
        counts = np.zeros(num_tiles, dtype=np.int64)
        if size == 0:
            return counts
        full, rest = divmod(size, self.per_tile)
        idx = (self.start + np.arange(full + (1 if rest else 0))) % num_tiles
        np.add.at(counts, idx, [self.per_tile] * full + ([rest] if rest else []))
        return counts


@dataclasses.dataclass(frozen=True)
class TileMap:
    values: dict          # value id -> Mapping
    variables: list       # variable index -> Mapping
    num_tiles: int


class _Planner:
    def __init__(self, num_tiles):
        self.num_tiles = num_tiles
        self.next_tile = 0
        self.values = {}

    def linear(self, type_):
        grain = max(1, GRAIN_BYTES // type_.itemsize)
        tiles = max(1, min(self.num_tiles, math.ceil(type_.size / grain)))
        mapping = Mapping(self.next_tile, tiles, max(1, math.ceil(type_.size / tiles)))
        self.next_tile = (self.next_tile + tiles) % self.num_tiles
        return mapping

    def graph(self, graph, variables):
        for eqn in graph.equations:
            self.equation(eqn, variables)

    def equation(self, eqn, variables):
        opdef = get_op(eqn.op)
        if eqn.op == "read_var":
            self.values[eqn.outputs[0].id] = variables[eqn.params["var"]]
            return
        for sub in eqn.subgraphs():
            # A body's inputs are the trailing operands (an `if` also takes a predicate).
            operands = eqn.inputs[len(eqn.inputs) - len(sub.inputs):]
            for inner, outer in zip(sub.inputs, operands):
                self.values[inner.id] = self.values.get(outer.id) or self.linear(outer.type)
            self.graph(sub, variables)
        for i, out in enumerate(eqn.outputs):
            self.values[out.id] = self._choose(opdef, eqn, i, out)

    def _choose(self, opdef, eqn, i, out):
        if eqn.op == "while":
            return self.values.get(eqn.inputs[i].id) or self.linear(out.type)
        if opdef.mapping == "elementwise":
            for v in eqn.inputs:
                if v.type.shape == out.type.shape and v.id in self.values:
                    return self.values[v.id]
        return self.linear(out.type)


def plan_tile_mapping(graph, target):
    planner = _Planner(target.num_tiles)
    variables = [planner.linear(spec.type) for spec in graph.variables]
    for value in graph.inputs:
        planner.values[value.id] = planner.linear(value.type)
    planner.graph(graph, variables)
    return TileMap(planner.values, variables, target.num_tiles)
