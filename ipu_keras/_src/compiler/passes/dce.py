"""Dead-code elimination: drop pure equations none of whose outputs is used."""
from ipu_keras._src.compiler.passes.rewrite import map_graph
from ipu_keras._src.ops.registry import get_op


def eliminate_dead_code(graph):
    return map_graph(graph, _dce_level)


def _dce_level(equations, outputs):
    used = {v.id for v in outputs}
    kept = []
    for eqn in reversed(equations):
        if get_op(eqn.op).effect or any(v.id in used for v in eqn.outputs):
            kept.append(eqn)
            used.update(v.id for v in eqn.inputs)
    return kept[::-1], outputs
