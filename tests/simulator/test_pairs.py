"""Pairs of steps the engine runs as one kernel (`simulator/pairs.py`).

The registered pair: a max-pool gradient followed by the ReLU gradient at the pool's
input. The engine with pairs must give the bits of the engine without them, and fuse
only when the second step is the one reader of the first's output and reads nothing
else than the first's operands; the pair's kernel is checked bit for bit in
`tests/ops/test_pool.py`.
"""
import numpy as np
import pytest

from ipu_keras._src.compiler import compile_graph
from ipu_keras._src.device.steps import Exec
from ipu_keras._src.ops.builder import Builder, new_input
from ipu_keras._src.simulator import Engine, pairs
from tests.graphs import small_target

SHAPE = (4, 8, 8, 3)
WINDOWS = {"ksize": (2, 2), "strides": (2, 2), "padding": ((0, 0), (0, 0))}


class _Unfused(Engine):
    fuses = False


def _pool_backward(between=False, hand_on=False, other_features=False):
    """relu -> max_pool, then max_pool_grad and relu_grad at the relu's output, with a
    step between them (`between`), the pooled gradient also returned (`hand_on`), or
    the ReLU gradient taken at another value (`other_features`)."""
    b = Builder()
    x, dy = new_input(SHAPE, "float32", "x"), new_input((4, 4, 4, 3), "float32", "dy")
    r = b.emit("relu", [x])
    y = b.emit("max_pool", [r], **WINDOWS)
    d = b.emit("max_pool_grad", [r, y, dy], ties="first", y_is_max=True, **WINDOWS)
    outs = [b.emit("neg", [y])] if between else []
    outs.append(b.emit("relu_grad", [d, x if other_features else r]))
    if hand_on:
        outs.append(d)
    return b.graph([x, dy], outs)


def _inputs():
    rng = np.random.default_rng(0)
    x = rng.integers(-2, 3, SHAPE).astype(np.float32)   # zeros after the ReLU: ties
    return [x, rng.standard_normal((4, 4, 4, 3)).astype(np.float32)]


def _plan(graph):
    exe = compile_graph(graph, small_target(16))
    engine = Engine(exe)
    plan = pairs.fuse_pairs(exe.blocks[0].steps, engine._block_step_reads,
                            engine._exports[0])
    return exe, [step.op if isinstance(step, Exec) else step.name for step in plan
                 if isinstance(step, (Exec, pairs.Pair))]


@pytest.mark.parametrize("between", [False, True], ids=["adjacent", "a step between"])
def test_a_pair_gives_the_bits_of_its_two_steps(between):
    exe, ops = _plan(_pool_backward(between=between))
    assert "max_pool_grad+relu_grad" in ops and "relu_grad" not in ops
    got = Engine(exe).run(_inputs(), [], None)
    expected = _Unfused(exe).run(_inputs(), [], None)
    assert np.count_nonzero(expected[-1]) > 0
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("kind", ["hand_on", "other_features"])
def test_no_pair_when_the_first_output_is_read_again_or_the_operands_differ(kind):
    exe, ops = _plan(_pool_backward(**{kind: True}))
    assert "max_pool_grad" in ops and "relu_grad" in ops
    assert not any("+" in op for op in ops)
    got = Engine(exe).run(_inputs(), [], None)
    expected = _Unfused(exe).run(_inputs(), [], None)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))
