"""Strict tile mode: every compute set replayed tile by tile equals the vectorised run."""
import dataclasses

import numpy as np
import pytest

from ipu_keras._src.compiler import compile_graph
from ipu_keras.errors import ConfigurationError, StrictModeMismatch
from ipu_keras._src.ir import TensorType, VariableSpec
from ipu_keras._src.ops.builder import Builder, new_input
from ipu_keras._src.simulator import Engine, tile_rules
from ipu_keras._src.simulator.strict import StrictEngine
from tests.graphs import ListStreams, counting_loop, dense_step, row_ops, small_target

TILES = (4, 7, 16)
RNG = np.random.default_rng(0)


def _random(shape, dtype="float32"):
    if np.dtype(dtype).kind == "i":
        return RNG.integers(0, 3, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def _both(graph, tiles, inputs, state=(), streams=lambda: None):
    """Runs `graph` vectorised and strictly; asserts identical bits; returns the engine."""
    exe = compile_graph(graph, small_target(tiles))
    state_a, state_b = [s.copy() for s in state], [s.copy() for s in state]
    plain = Engine(exe).run(inputs, state_a, streams())
    engine = StrictEngine(exe)
    strict = engine.run(inputs, state_b, streams())
    for a, b in zip(plain + state_a, strict + state_b):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    assert all(r.runs for r in engine.report())
    return engine


def _graph(build, *shapes):
    b = Builder()
    ins = [new_input(s, d) for s, d in shapes]
    return b.graph(ins, list(build(b, *ins))), [_random(s, d) for s, d in shapes]


@pytest.mark.parametrize("tiles", TILES)
def test_dense_step(tiles):
    x, w = _random((4, 3)), _random((3, 2))
    engine = _both(dense_step(), tiles, [x], [w])
    rules = {r.op: r.rule for r in engine.report()}
    assert rules == {"matmul": "matmul", "add": "elementwise", "relu": "elementwise",
                     "mul": "elementwise", "reduce_sum": "reduce"}


@pytest.mark.parametrize("tiles", TILES)
def test_counting_loop(tiles):
    graph, _ = counting_loop(limit=3)
    elements = [np.full(2, k, np.float32) for k in (1, 2, 3)]
    engine = _both(graph, tiles, [np.zeros(2, np.float32)],
                   streams=lambda: ListStreams(elements))
    assert sorted({r.runs for r in engine.report()}) == [3, 4]  # body 3x, condition 4x


def _elementwise(b, x, bias, col, cond):
    y = b.emit("add", [x, bias])
    z = b.emit("mul", [b.emit("exp", [y]), col])
    yield b.emit("select", [cond, z, b.emit("maximum", [x, col])])
    yield b.emit("cast", [b.emit("greater", [z, bias])], dtype="int32")
    yield b.emit("bias_add", [x, bias])


def _reductions(b, x):
    yield b.emit("reduce_sum", [x], axes=(0,), keep_dims=False)
    yield b.emit("reduce_sum", [x], axes=(1,), keep_dims=True)
    yield b.emit("reduce_max", [x], axes=(0, 2), keep_dims=False)
    yield b.emit("reduce_mean", [x], axes=(2,), keep_dims=False)
    yield b.emit("argmax", [x], axis=1)
    yield b.emit("reduce_sum", [x], axes=(0, 1, 2), keep_dims=False)


def _movement(b, x, y):
    t = b.emit("transpose", [x], perm=(2, 0, 1))
    yield b.emit("reshape", [t], shape=(6, 20))
    yield b.emit("concat", [x, y], axis=1)
    yield b.emit("pad", [x], paddings=((1, 0), (0, 2), (1, 1)), mode="constant")
    yield b.emit("strided_slice", [x], begin=(0, 1, 0), sizes=(2, 2, 3), strides=(2, 1, 2))
    yield b.emit("reverse", [y], axes=(0, 2))
    yield from b.emit("split", [x], axis=2, sizes=(2, 4))


def _matmuls(b, a, c, batched, shared):
    yield b.emit("matmul", [a, c], transpose_a=True, transpose_b=True)
    yield b.emit("matmul", [a, a], transpose_a=True)
    yield b.emit("matmul", [c, c], transpose_b=True)
    yield b.emit("matmul", [c, a])
    yield b.emit("matmul", [batched, shared])




def _cnn(b, x, w, dy):
    conv = dict(strides=(1, 1), dilations=(1, 1), padding=((1, 1), (1, 1)))
    y = b.emit("conv", [x, w], **conv)
    yield b.emit("max_pool", [y], ksize=(2, 2), strides=(2, 2), padding=((0, 0), (0, 0)))
    yield b.emit("bias_add_grad", [y])
    yield b.emit("conv_input_grad", [w, dy], input_shape=(2, 5, 5, 3), **conv)
    yield b.emit("conv_filter_grad", [x, dy], filter_shape=(3, 3, 3, 4), **conv)


CASES = {
    "elementwise": (_elementwise, ((5, 6), "float32"), ((6,), "float32"),
                    ((5, 1), "float32"), ((5, 6), "bool")),
    "reductions": (_reductions, ((4, 5, 6), "float32")),
    "movement": (_movement, ((4, 5, 6), "float32"), ((4, 3, 6), "float32")),
    "matmuls": (_matmuls, ((7, 5), "float32"), ((3, 7), "float32"),
                ((3, 4, 6), "float32"), ((1, 6, 5), "float32")),
    "softmaxes": (row_ops, ((6, 10), "float32"), ((6, 10), "float32"), ((6,), "int32")),
    "cnn": (_cnn, ((2, 5, 5, 3), "float32"), ((3, 3, 3, 4), "float32"),
            ((2, 5, 5, 4), "float32")),
}


@pytest.mark.parametrize("tiles", TILES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_op_families(case, tiles):
    build, *shapes = CASES[case]
    graph, inputs = _graph(build, *shapes)
    engine = _both(graph, tiles, inputs)
    rules = {r.rule for r in engine.report()}
    assert not rules & {"skipped", "fallback"}, engine.format_report()


def test_rules_that_are_not_tile_local_are_reported():
    graph, inputs = _graph(lambda b, x: [b.emit("cumsum", [x], axis=0, exclusive=False,
                                                   reverse=False)], ((9, 2), "float32"))
    (row,) = _both(graph, 4, inputs).report()
    assert row.rule == "fallback" and not row.tile_local


def test_a_mapping_that_loses_elements_is_caught():
    graph, inputs = _graph(lambda b, x: [b.emit("exp", [x])], ((40,), "float32"))
    exe = compile_graph(graph, small_target(4))
    tiles = exe.blocks[0].tiles
    slots = tuple(dataclasses.replace(row, per_tile=9) if row.index == exe.outputs[0] else row
                  for row in tiles.slots)   # 5 chunks of 9 on 4 tiles: one tile's first is lost
    exe.blocks[0] = dataclasses.replace(exe.blocks[0],
                                        tiles=dataclasses.replace(tiles, slots=slots))
    with pytest.raises(StrictModeMismatch, match="exactly one tile"):
        StrictEngine(exe).run(inputs, [], None)


def test_a_rule_that_misses_an_operand_element_is_caught(monkeypatch):
    graph, inputs = _graph(lambda b, a, c: [b.emit("matmul", [a, c])],
                           ((4, 6), "float32"), ((6, 3), "float32"))
    real = tile_rules.needed_masks

    def forgetful(*args, **kwargs):
        masks = real(*args, **kwargs)
        masks[1][-1] = False            # forget the last row of B (the last k)
        return masks

    monkeypatch.setattr(tile_rules, "needed_masks", forgetful)
    exe = compile_graph(graph, small_target(7))
    with pytest.raises(StrictModeMismatch, match=r"tile \d+ computed matmul"):
        StrictEngine(exe).run(inputs, [], None)


def test_strict_mode_refuses_big_targets_and_old_executables():
    graph, _ = _graph(lambda b, x: [b.emit("exp", [x])], ((8,), "float32"))
    with pytest.raises(ConfigurationError, match="num_tiles=1472"):
        StrictEngine(compile_graph(graph, small_target(0)))
    exe = compile_graph(graph, small_target(4))
    exe.blocks = [dataclasses.replace(block, tiles=None) for block in exe.blocks]
    with pytest.raises(ConfigurationError, match="tile map"):
        StrictEngine(exe)


def test_saved_executables_keep_their_tile_map(tmp_path):
    b = Builder()
    x = new_input((6,), "float32")
    w = b.emit("read_var", [], var=0, type=TensorType((6,), "float32"))
    graph = b.graph([x], [b.emit("mul", [x, w])],
                    variables=[VariableSpec("w", TensorType((6,), "float32"))])
    exe = compile_graph(graph, small_target(4))
    exe.save(tmp_path / "exe.zip")
    loaded = type(exe).load(tmp_path / "exe.zip")
    assert loaded.blocks[0].tiles == exe.blocks[0].tiles
    assert len(loaded.blocks[0].tiles.variables) == 1
    _both(graph, 4, [_random((6,))], [_random((6,))])
