"""Sibling products run at once, one per core (`simulator/siblings.py`).

A convolution's input and filter gradients, and two matmuls sharing an operand, next to
each other: on two cores each runs whole on one of them, giving the bits of the kernels
on one core; small products, or any on other core counts, run one after the other. Which
steps pair: consecutive single-output products sharing an operand, the second not
reading the first's output.
"""
import numpy as np
import pytest

from ipu_keras._src.compiler import compile_graph
from ipu_keras._src.device.steps import Exec
from ipu_keras._src.ops import cores
from ipu_keras._src.ops.builder import Builder, new_input
from ipu_keras._src.simulator import Engine, siblings
from tests.graphs import small_target

CONV = {"strides": (1, 1), "dilations": (1, 1), "padding": ((1, 1), (1, 1))}
X, W = (8, 16, 16, 64), (3, 3, 64, 64)   # each gradient 75M multiply-accumulates


def _conv_gradients():
    b = Builder()
    x, w = new_input(X, "float32", "x"), new_input(W, "float32", "w")
    dy = new_input(X, "float32", "dy")
    dx = b.emit("conv_input_grad", [w, dy], input_shape=X, **CONV)
    dw = b.emit("conv_filter_grad", [x, dy], filter_shape=W, **CONV)
    return b.graph([x, w, dy], [dx, dw])


def _matmuls(rows, chained=False):
    """a @ b and a @ c (sharing a), or (a @ b) @ c (the second reading the first)."""
    bld = Builder()
    a = new_input((rows, 256), "float32", "a")
    b, c = new_input((256, 256), "float32", "b"), new_input((256, 256), "float32", "c")
    first = bld.emit("matmul", [a, b])
    second = bld.emit("matmul", [first if chained else a, c])
    return bld.graph([a, b, c], [first, second])


def _inputs(graph):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(v.type.shape).astype(np.float32) for v in graph.inputs]


def _at_once_calls(monkeypatch):
    calls = []
    concurrently = cores.concurrently
    monkeypatch.setattr(cores, "concurrently",
                        lambda *fns: (calls.append(len(fns)), concurrently(*fns)))
    monkeypatch.setattr(cores, "_cores", lambda: 2)
    return calls


@pytest.mark.parametrize("graph", [_conv_gradients(), _matmuls(512)],
                         ids=["conv input and filter gradients", "matmuls sharing a"])
def test_wide_siblings_run_at_once_with_the_bits_of_one_core(graph, monkeypatch):
    exe = compile_graph(graph, small_target(16))
    assert [s.kind for s in siblings.siblings(exe.blocks[0].steps)].count("siblings") == 1
    calls = _at_once_calls(monkeypatch)
    with cores.execution(widen=False):
        expected = Engine(exe).run(_inputs(graph), [], None)
    with cores.execution(widen=True):
        got = Engine(exe).run(_inputs(graph), [], None)
    assert calls == [2]
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def test_narrow_siblings_run_one_after_the_other(monkeypatch):
    graph = _matmuls(64)    # 4M multiply-accumulates each: below cores.WIDE_MACS
    exe = compile_graph(graph, small_target(16))
    calls = _at_once_calls(monkeypatch)
    with cores.execution(widen=True):
        got = Engine(exe).run(_inputs(graph), [], None)
    a, b, c = _inputs(graph)
    assert calls == []
    # The reference under the engine's BLAS settings (one thread): BLAS' own threads sum
    # a product in another order, and their count is the machine's, not the engine's.
    with cores.execution(widen=False):
        expected = [a @ b, a @ c]
    for one, reference in zip(got, expected):
        np.testing.assert_array_equal(one.view(np.uint32), reference.view(np.uint32))


def _step(op, ins, out):
    return Exec(op, tuple(ins), (out,), {})


def test_which_steps_are_siblings():
    steps = [_step("matmul", [0, 1], 3), _step("matmul", [0, 2], 4),     # share 0
             _step("matmul", [3, 1], 5), _step("matmul", [5, 2], 6),     # reads 5
             _step("matmul", [6, 1], 7), _step("add", [6, 2], 8),        # not a product
             _step("conv_input_grad", [1, 8], 9), _step("conv_filter_grad", [0, 8], 10)]
    plan = siblings.siblings(steps)
    assert [s.kind for s in plan] == ["siblings", "exec", "exec", "exec", "exec", "siblings"]
    assert plan[0] == siblings.SiblingSteps((0, 1, 0, 2), (3, 4), steps[0], steps[1])


def test_concurrently_runs_both_and_raises_an_error_of_either(monkeypatch):
    monkeypatch.setattr(cores, "_cores", lambda: 2)
    ran = []
    with cores.execution(widen=True):
        cores.concurrently(lambda: ran.append(cores.slabs()), lambda: ran.append(cores.slabs()))
        assert ran == [1, 1] and cores.slabs() == 2    # each whole, not split again

        def fail():
            raise ValueError("in the worker")
        with pytest.raises(ValueError, match="in the worker"):
            cores.concurrently(lambda: None, fail)
    with cores.execution(widen=False):
        cores.concurrently(lambda: ran.append("a"), lambda: ran.append("b"))
    assert ran[2:] == ["a", "b"]
