"""Chains of rowwise steps run a block of rows at a time (`simulator/fusion.py`).

The engine with chains must give the same bits as the engine without them, for chains
that qualify (large, one frame, values that die inside) on one core and split over the
cores, with operands broadcast along rows, columns and as scalars; values read after a
chain are handed on whole and those that die in it are never stored. Which steps form a
chain: consecutive single-output rowwise exec steps, more dying in it than handed on.
"""
import numpy as np
import pytest

from ipu_keras._src.compiler import compile_graph
from ipu_keras._src.device.steps import Exec, Read
from ipu_keras._src.ops import cores
from ipu_keras._src.ops.builder import Builder, new_input
from ipu_keras._src.simulator import Engine, fusion
from tests.graphs import small_target

ROWS, COLS = 64, 4096   # 256K outputs: fusion.MIN_ELEMENTS


class _Unfused(Engine):
    fuses = False


def _gelu_grad_like(rows=ROWS, cols=COLS):
    """g * x * exp(-(x * c)^2) + (x + bias) * column, with every intermediate dying in the
    chain, and x + bias also returned (read after it)."""
    b = Builder()
    x, g = new_input((rows, cols), "float32", "x"), new_input((rows, cols), "float32", "g")
    bias, column = new_input((cols,), "float32", "bias"), new_input((rows, 1), "float32", "c")
    scaled = b.emit("mul", [x, b.const(np.float32(0.7071))])
    gauss = b.emit("exp", [b.emit("neg", [b.emit("square", [scaled])])])
    shifted = b.emit("bias_add", [x, bias])
    out = b.emit("add_n", [b.emit("mul", [b.emit("mul", [g, x]), gauss]),
                           b.emit("mul", [shifted, column])])
    return b.graph([x, g, bias, column], [out, shifted])


def _inputs(rows=ROWS, cols=COLS):
    rng = np.random.default_rng(0)
    return [rng.standard_normal((rows, cols)).astype(np.float32),
            rng.standard_normal((rows, cols)).astype(np.float32),
            rng.standard_normal(cols).astype(np.float32),
            rng.standard_normal((rows, 1)).astype(np.float32)]


def _bits(arrays):
    return [np.ascontiguousarray(a).view(np.uint8) for a in arrays]


@pytest.fixture(scope="module")
def executable():
    return compile_graph(_gelu_grad_like(), small_target(1472))


@pytest.mark.parametrize("split", [False, True], ids=["one core", "split over the cores"])
def test_a_chain_gives_the_bits_of_its_steps_one_by_one(executable, split, monkeypatch):
    calls = []
    chain_call = fusion.Chain.__call__
    monkeypatch.setattr(fusion.Chain, "__call__",
                        lambda self, env: (calls.append(self), chain_call(self, env)))
    expected = _Unfused(executable).run(_inputs(), [], None)
    with cores.execution(widen=split):
        got = Engine(executable).run(_inputs(), [], None)
        slabs = cores.slabs()
    assert slabs == (cores._cores() if split else 1)
    assert len(calls) == 1 and list(calls[0]._frames.values()) == [(ROWS, COLS)]
    assert [a.shape for a in got] == [(ROWS, COLS)] * 2
    assert all(np.array_equal(a, b) for a, b in zip(_bits(got), _bits(expected)))


def test_small_chains_run_their_steps_one_by_one():
    exe = compile_graph(_gelu_grad_like(rows=8, cols=64), small_target(16))
    got = Engine(exe).run(_inputs(8, 64), [], None)
    expected = _Unfused(exe).run(_inputs(8, 64), [], None)
    assert all(np.array_equal(a, b) for a, b in zip(_bits(got), _bits(expected)))


def _step(op, ins, out):
    return Exec(op, tuple(ins), (out,), {})


def test_which_steps_form_a_chain():
    runs = [object() for _ in range(7)]
    steps = [_step("neg", [0], 1), _step("exp", [1], 2), _step("mul", [2, 0], 3),
             _step("matmul", [3, 3], 4),                       # not rowwise: ends it
             _step("neg", [4], 5), _step("exp", [5], 6),       # hands on 6, 5 dies: 1 = 1
             Read(0, 7)]
    dead = [(), (1,), (2,), (3,), (), (5,), ()]
    fused = fusion.fuse(steps, runs, dead)
    assert isinstance(fused[0], fusion.Chain) and fused[1:] == runs[3:]
    assert fused[0].outputs == [3] and fused[0].locals == 2 and fused[0].inputs == (0,)


def test_select_is_not_rowwise():
    """A vector condition picks whole rows: cutting rows of the operands but not of the
    condition would pick the wrong ones."""
    steps = [_step("neg", [0], 1), _step("select", [5, 1, 1], 2), _step("neg", [2], 3)]
    runs = [object() for _ in steps]
    assert fusion.fuse(steps, runs, [(), (1,), (2,)]) == runs
