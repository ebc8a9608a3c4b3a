"""Inline `call` equations: splice the callee's equations in place of the call.

A call of an outlined function (param `outlined`, `ops/control.py`) stays a call: the
lowering gives all calls of one body a single body program (`passes/outline.py`)."""
import dataclasses

from ipu_keras._src.compiler.passes.rewrite import map_graph, substitute
from ipu_keras._src.ops.registry import get_op


def inline_calls(graph):
    return map_graph(graph, _inline_level)


def _inline_level(equations, outputs):
    out, mapping = [], {}
    for eqn in equations:
        eqn = dataclasses.replace(eqn, inputs=substitute(eqn.inputs, mapping))
        if get_op(eqn.op).role != "subgraph_call" or "outlined" in eqn.params:
            out.append(eqn)
            continue
        callee = eqn.params["fn"]
        inner = {p.id: a for p, a in zip(callee.inputs, eqn.inputs)}
        for sub in callee.equations:
            out.append(dataclasses.replace(sub, inputs=substitute(sub.inputs, inner)))
        for result, value in zip(eqn.outputs, substitute(callee.outputs, inner)):
            mapping[result.id] = value
    return out, substitute(outputs, mapping)
