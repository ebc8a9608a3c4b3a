"""Liveness and the memory plan: bytes per tile, always-live and not-always-live.

Always-live: variables, constants and code (an estimate per vertex type present on a
tile, when `compile_ipu_code` is on). Not-always-live: every other value, live from
the step that defines it to its last use; the peak over the program, per tile, is
what the tile must hold at worst. A control-flow step adds the peak of its bodies
on top of what is live around it.
"""
import dataclasses

import numpy as np

from ipu_keras.errors import OutOfTileMemoryError

CODE_BYTES_PER_VERTEX_TYPE = 800
"""Estimate: bytes of codelet code per distinct vertex type on a tile."""
VERTEX_STATE_BYTES = 16
"""Estimate: bytes of state per vertex (pointers and sizes of its operands)."""


@dataclasses.dataclass
class MemoryPlan:
    always_live: np.ndarray          # bytes per tile
    not_always_live: np.ndarray      # peak bytes per tile
    categories: dict                 # category -> bytes per tile
    liveness: list                   # not-always-live bytes during each top-level step

    @property
    def total(self):
        return self.always_live + self.not_always_live

    def summary(self):
        total = self.total
        tile = int(np.argmax(total))
        return {
            "max_tile": tile,
            "max_tile_bytes": int(total[tile]),
            "total_bytes": int(total.sum()),
            "always_live_bytes": int(self.always_live.sum()),
            "peak_not_always_live_bytes": int(self.not_always_live.sum()),
            "tile_memory": total.astype(int).tolist(),
            "categories": {k: int(v.sum()) for k, v in self.categories.items()},
            "liveness": self.liveness,
        }


class _Liveness:
    def __init__(self, tile_map):
        self.map = tile_map
        self.n = tile_map.num_tiles

    def bytes_of(self, value):
        return self.map.values[value.id].elements(value.type.size, self.n) * value.type.itemsize

    def peak(self, graph, trace=None):
        last_use = {}
        for i, eqn in enumerate(graph.equations):
            for v in eqn.inputs:
                last_use[v.id] = i
        for v in graph.outputs:
            last_use[v.id] = len(graph.equations)
        live = sum((self.bytes_of(v) for v in graph.inputs), np.zeros(self.n, np.int64))
        peak = live.copy()
        owned = {v.id: self.bytes_of(v) for v in graph.inputs}
        for i, eqn in enumerate(graph.equations):
            if eqn.op not in ("const", "read_var"):
                for v in eqn.outputs:
                    owned[v.id] = self.bytes_of(v)
                    live = live + owned[v.id]
            inner = [self.peak(sub) for sub in eqn.subgraphs()]
            during = live + (np.max(inner, axis=0) if inner else 0)
            peak = np.maximum(peak, during)
            if trace is not None:
                trace.append(int(during.sum()))
            for v in eqn.inputs + eqn.outputs:
                if last_use.get(v.id, -1) <= i and v.id in owned:
                    live = live - owned.pop(v.id)
        return peak


def plan_memory(graph, tile_map, compile_ipu_code=True):
    live = _Liveness(tile_map)
    n = tile_map.num_tiles
    variables = np.zeros(n, np.int64)
    for spec, mapping in zip(graph.variables, tile_map.variables):
        variables += mapping.elements(spec.type.size, n) * spec.type.itemsize
    constants = np.zeros(n, np.int64)
    code = np.zeros(n, np.int64)
    vertex_types = [set() for _ in range(n)] if compile_ipu_code else None
    for eqn in graph.walk():
        if eqn.op == "const":
            constants += live.bytes_of(eqn.outputs[0])
        elif compile_ipu_code and eqn.outputs and eqn.op not in ("read_var",):
            tiles = np.nonzero(live.bytes_of(eqn.outputs[0]))[0]
            code[tiles] += VERTEX_STATE_BYTES
            for t in tiles:
                vertex_types[t].add(eqn.op)
    if compile_ipu_code:
        code += np.array([len(s) for s in vertex_types], np.int64) * CODE_BYTES_PER_VERTEX_TYPE
    trace = []
    temporaries = live.peak(graph, trace)
    categories = {"variables": variables, "constants": constants, "code": code,
                  "temporaries": temporaries}
    return MemoryPlan(variables + constants + code, temporaries, categories, trace)


def check_memory(plan, graph, tile_map, target):
    """Raise OutOfTileMemoryError, with the largest tensors on the tile, if any tile overflows."""
    total = plan.total
    tile = int(np.argmax(total))
    if total[tile] <= target.bytes_per_tile:
        return
    raise OutOfTileMemoryError(tile, int(total[tile]), target.bytes_per_tile,
                               _advice(graph, tile_map, tile))


def _advice(graph, tile_map, tile):
    n = tile_map.num_tiles
    sizes = []
    for eqn in graph.walk():
        for v in eqn.outputs:
            if v.id in tile_map.values:
                nbytes = tile_map.values[v.id].elements(v.type.size, n)[tile] * v.type.itemsize
                sizes.append((int(nbytes), f"{eqn.op} {v.type} from {eqn.source}"))
    largest = sorted(sizes, reverse=True)[:5]
    lines = [f"  {b} bytes: {what}" for b, what in largest if b]
    return (
        "Largest tensors on that tile:\n" + "\n".join(lines) + "\nTry a smaller batch size, a "
        "lower availableMemoryProportion, half partials (partialsType='half'), or spread the "
        "model over more IPUs with sharding or pipelining."
    )
