"""Counted loops cost what a Poplar Repeat runs: no condition, no dead counters."""
import numpy as np

from ipu_keras._src.compiler import compile_graph
from ipu_keras._src.device import cost
from ipu_keras._src.ir.graph import Graph
from ipu_keras._src.ops.builder import Builder, new_input
from tests.graphs import counting_loop, small_target


def _loop(limit_carried=False, counter_read=False):
    """while i < limit: acc = acc * 2 (+ i as float when `counter_read`); i += 1.
    `limit_carried`: the limit is a carried value, not a constant."""
    cb = Builder()
    ci, cacc, climit = (new_input((), "int32"), new_input((4,), "float32"),
                        new_input((), "int32"))
    bound = climit if limit_carried else cb.const(np.int32(5))
    cond = cb.graph([ci, cacc, climit], [cb.emit("less", [ci, bound])])
    bb = Builder()
    bi, bacc, blimit = (new_input((), "int32"), new_input((4,), "float32"),
                        new_input((), "int32"))
    acc = bb.emit("mul", [bacc, bb.const(np.float32(2))])
    if counter_read:
        acc = bb.emit("add", [acc, bb.emit("cast", [bi], dtype="float32")])
    body = bb.graph([bi, bacc, blimit], [bb.emit("add", [bi, bb.const(np.int32(1))]), acc,
                                         blimit])
    b = Builder()
    start = new_input((4,), "float32", "start")
    _, out, _ = b.emit("while", [b.const(np.int32(0)), start, b.const(np.int32(5))],
                       cond=cond, body=body)
    return Graph([start], [out], b.equations)


def _blocks(graph):
    exe = compile_graph(graph, small_target(4), compile_ipu_code=False)
    cond, body = exe.blocks[0].steps[0].blocks
    return exe.blocks[cond], exe.blocks[body]


def _ops(block):
    """The block's costed ops, less the loop state's copy (tested on its own below)."""
    return sorted(row.op for row in block.profile if row.op != "loop_state_copy")


def test_a_counted_loop_pays_neither_its_condition_nor_its_counter():
    cond, body = _blocks(_loop())
    assert not any(cond.cycles.values()) and cond.profile == ()
    assert _ops(body) == ["mul"]
    # The tutorial-style loop of tests/graphs.py too: its counter is also a result.
    graph, _ = counting_loop()
    cond, body = _blocks(graph)
    assert not any(cond.cycles.values())
    assert _ops(body) == ["add", "infeed", "mul", "outfeed"]   # the counter's add is free


def test_a_loop_with_a_carried_limit_evaluates_its_condition():
    cond, body = _blocks(_loop(limit_carried=True))
    assert cond.cycles["compute"] > 0 and _ops(cond) == ["less"]
    assert _ops(body) == ["add", "mul"]


def test_a_counter_the_body_reads_keeps_its_update_but_not_the_condition():
    cond, body = _blocks(_loop(counter_read=True))
    assert not any(cond.cycles.values())
    assert _ops(body) == ["add", "add", "cast", "mul"]


def test_a_loop_copies_its_new_state_into_the_loop_each_iteration():
    """IPU TensorFlow copies each body result that is not the very tensor it replaces back
    into the loop's state (`AddLoopInputOutputAliasingCopies`): here the doubled
    accumulator (16 bytes on one tile, made where the state lies: nothing to receive),
    not the limit passed through unchanged, nor the counter a Repeat does not keep."""
    _, body = _blocks(_loop())
    (row,) = [r for r in body.profile if r.op == "loop_state_copy"]
    target = small_target(4)
    assert row.cycles == {"compute": cost.VERTEX_OVERHEAD_CYCLES + 16 // 8, "exchange": 0,
                          "sync": target.internal_sync_cycles, "host_io": 0}
    # The counter the body reads is kept by the Repeat, so it is copied too (4 bytes more
    # on the tile that holds both).
    _, read = _blocks(_loop(counter_read=True))
    (row,) = [r for r in read.profile if r.op == "loop_state_copy"]
    assert row.cycles["compute"] >= cost.VERTEX_OVERHEAD_CYCLES + 2
