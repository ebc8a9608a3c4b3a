"""Evaluate an equation whose inputs are all known constants (compile-time folding).

Shared by the tracer (so that shape-like operands computed from constants are known
while importing) and the compiler's constant-folding pass.
"""
import numpy as np

from ipu_keras._src.ops.registry import get_op

MAX_FOLDED_ELEMENTS = 1 << 16
"""Results larger than this are left to run time: folding them would bloat constants."""


def fold_equation(eqn, consts):
    """The equation's output arrays if it is pure and all its inputs are in `consts`, else None."""
    opdef = get_op(eqn.op)
    if (opdef.effect or opdef.engine or not eqn.inputs
            or any(v.id not in consts for v in eqn.inputs)
            or sum(v.type.size for v in eqn.outputs) > MAX_FOLDED_ELEMENTS):
        return None
    with np.errstate(all="ignore"):  # as on the device: no float exception stops folding
        results = opdef.kernel(*[consts[v.id] for v in eqn.inputs], **eqn.params)
    results = results if isinstance(results, tuple) else (results,)
    return [np.asarray(r, dtype=v.dtype) for r, v in zip(results, eqn.outputs)]
