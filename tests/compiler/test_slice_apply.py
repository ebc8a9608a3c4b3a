"""Slice applies (`compiler/passes/slice_apply.py`): a binary in-place op of a value and a
concatenation becomes one `slice_apply` per part, each right after its part is made and
written in place, so the parts never live together; results are TensorFlow's."""
import numpy as np
import pytest

from ipu_keras._src.compiler import compile_graph
from ipu_keras._src.compiler.passes import traffic
from ipu_keras._src.compiler.passes.dce import eliminate_dead_code
from ipu_keras._src.compiler.passes.lower import step_cycles
from ipu_keras._src.compiler.passes.memory import plan_memory
from ipu_keras._src.compiler.passes.slice_apply import apply_slices
from ipu_keras._src.compiler.passes.tile_map import plan_tile_mapping
from ipu_keras._src.ops.builder import Builder, new_input
from ipu_keras._src.ops.registry import get_op
from ipu_keras._src.simulator import Engine
from ipu_keras._src.simulator.strict import StrictEngine
from tests.graphs import small_target

RNG = np.random.default_rng(5)
F32 = 4


def _parts_graph(binary="sub", axis=0, rows=(4, 4, 8), width=16, concat_first=False,
                 base_shape=None):
    """x - concat(y0 @ w, y1 @ w, y2 @ w) on `axis` (parts of `rows` along it, each made
    after the previous), as IPU TensorFlow's serialized product test has it."""
    b = Builder()
    along = [(r, 8) if axis == 0 else (width, 8) for r in rows]
    full = (sum(rows), width) if axis == 0 else (width, sum(rows))
    x = new_input(base_shape or full, "float32")
    ys = [new_input(s, "float32") for s in along]
    w = new_input((8, width), "float32")
    ws = [w] * len(rows) if axis == 0 else [
        b.emit("strided_slice", [w], begin=(0, 0), sizes=(8, r), strides=(1, 1)) for r in rows]
    parts = [b.emit("matmul", [y, v]) for y, v in zip(ys, ws)]
    joined = b.emit("concat", parts, axis=axis)
    operands = [joined, x] if concat_first else [x, joined]
    out = b.emit(binary, operands)
    return b.graph([x, *ys, w], [out]), [x, *ys, w]


def _inputs(graph):
    return [RNG.standard_normal(v.type.shape).astype(np.float32) for v in graph.inputs]


def _rewritten(graph):
    return eliminate_dead_code(apply_slices(graph))


def test_each_part_is_applied_right_after_it_is_made():
    graph, _ = _parts_graph()
    out = _rewritten(graph)
    assert [e.op for e in out.equations] == ["matmul", "slice_apply"] * 3
    applies = [e for e in out.equations if e.op == "slice_apply"]
    # The parts' rows of x (16 wide): from rows 0, 4 and 8, each one run.
    assert [e.params["runs"][:5] for e in applies] == [
        (0, 64, 64, 1, 0), (0, 64, 64, 1, 64), (0, 128, 128, 1, 128)]
    assert [e.params["binary"] for e in applies] == ["sub"] * 3
    # A chain from x to the original result, each step reading the part made before it.
    assert applies[0].inputs[0] is graph.inputs[0]
    assert [a.inputs[0] for a in applies[1:]] == [a.outputs[0] for a in applies[:-1]]
    assert applies[-1].outputs[0] is graph.outputs[0]
    for i, eqn in enumerate(out.equations):
        if eqn.op == "slice_apply":
            assert eqn.inputs[1] is out.equations[i - 1].outputs[0]


@pytest.mark.parametrize("kwargs", [
    {"concat_first": True},                 # the concatenation is operand 0: not in place
    {"base_shape": (1, 16)},                # a broadcast operand: operands of two types
    {"binary": "less"},                     # a bool result: not in place on x
])
def test_other_forms_are_left_alone(kwargs):
    graph, _ = _parts_graph(**kwargs)
    assert "slice_apply" not in [e.op for e in _rewritten(graph).equations]


def test_a_concatenation_read_elsewhere_stays():
    graph, _ = _parts_graph()
    b = Builder()
    joined = graph.equations[3].outputs[0]
    b.equations = list(graph.equations)
    other = b.emit("neg", [joined])
    graph = graph.replace(equations=b.equations, outputs=[graph.outputs[0], other])
    ops = [e.op for e in _rewritten(graph).equations]
    assert ops.count("slice_apply") == 3 and ops.count("concat") == 1


@pytest.mark.parametrize("binary", ("sub", "add", "maximum", "div"))
@pytest.mark.parametrize("axis", (0, 1))
def test_results_are_bit_for_bit_those_of_the_op_on_the_concatenation(binary, axis):
    graph, _ = _parts_graph(binary, axis, rows=(3, 5, 2))
    exe = compile_graph(graph, small_target(7))
    assert "slice_apply" in exe.info["liveness_steps"]
    inputs = _inputs(graph)
    x, *ys, w = inputs
    matmul = get_op("matmul").kernel
    fn = {"sub": np.subtract, "add": np.add, "maximum": np.maximum, "div": np.divide}[binary]
    rows = (3, 5, 2)
    parts = [matmul(y, w if axis == 0 else w[:, :r]) for y, r in zip(ys, rows)]
    want = fn(x, np.concatenate(parts, axis))
    (got,) = Engine(exe).run(inputs, [], None)
    assert got.tobytes() == want.tobytes()
    (strict,) = StrictEngine(exe).run(inputs, [], None)
    assert strict.tobytes() == got.tobytes()


def test_the_parts_never_live_together_and_the_result_is_written_into_x():
    graph, (x, *ys) = _parts_graph(rows=(16, 16, 16, 16), width=32)
    target = small_target(8)
    before = plan_memory(graph, plan_tile_mapping(graph, target), compile_ipu_code=False)
    after_graph = _rewritten(graph)
    tile_map = plan_tile_mapping(after_graph, target)
    after = plan_memory(after_graph, tile_map, compile_ipu_code=False)
    inputs = sum(v.type.nbytes for v in graph.inputs)
    part = 16 * 32 * F32
    # Before: the inputs, all four parts, and the result (x is read last by the op, so
    # it is written in place: no fifth buffer).
    assert max(before.liveness) >= inputs + 4 * part
    # After: the inputs, one part and what its slice apply receives, or its product's
    # copies of its operands (a dot is a function call: memory.py); never a second x.
    for step, eqn in enumerate(after_graph.equations):
        received = int(traffic.received_bytes(eqn, tile_map).sum())
        function = get_op(eqn.op).runs_as_function(
            [v.type for v in eqn.inputs], [v.type for v in eqn.outputs], eqn.params)
        copies = sum(v.type.nbytes for v in eqn.inputs) if function else 0
        assert after.liveness[step] <= inputs + part + received + copies
    assert max(after.liveness) < max(before.liveness)


def test_a_slice_apply_moves_and_works_only_on_the_tiles_of_its_slice():
    """x[64, 32] spread over 8 tiles, 8 rows each: the part of rows 16-31 goes to tiles
    2 and 3 alone, which do all of its work."""
    graph, _ = _parts_graph(rows=(16, 16, 32), width=32)
    target = small_target(8)
    graph = _rewritten(graph)
    tile_map = plan_tile_mapping(graph, target)
    x = tile_map.values[graph.inputs[0].id]
    assert (x.tiles, x.per_tile) == (8, 8 * 32)
    second = [e for e in graph.equations if e.op == "slice_apply"][1]
    received = traffic.received_bytes(second, tile_map)
    holders = (x.start + np.array([2, 3])) % 8
    others = np.setdiff1d(np.arange(8), holders)
    part = tile_map.values[second.inputs[1].id]
    # Each holder receives its 8 rows of the part, less any rows the part has there.
    lo, hi = part.bounds(16 * 32, 8)
    for k, tile in enumerate(holders):
        local = max(0, min(hi[tile], (k + 1) * 256) - max(lo[tile], k * 256))
        assert received[tile] == (256 - local) * F32
    assert not received[others].any()
    # Its work: 8 rows on each busy tile, as a whole-x sub over 8 tiles would be, not a
    # quarter of that spread over all of them.
    b = Builder()
    whole = b.emit("sub", [graph.inputs[0], graph.inputs[0]])
    ref_graph = b.graph([graph.inputs[0]], [whole])
    ref_map = plan_tile_mapping(ref_graph, target)
    assert (step_cycles(second, tile_map, target)[0]
            == step_cycles(ref_graph.equations[0], ref_map, target)[0])


@pytest.mark.parametrize("tiles", (3, 8, 16))
@pytest.mark.parametrize("axis", (0, 1))
def test_strict_mode_measures_what_the_exchange_charges(tiles, axis):
    """Strict tile mode replays each slice apply by its region (the "region" rule): a
    tile needs x's elements it owns and the part's elements that land on them. What it
    lacks of those is what the exchange charges, byte for byte; a rule that claimed
    too little would compute from poison and fail."""
    graph, _ = _parts_graph("sub", axis, rows=(5, 11, 16), width=24)
    exe = compile_graph(graph, small_target(tiles))
    inputs = _inputs(graph)
    engine = StrictEngine(exe)
    (strict,) = engine.run(inputs, [], None)
    (plain,) = Engine(exe).run(inputs, [], None)
    assert strict.tobytes() == plain.tobytes()
    rows = [r for r in engine.report() if r.op == "slice_apply"]
    assert len(rows) == 3, engine.format_report()
    for r in rows:
        assert r.rule == "region" and r.tile_local, engine.format_report()
        assert r.measured == r.modelled, engine.format_report()
    if axis == 0:
        # Not a vacuous check: the parts' rows are made on other tiles than x's rows
        # they land on, so some are received.
        assert any(r.received > 0 for r in rows), engine.format_report()
