"""Device state found while tracing: variables, infeeds and outfeeds.

TensorFlow passes resources (variable handles, dataset iterators) as tensors; the
tracer does not make IR values of them. It binds each resource tensor to a `StateRef`
and numbers the objects behind them in a `StateTable`, whose specs become the
top-level graph's `variables`, `infeeds` and `outfeeds`.
"""
import dataclasses

from ipu_keras._src.ir.graph import FeedSpec, VariableSpec
from ipu_keras._src.ir.types import TensorType


@dataclasses.dataclass(frozen=True, eq=False)
class StateRef:
    """A resource operand: `kind` is "variable" or "iterator", `obj` the Python object."""

    kind: str
    obj: object


class StateTable:
    def __init__(self):
        self.variables, self.variable_objects = [], []
        self._variable_index = {}   # id of a variable object (kept alive above) -> index
        self.infeeds, self.infeed_objects = [], []
        self.outfeeds, self.outfeed_objects = [], []

    def variable(self, var):
        index = self._variable_index.get(id(var))
        if index is not None:
            return index
        dtype = var.dtype.as_numpy_dtype
        spec = VariableSpec(var.name, TensorType(tuple(var.shape), dtype))
        self.variables.append(spec)
        self.variable_objects.append(var)
        self._variable_index[id(var)] = len(self.variables) - 1
        return len(self.variables) - 1

    def infeed(self, iterator, types):
        return self._feed(self.infeeds, self.infeed_objects, iterator, types, "infeed")

    def outfeed(self, queue, types):
        return self._feed(self.outfeeds, self.outfeed_objects, queue, types, "outfeed")

    @staticmethod
    def _feed(specs, objects, obj, types, kind):
        from ipu_keras.errors import FeedError

        for i, known in enumerate(objects):
            if known is obj:
                if list(specs[i].types) != list(types):
                    raise FeedError(
                        f"Every use of one {kind} must move the same shapes and dtypes, expected "
                        f"{[str(t) for t in specs[i].types]}. Received: {[str(t) for t in types]}."
                    )
                return i
        specs.append(FeedSpec(f"{kind}{len(specs)}", tuple(types)))
        objects.append(obj)
        return len(specs) - 1
