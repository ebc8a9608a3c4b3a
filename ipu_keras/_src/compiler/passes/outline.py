"""Outlined functions: which calls share one body program.

A call kept by the inline pass (`functional_ops.outlined_function`) holds its own copy of
the body, imported and optimised with the rest of the graph. Calls whose bodies came out
the same (the same canonical text, `ir/fingerprint.py`) on the same IPU share one body:
the lowering emits it once as a block that each call site runs (`steps.Call`), and the
memory plan counts its code once. A body specialised differently at one call site
(a different constant reached it) is a body of its own.
"""
from ipu_keras._src.ir.fingerprint import fingerprint
from ipu_keras._src.ops.registry import get_op


def is_outlined(eqn):
    """Whether `eqn` is the call of an outlined function."""
    return get_op(eqn.op).role == "subgraph_call" and "outlined" in eqn.params


def body_key(eqn):
    """What identifies the body program of the outlined call `eqn`: calls with the same
    key share it. A body that reads a value it does not define or take as an input
    (none does today) is not shared."""
    body = eqn.params["fn"]
    if not _closed(body):
        return (eqn.params["outlined"], eqn.shard, id(eqn))
    return (eqn.params["outlined"], eqn.shard, fingerprint(body))


def _closed(graph, defined=None):
    defined = set(defined or ()) | {v.id for v in graph.inputs}
    for eqn in graph.equations:
        if any(v.id not in defined for v in eqn.inputs):
            return False
        for sub in eqn.subgraphs():
            if not _closed(sub, defined):
                return False
        defined.update(v.id for v in eqn.outputs)
    return all(v.id in defined for v in graph.outputs)
