"""Counted loops: the loop-control equations a Poplar `Repeat` does not run.

IPU TensorFlow turns a while loop whose trip count is known at compile time into a Poplar
`Repeat` of its body and deletes the counters that only count (graphcore/tensorflow@0831968,
`tensorflow/compiler/plugin/poplar/driver/passes/while_loop_to_repeat_simplify.cc`: a
condition that compares a carried integer with a constant, that integer starting from a
constant and updated once per iteration, then every scalar integer counter that is only
updated and carried becomes dead). A `Repeat` counts on the tiles' own control code: no
vertex, no exchange, no sync per iteration. So the lowering charges nothing for the
condition's comparison nor for the updates of such counters (`lower.py`).

`repeat_free(loop, producer)` finds them: the loop's condition must be one comparison of a
counter with a constant (constants aside, nothing else), a counter being a carried scalar
integer that starts from a constant and that the body updates with one equation of it and
a constant; such a loop's trip count follows from constants alone, whichever operation
updates the counter. Then the comparison is free, and so is the update of every counter
that nothing but its update reads (one the body also reads, to index a slice say, keeps
its update, as in TensorFlow's pass).
"""
from collections import Counter

import numpy as np

from ipu_keras._src.ops.registry import get_op


def repeat_free(loop, producer):
    """ids of the equations of `loop`'s condition and body that a `Repeat` does not run.

    `producer` maps a value id of the loop's enclosing graph to the equation making it
    (for the counters' initial values). Empty when the loop is not a counted loop."""
    cond, body = loop.params["cond"], loop.params["body"]
    counters = _counters(loop, body, producer)
    check = _comparison(cond)
    if check is None:
        return set()
    compared = [j for j, v in enumerate(cond.inputs) if v.id in {x.id for x in check.inputs}]
    if len(compared) != 1 or compared[0] not in counters:
        return set()
    return {id(check)} | {id(update) for update, dead in counters.values() if dead}


def _counters(loop, body, producer):
    """{carried index: (the body equation updating it, whether only the update reads it
    and only the loop's next iteration reads the update)} of the loop's scalar integers
    that start from a constant and are updated from themselves and a constant."""
    inner = {v.id: e for e in body.equations for v in e.outputs}
    reads = Counter(v.id for e in body.equations for v in e.inputs)
    returned = Counter(v.id for v in body.outputs)
    counters = {}
    for j, (init, carried, result) in enumerate(zip(loop.inputs, body.inputs, body.outputs)):
        update = inner.get(result.id)
        if not (_int_constant(init, producer) and update is not None and len(update.inputs) == 2):
            continue
        other = [v for v in update.inputs if v.id != carried.id]
        if len(other) == 1 and _int_constant(other[0], inner):
            dead = reads[carried.id] == 1 and reads[result.id] == 0 and returned[result.id] == 1
            counters[j] = (update, dead)
    return counters


def _comparison(cond):
    """The condition's one equation, when it compares a carried value with a constant."""
    inner = {v.id: e for e in cond.equations for v in e.outputs}
    work = [e for e in cond.equations if get_op(e.op).role != "constant"]
    if len(work) != 1 or len(cond.outputs) != 1 or inner.get(cond.outputs[0].id) is not work[0]:
        return None
    (check,) = work
    carried = {v.id for v in cond.inputs}
    kinds = sorted(v.id in carried for v in check.inputs)
    constant = [v for v in check.inputs if v.id not in carried]
    if kinds != [False, True] or not _int_constant(constant[0], inner):
        return None
    return check


def _int_constant(value, producer):
    """Whether `value` is a scalar integer made by a constant equation of `producer`."""
    eqn = producer.get(value.id)
    return (eqn is not None and get_op(eqn.op).role == "constant" and value.type.size == 1
            and np.dtype(value.type.dtype).kind in "iu")
