"""The engine runs executables: kernels, variables, streams, loops and cycle counts."""
import weakref

import numpy as np
import pytest

from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.compiler import compile_graph
from ipu_keras.errors import FloatingPointTrapError
from ipu_keras._src.ir.graph import Source
from ipu_keras._src.ops.builder import Builder, new_input
from ipu_keras._src.simulator import Engine
from tests.graphs import ListStreams, counting_loop, dense_step, dense_step_reference, small_target


def test_dense_step_matches_numpy_and_updates_the_variable():
    exe = compile_graph(dense_step(), small_target(4))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w = rng.standard_normal((3, 2)).astype(np.float32)
    state = [w.copy()]
    y, total = Engine(exe).run([x], state, streams=None)
    ref_y, ref_total, ref_w = dense_step_reference(x, w)
    T.FLOAT32_KERNEL.assert_close(y, ref_y)
    T.FLOAT32_KERNEL.assert_close(total, ref_total)
    T.FLOAT32_KERNEL.assert_close(state[0], ref_w)
    assert state[0].dtype == np.float32


def test_while_loop_with_streams():
    graph, _ = counting_loop(limit=3)
    exe = compile_graph(graph, small_target(4))
    elements = [np.full(2, k, np.float32) for k in (1, 2, 3)]
    streams = ListStreams(elements)
    i, acc = Engine(exe).run([np.zeros(2, np.float32)], [], streams)
    assert i == 3
    np.testing.assert_array_equal(acc, [11, 11])  # ((0*2+1)*2+2)*2+3
    np.testing.assert_array_equal(np.stack(streams.out), [[1, 1], [4, 4], [11, 11]])


def test_cycles_are_block_costs_times_executions():
    graph, _ = counting_loop(limit=4)
    exe = compile_graph(graph, small_target(4))
    engine = Engine(exe)
    engine.run([np.zeros(2, np.float32)], [], ListStreams([np.ones(2, np.float32)] * 4))
    loop = exe.blocks[0].steps[0]
    cond, body = loop.cond_block, loop.body_block
    assert engine.counts[cond] == 5 and engine.counts[body] == 4
    expected = {k: exe.blocks[0].cycles[k] + 5 * exe.blocks[cond].cycles[k]
                + 4 * exe.blocks[body].cycles[k] for k in exe.blocks[0].cycles}
    assert engine.cycles() == expected
    assert expected["host_io"] > 0 and expected["compute"] > 0


def _divide_graph(dtype):
    """x / y elementwise (floor division for integers), with a source on the equation."""
    b = Builder()
    x, y = new_input((3,), dtype, "x"), new_input((3,), dtype, "y")
    op = "div" if np.dtype(dtype).kind == "f" else "floor_div"
    out = b.emit(op, [x, y])
    b.equations[-1].source = Source("model/ratio/truediv", "ratio")
    return b.graph([x, y], [out])


def test_traps_name_the_step_and_are_free_when_off():
    exe = compile_graph(_divide_graph("float32"), small_target(4))
    x, y = np.array([1, 0, 2], np.float32), np.array([1, 0, 0], np.float32)
    (off,) = Engine(exe).run([x, y], [], None)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(off, x / y)  # nan and inf propagate
    (quiet,) = Engine(exe, {"oflo": True}).run([x, y], [], None)
    np.testing.assert_array_equal(quiet, off)
    with pytest.raises(FloatingPointTrapError) as info:
        Engine(exe, {"inv": True, "div0": False}).run([x, y], [], None)
    assert (info.value.flag, info.value.op, info.value.layer) == ("inv", "div", "ratio")
    assert info.value.node == "model/ratio/truediv"


def test_integer_division_by_zero_never_traps():
    exe = compile_graph(_divide_graph("int32"), small_target(4))
    x, y = np.array([7, 8, 9], np.int32), np.array([2, 0, 3], np.int32)
    (out,) = Engine(exe, {"inv": True, "div0": True, "oflo": True}).run([x, y], [], None)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(out, np.floor_divide(x, y))


class _Recording(Engine):
    """An engine that keeps a weak reference to every exec step's result."""

    def __init__(self, executable):
        self.made = []
        super().__init__(executable)

    def _step_exec(self, step):
        run = super()._step_exec(step)

        def recorded(env):
            run(env)
            self.made.extend((step.op, weakref.ref(env[o])) for o in step.outs)
        return recorded


def test_a_value_is_freed_after_its_last_reader():
    graph, _ = counting_loop(limit=3)
    engine = _Recording(compile_graph(graph, small_target(4)))
    freed = []

    class Streams(ListStreams):
        def push(self, feed, arrays):
            super().push(feed, arrays)
            # acc * 2 of this iteration: read by the add before the outfeed, then dead.
            freed.append([ref for op, ref in engine.made if op == "mul"][-1]() is None)

    streams = Streams([np.full(2, k, np.float32) for k in (1, 2, 3)])
    i, acc = engine.run([np.zeros(2, np.float32)], [], streams)
    assert freed == [True, True, True]
    np.testing.assert_array_equal(acc, [11, 11])   # the carried values were kept


@pytest.mark.parametrize("graph", [dense_step(), counting_loop(limit=2)[0]],
                         ids=["dense", "loop"])
def test_no_slot_is_dropped_before_a_later_read_or_handed_back(graph):
    exe = compile_graph(graph, small_target(4))
    engine = Engine(exe)
    dropped = 0
    for index, block in enumerate(exe.blocks):
        dead = engine._dead_after(index, block.steps)
        for i, slots in enumerate(dead):
            later = {s for step in block.steps[i + 1:] for s in engine._block_step_reads(step)}
            assert not set(slots) & (later | engine._exports[index]), (index, i)
            dropped += len(slots)
    assert dropped > 0
