"""Support for the TensorFlow-free rules tests of the op families.

`every_op_is_sampled` checks a family's ops are registered with all rules and each
has a sample in the family's table. `FakeNode` is what the tracer hands an importer:
every operand is a known array (a `const` in the node's own builder), so `static(i)`
answers for all of them; `run()` calls the registered importer and returns its
results with the equations it added.
"""
import numpy as np

from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops.builder import Builder
from ipu_keras._src.ops.registry import MAPPINGS, get_importer, get_op


def every_op_is_sampled(ir_ops, samples):
    """Each op in `ir_ops` is a pure kernel op with every rule and a sample (first field)."""
    sampled = {s[0] for s in samples}
    for name in ir_ops:
        opdef = get_op(name)
        assert callable(opdef.shape) and callable(opdef.kernel) and callable(opdef.cost), name
        assert opdef.mapping in MAPPINGS and not opdef.engine and not opdef.effect, name
        assert name in sampled, f"no sample for {name}"


class FakeNode:
    def __init__(self, tf_type, arrays, out_types=(), statics=None, **attrs):
        self.type, self.name, self.layer = tf_type, tf_type.lower(), ""
        self.builder = Builder()
        self.arrays = [np.asarray(a) for a in arrays]
        self.inputs = [self.builder.const(a) for a in self.arrays]
        self.out_types = [TensorType(*t) for t in out_types]
        self.statics = statics or {}
        self.attrs = attrs
        self._first = len(self.builder.equations)

    def attr(self, name, default=None):
        return self.attrs.get(name, default)

    def static(self, i):
        return np.asarray(self.statics[i]) if i in self.statics else self.arrays[i]

    def run(self):
        """(the importer's results, the ops it emitted, the equations it emitted)."""
        results = get_importer(self.type)(self, self.builder)
        equations = self.builder.equations[self._first:]
        return results, [e.op for e in equations], equations


def zeros_of(*types):
    """Arrays of the given TensorTypes, for importers that only look at types."""
    return [np.zeros(t.shape, t.dtype) for t in types]
