"""Inline `call` equations: splice the callee's equations in place of the call.

A call of an outlined function (param `outlined`, `ops/control.py`) stays a call: the
lowering gives all calls of one body a single body program (`passes/outline.py`). As in
the SDK, a stateful body (one that writes a variable, e.g. a random seed, or uses a feed)
cannot be reused and is inlined like any other call."""
import dataclasses

from ipu_keras._src.compiler.passes.rewrite import map_graph, substitute
from ipu_keras._src.ops.registry import get_op


def inline_calls(graph):
    return map_graph(graph, _inline_level)


def _inline_level(equations, outputs):
    out, mapping = [], {}
    for eqn in equations:
        if mapping and any(v.id in mapping for v in eqn.inputs):
            eqn = dataclasses.replace(eqn, inputs=substitute(eqn.inputs, mapping))
        if get_op(eqn.op).role != "subgraph_call" or (
                "outlined" in eqn.params and not _stateful(eqn.params["fn"])):
            out.append(eqn)
            continue
        callee = eqn.params["fn"]
        inner = {p.id: a for p, a in zip(callee.inputs, eqn.inputs)}
        for sub in callee.equations:
            out.append(dataclasses.replace(sub, inputs=substitute(sub.inputs, inner)))
        for result, value in zip(eqn.outputs, substitute(callee.outputs, inner)):
            mapping[result.id] = value
    return out, substitute(outputs, mapping)


_CONTROL = ("loop", "branch", "subgraph_call")


def _stateful(graph):
    """Whether `graph` has an effect other than control flow (a variable write, a feed)."""
    for eqn in graph.walk():
        opdef = get_op(eqn.op)
        if opdef.effect and opdef.role not in _CONTROL:
            return True
    return False
