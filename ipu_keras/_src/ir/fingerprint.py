"""A graph's fingerprint: a canonical text of the IR and its SHA-256.

`canonical_text(graph)` writes a graph deterministically, so that two processes
tracing the same function get the same text: value ids are renumbered in order of
definition (graph inputs, then each equation's outputs, sub-graphs where they
appear), params are written sorted by name, constant arrays by dtype, shape and the
SHA-256 of their bytes, sub-graphs in full, and the variables and feeds with their
names and types. Each equation keeps its source (TensorFlow node and Keras layer),
since reports and error messages of the executable show it; value names do not
reach the executable and are left out. `fingerprint(graph)` is the hex SHA-256 of
the text; the executable cache (`ipu_keras/compile.py`) builds its key on it.

Used by the compile entry point, and by the compiler to tell which outlined calls
share one body (`compiler/passes/outline.py`).
"""
import enum
import hashlib

import numpy as np

from ipu_keras._src.ir.graph import Graph
from ipu_keras._src.ir.types import TensorType


class _Writer:
    def __init__(self):
        self.numbers = {}
        self.lines = []

    def define(self, value):
        self.numbers[value.id] = len(self.numbers)
        return f"%{self.numbers[value.id]}:{value.type}"

    def use(self, value):
        number = self.numbers.get(value.id)
        # A value used before its definition cannot occur in a verified graph; keep the
        # text deterministic anyway by naming it by type only.
        return f"%{number}" if number is not None else f"%?:{value.type}"

    def graph(self, graph, depth):
        pad = "  " * depth
        self.lines.append(f"{pad}graph({', '.join(self.define(v) for v in graph.inputs)})")
        for eqn in graph.equations:
            ins = ", ".join(self.use(v) for v in eqn.inputs)
            outs = ", ".join(self.define(v) for v in eqn.outputs)
            params = ", ".join(f"{k}={self.param(eqn.params[k], depth)}"
                               for k in sorted(eqn.params))
            source = f"@{eqn.source.node!r}/{eqn.source.layer!r}"
            if eqn.shard is not None or eqn.stage is not None or eqn.pipeline:
                source += f" on({eqn.shard},{eqn.stage},{sorted((eqn.pipeline or {}).items())})"
            self.lines.append(f"{pad}  {outs} = {eqn.op}({ins}) {{{params}}} {source}")
        self.lines.append(f"{pad}  return {', '.join(self.use(v) for v in graph.outputs)}")

    def param(self, value, depth):
        if isinstance(value, Graph):
            start = len(self.lines)
            self.graph(value, depth + 2)
            return f"<graph lines {start}-{len(self.lines)}>"
        if isinstance(value, (np.ndarray, np.generic)):
            return _array_text(np.asarray(value))
        if isinstance(value, TensorType):
            return f"type:{value}"
        if isinstance(value, enum.Enum):
            return f"{type(value).__name__}.{value.name}"
        if isinstance(value, np.dtype):
            return f"dtype:{value.name}"
        if isinstance(value, (list, tuple)):
            items = ", ".join(self.param(v, depth) for v in value)
            return f"[{items}]" if isinstance(value, list) else f"({items})"
        if isinstance(value, dict):
            items = ", ".join(f"{k!r}: {self.param(value[k], depth)}"
                              for k in sorted(value, key=repr))
            return f"{{{items}}}"
        if isinstance(value, float):
            return float.hex(value)
        # str, int, bool, None and anything else: repr. An object whose repr holds its
        # address gives a key that never matches: a cache miss, never a wrong hit.
        return repr(value)


def _array_text(array):
    digest = hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()
    return f"array<{array.dtype.name}{list(array.shape)} sha256={digest}>"


def canonical_text(graph):
    """The deterministic text of `graph` (see the module docstring)."""
    writer = _Writer()
    for spec in graph.variables:
        writer.lines.append(f"variable {spec.name!r}: {spec.type}")
    for kind, feeds in (("infeed", graph.infeeds), ("outfeed", graph.outfeeds)):
        for feed in feeds:
            writer.lines.append(f"{kind} {feed.name!r}: {', '.join(map(str, feed.types))}")
    writer.graph(graph, 0)
    return "\n".join(writer.lines)


def fingerprint(graph):
    """The hex SHA-256 of `canonical_text(graph)`."""
    return hashlib.sha256(canonical_text(graph).encode()).hexdigest()


__all__ = ["canonical_text", "fingerprint"]
