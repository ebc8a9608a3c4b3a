"""Constant folding: evaluate pure equations whose inputs are all constants."""
import dataclasses

from ipu_keras._src.compiler.passes.rewrite import map_graph
from ipu_keras._src.ops.evaluate import fold_equation
from ipu_keras._src.ops.registry import get_op


def fold_constants(graph):
    return map_graph(graph, _fold_level)


def _fold_level(equations, outputs):
    consts, out = {}, []
    for eqn in equations:
        if get_op(eqn.op).role == "constant":
            consts[eqn.outputs[0].id] = eqn.params["value"]
            out.append(eqn)
            continue
        results = fold_equation(eqn, consts)
        if results is None:
            out.append(eqn)
            continue
        for value, result in zip(eqn.outputs, results):
            consts[value.id] = result
            out.append(dataclasses.replace(eqn, op="const", inputs=[], outputs=[value],
                                           params={"value": result}))
    return out, outputs
