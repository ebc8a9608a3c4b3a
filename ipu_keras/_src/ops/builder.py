"""Builds graphs equation by equation, typing each output with its op's shape rule."""
import numpy as np

from ipu_keras._src.ir.graph import Equation, Graph, Source, Value
from ipu_keras._src.ir.types import TensorType, type_of
from ipu_keras._src.ops.registry import get_op


class Builder:
    """Appends equations to a list; `source`, `shard` and `stage` are stamped on each."""

    def __init__(self, source=None, shard=None, stage=None):
        self.equations = []
        self.source = source or Source()
        self.shard = shard
        self.stage = stage

    def emit(self, op, inputs, **params):
        """Append `op(inputs, **params)`; returns its output Value, or a tuple if not one."""
        opdef = get_op(op)
        out_types = opdef.shape([v.type for v in inputs], **params)
        outputs = [Value(t) for t in out_types]
        self.equations.append(Equation(op, list(inputs), outputs, params, self.source,
                                       self.shard, self.stage))
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def const(self, value, dtype=None):
        array = np.asarray(value, dtype=dtype)
        return self.emit("const", [], value=array)

    def graph(self, inputs, outputs, **state):
        return Graph(list(inputs), list(outputs), self.equations, **state)


def new_input(shape, dtype, name=""):
    return Value(TensorType(shape, dtype), name)


__all__ = ["Builder", "new_input", "type_of"]
