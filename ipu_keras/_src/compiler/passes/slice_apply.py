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
as it is applied. The concatenation stays only if something else reads it.

The scaled patterns of the same pass (`a * x + concat(...) * y`) are not matched.
"""
import dataclasses

from ipu_keras._src.compiler.passes.rewrite import map_graph
from ipu_keras._src.ir.graph import Value
from ipu_keras._src.ops.registry import get_op


def apply_slices(graph):
    return map_graph(graph, _apply_level)


def _apply_level(equations, outputs):
    made_at = {v.id: i for i, eqn in enumerate(equations) for v in eqn.outputs}
    producer = {v.id: eqn for eqn in equations for v in eqn.outputs}
    placed = []    # (position of the equation it follows, order, equation)
    for i, eqn in enumerate(equations):
        concat = producer.get(eqn.inputs[1].id) if len(eqn.inputs) == 2 else None
        if concat is None or not _matches(eqn, concat):
            placed.append((i, len(placed), eqn))
            continue
        after = made_at.get(eqn.inputs[0].id, -1)
        for step in _chain(eqn, concat):
            after = max(after, made_at.get(step.inputs[1].id, -1))
            placed.append((after, len(placed), step))
    placed.sort(key=lambda item: item[:2])
    return [eqn for *_, eqn in placed], outputs


def _matches(eqn, concat):
    """Whether `eqn` is `f(a, concat(...))` for an elementwise f whose operands and result
    have one type (in place on `a`, IPU TensorFlow's `kInplaceReadWrite` binary ops)."""
    opdef = get_op(eqn.op)
    if concat.op != "concat" or len(eqn.outputs) != 1 or not concat.outputs[0].type.size:
        return False
    out = eqn.outputs[0].type
    return (opdef.mapping == "elementwise" and opdef.role == "compute" and not opdef.effect
            and opdef.tile_rule_for(eqn.params) == "elementwise"
            and all(v.type == out for v in eqn.inputs))


def _chain(eqn, concat):
    """The slice applies replacing `eqn`, the last defining `eqn`'s own result."""
    axis = concat.params["axis"] % eqn.outputs[0].type.rank
    starts, start = [], 0
    for part in concat.inputs:
        starts.append(start)
        start += part.type.shape[axis]
    parts = [(p, s) for p, s in zip(concat.inputs, starts) if p.type.shape[axis]]
    steps, base = [], eqn.inputs[0]
    for k, (part, start) in enumerate(parts):
        out = eqn.outputs[0] if k == len(parts) - 1 else Value(base.type)
        steps.append(dataclasses.replace(
            eqn, op="slice_apply", inputs=[base, part], outputs=[out],
            params={"binary": eqn.op, "axis": axis, "start": start, "params": dict(eqn.params)}))
        base = out
    return steps


__all__ = ["apply_slices"]
