"""Constant folding: evaluate pure equations whose inputs are all constants."""
import dataclasses

import numpy as np

from ipu_keras.compiler.passes.rewrite import map_graph
from ipu_keras.ops.registry import get_op

MAX_FOLDED_ELEMENTS = 1 << 16


def fold_constants(graph):
    return map_graph(graph, _fold_level)


def _fold_level(equations, outputs):
    consts, out = {}, []
    for eqn in equations:
        opdef = get_op(eqn.op)
        if eqn.op == "const":
            consts[eqn.outputs[0].id] = eqn.params["value"]
        elif _foldable(opdef, eqn, consts):
            results = opdef.kernel(*[consts[v.id] for v in eqn.inputs], **eqn.params)
            results = results if isinstance(results, tuple) else (results,)
            for value, result in zip(eqn.outputs, results):
                result = np.asarray(result, dtype=value.dtype)
                consts[value.id] = result
                out.append(dataclasses.replace(eqn, op="const", inputs=[], outputs=[value],
                                               params={"value": result}))
            continue
        out.append(eqn)
    return out, outputs


def _foldable(opdef, eqn, consts):
    return (
        not opdef.effect
        and not opdef.engine
        and eqn.inputs
        and all(v.id in consts for v in eqn.inputs)
        and sum(v.type.size for v in eqn.outputs) <= MAX_FOLDED_ELEMENTS
    )
