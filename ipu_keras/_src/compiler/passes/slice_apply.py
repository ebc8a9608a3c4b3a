"""Slice applies: a binary in-place op whose second operand is a concatenation becomes one
`slice_apply` per concatenated part, each run as soon as its part exists.

`f(a, concat(b, c, ...))` (f elementwise on operands and a result of one type, as an add
of a tensor and the concatenated results of several products) first needs every part,
alive together, and their concatenation. IPU TensorFlow's SliceOptimizer rewrites it
into `slice_apply(slice_apply(a, b), c)...`, each applying f to its part and writing the
result into that slice of `a` in place, "to minimize the maximum liveness"
(graphcore/tensorflow@b2127bb, tensorflow/compiler/plugin/poplar/driver/passes/
slice_optimizer.cc, pattern `slice_apply`); its scheduler, which keeps the schedule of
least peak memory, then runs each one once its part is there. Here each `slice_apply`
follows the equation that makes its part (or the previous one), so a part dies as soon
as it is applied. The concatenation stays only if something else reads it. A
concatenation is what its op's `view` fact says it is: a view of the whole of each of
its operands, each once.

The scaled patterns of the same pass (`a * x + concat(...) * y`) are not matched.
"""
import dataclasses

from ipu_keras._src.compiler.passes.rewrite import map_graph
from ipu_keras._src.compiler.passes.views import view_groups
from ipu_keras._src.ir.graph import Value
from ipu_keras._src.ops.registry import get_op


def apply_slices(graph):
    return map_graph(graph, _apply_level)


def _apply_level(equations, outputs):
    made_at = {v.id: i for i, eqn in enumerate(equations) for v in eqn.outputs}
    placed = []    # (position of the equation it follows, order, equation)
    for i, eqn in enumerate(equations):
        joined = made_at.get(eqn.inputs[1].id) if len(eqn.inputs) == 2 else None
        parts = _parts(equations[joined]) if joined is not None and _in_place(eqn) else None
        if not parts:
            placed.append((i, len(placed), eqn))
            continue
        after = made_at.get(eqn.inputs[0].id, -1)
        for step in _chain(eqn, parts):
            after = max(after, made_at.get(step.inputs[1].id, -1))
            placed.append((after, len(placed), step))
    placed.sort(key=lambda item: item[:2])
    return [eqn for *_, eqn in placed], outputs


def _in_place(eqn):
    """Whether `eqn` is an elementwise f whose operands and result have one type (in place
    on its first operand, IPU TensorFlow's `kInplaceReadWrite` binary ops)."""
    opdef = get_op(eqn.op)
    if len(eqn.outputs) != 1:
        return False
    out = eqn.outputs[0].type
    return (opdef.mapping == "elementwise" and opdef.role == "compute" and not opdef.effect
            and opdef.tile_rule_for(eqn.params) == "elementwise"
            and all(v.type == out for v in eqn.inputs))


def _parts(eqn):
    """[(operand, its runs in the output)] if `eqn`'s one output is a concatenation: a
    view (`views.view_groups`) of the whole of each of its operands, each once; else None."""
    groups = view_groups(eqn)
    if groups is None or len(groups) != 1 or groups[0] is None:
        return None
    parts, seen = [], set()
    for k, first, pitch, length, count, at, step in groups[0]:
        whole = first == 0 and pitch == length and length * count == eqn.inputs[k].type.size
        if not whole or k in seen:
            return None
        seen.add(k)
        parts.append((k, (first, pitch, length, count, at, step)))
    return [(eqn.inputs[k], runs) for k, runs in sorted(parts)] or None


def _chain(eqn, parts):
    """The slice applies replacing `eqn`, the last defining `eqn`'s own result."""
    steps, base = [], eqn.inputs[0]
    for k, (part, runs) in enumerate(parts):
        out = eqn.outputs[0] if k == len(parts) - 1 else Value(base.type)
        steps.append(dataclasses.replace(
            eqn, op="slice_apply", inputs=[base, part], outputs=[out],
            params={"binary": eqn.op, "runs": runs, "params": dict(eqn.params)}))
        base = out
    return steps


__all__ = ["apply_slices"]
