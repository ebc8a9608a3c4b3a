"""Views of parts of values: a static slice and a concatenation take no memory of their
own, keep their sources alive as long as they live, cost no cycles, and their readers
receive the elements from where the sources hold them (`tile_map.ViewMapping`)."""
import numpy as np
import pytest

from ipu_keras._src.compiler import compile_graph
from ipu_keras._src.compiler.passes import traffic
from ipu_keras._src.compiler.passes.lower import step_cycles
from ipu_keras._src.compiler.passes.memory import live_ranges, plan_memory
from ipu_keras._src.compiler.passes.tile_map import ViewMapping, plan_tile_mapping
from ipu_keras._src.ir import TensorType
from ipu_keras._src.ops.builder import Builder, new_input
from ipu_keras._src.ops.registry import get_op
from ipu_keras._src.simulator import Engine
from ipu_keras._src.simulator.strict import StrictEngine
from tests.graphs import small_target

RNG = np.random.default_rng(3)
F32 = 4


def _plan(graph, tiles=4):
    tile_map = plan_tile_mapping(graph, small_target(tiles))
    return plan_memory(graph, tile_map, compile_ipu_code=False), tile_map


def _received(graph, tile_map, index):
    return int(traffic.received_bytes(graph.equations[index], tile_map).sum())


def _slice_graph():
    """x[16, 16]: s = x[4:12] (a view), then neg(s)."""
    b = Builder()
    x = new_input((16, 16), "float32")
    s = b.emit("strided_slice", [x], begin=(4, 0), sizes=(8, 16), strides=(1, 1))
    return b.graph([x], [b.emit("neg", [s])]), x, s


def test_a_static_slice_adds_no_bytes():
    graph, x, s = _slice_graph()
    plan, tile_map = _plan(graph)
    assert tile_map.roots(s.id) == (x.id,)
    assert isinstance(tile_map.values[s.id], ViewMapping)
    # Step 0 (the slice): x alone. Step 1: x, the result, and the slice's elements the
    # result's tiles lack, received.
    assert plan.liveness == [16 * 16 * F32,
                             16 * 16 * F32 + 8 * 16 * F32 + _received(graph, tile_map, 1)]


def test_a_strided_slice_with_steps_still_copies():
    b = Builder()
    x = new_input((16, 16), "float32")
    s = b.emit("strided_slice", [x], begin=(0, 0), sizes=(8, 16), strides=(2, 1))
    graph = b.graph([x], [b.emit("neg", [s])])
    plan, tile_map = _plan(graph)
    assert not tile_map.is_view(s.id)
    assert plan.liveness[0] == 16 * 16 * F32 + 8 * 16 * F32 + _received(graph, tile_map, 0)
    assert step_cycles(graph.equations[0], tile_map, small_target(4))[0] > 0


def _concat_graph():
    """a = neg(x), c = exp(y); v = concat(a, c) (a view); w = exp(z); out = -v + w."""
    b = Builder()
    x, y, z = (new_input(s, "float32") for s in ((8, 16), (4, 16), (12, 16)))
    a, c = b.emit("neg", [x]), b.emit("exp", [y])
    v = b.emit("concat", [a, c], axis=0)
    w = b.emit("exp", [z])
    out = b.emit("add", [b.emit("neg", [v]), w])
    return b.graph([x, y, z], [out]), (a, c, v)


def test_a_concatenation_adds_no_bytes_and_keeps_its_operands_alive():
    graph, (a, c, v) = _concat_graph()
    plan, tile_map = _plan(graph)
    assert tile_map.roots(v.id) == (a.id, c.id)
    ranges = {vid: (first, last) for vid, first, last in live_ranges(graph, tile_map)}
    assert v.id not in ranges                      # no memory of its own
    steps = [e.op for e in graph.equations]
    # a and c live until the concatenation's reader (the last neg), past the exp between.
    reader = len(steps) - 2
    assert steps[reader] == "neg" and graph.equations[reader].inputs[0] is v
    assert ranges[a.id][1] == ranges[c.id][1] == reader > steps.index("concat") + 1
    # During the concatenation: z, a and c (x and y died at neg and exp), nothing new.
    assert plan.liveness[steps.index("concat")] == (12 + 8 + 4) * 16 * F32


def test_views_cost_no_cycles_and_move_nothing():
    graph, _ = _concat_graph()
    slice_graph, _, _ = _slice_graph()
    for g in (graph, slice_graph):
        tile_map = plan_tile_mapping(g, small_target(4))
        for eqn in g.equations:
            if get_op(eqn.op).view is not None:
                assert step_cycles(eqn, tile_map, small_target(4)) == [0, 0, 0, 0]
                assert not traffic.received_bytes(eqn, tile_map).any()


@pytest.mark.parametrize("tiles", (4, 7))
def test_readers_of_views_are_charged_what_strict_mode_measures(tiles):
    """Strict tile mode replays every reader with what each tile holds through the views'
    runs; for elementwise readers the charge is exact."""
    graph, _ = _concat_graph()
    exe = compile_graph(graph, small_target(tiles))
    inputs = [RNG.standard_normal(s).astype(np.float32) for s in ((8, 16), (4, 16), (12, 16))]
    plain = Engine(exe).run(inputs, [], None)
    engine = StrictEngine(exe)
    strict = engine.run(inputs, [], None)
    assert plain[0].tobytes() == strict[0].tobytes()
    np.testing.assert_array_equal(plain[0], -np.concatenate(
        [-inputs[0], np.exp(inputs[1])]) + np.exp(inputs[2]))
    report = engine.report()
    (view,) = [r for r in report if r.op == "concat"]
    assert view.rule == "view" and view.modelled == 0
    reader = report[-2]                             # the neg of the view
    assert reader.op == "neg" and reader.received > 0   # its elements live elsewhere
    assert reader.measured == reader.modelled


def _channel_views_graph():
    """Image batches joined on their channels, then channels sliced out of the join and
    of an operand (a view of a view, and views of many short runs), each read by a neg."""
    b = Builder()
    x, y = new_input((2, 3, 4, 5), "float32"), new_input((2, 3, 4, 3), "float32")
    join = b.emit("concat", [b.emit("exp", [x]), b.emit("exp", [y])], axis=3)
    middle = b.emit("strided_slice", [join], begin=(0, 1, 0, 3), sizes=(2, 2, 4, 4),
                    strides=(1, 1, 1, 1))
    first = b.emit("strided_slice", [x], begin=(1, 0, 0, 0), sizes=(1, 3, 4, 2),
                   strides=(1, 1, 1, 1))
    outs = [b.emit("neg", [v]) for v in (join, middle, first)]
    return b.graph([x, y], outs), (2, 3, 4, 5), (2, 3, 4, 3)


@pytest.mark.parametrize("tiles", (4, 7, 16))
def test_readers_of_views_of_many_runs_are_charged_what_strict_mode_measures(tiles):
    graph, *shapes = _channel_views_graph()
    exe = compile_graph(graph, small_target(tiles))
    inputs = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    engine = StrictEngine(exe)
    outs = engine.run(inputs, [], None)
    join = np.exp(np.concatenate(inputs, axis=3))
    for got, want in zip(outs, (join, join[:, 1:3, :, 3:7], inputs[0][1:2, ..., :2])):
        np.testing.assert_array_equal(got, -want)
    report = engine.report()
    assert [r.rule for r in report if r.op != "neg" and r.op != "exp"] == ["view"] * 3
    for reader in (r for r in report if r.op == "neg"):
        assert reader.measured == reader.modelled, engine.format_report()
    tile_map = plan_tile_mapping(graph, small_target(tiles))
    sizes = [v.type.size for v in graph.outputs]
    for eqn, size in zip((e for e in graph.equations if e.op == "neg"), sizes):
        held = tile_map.values[eqn.inputs[0].id].elements()
        assert held.sum() == size                   # every element on one tile


def test_saved_executables_keep_their_views(tmp_path):
    graph, _ = _concat_graph()
    exe = compile_graph(graph, small_target(4))
    assert any(block.tiles.views for block in exe.blocks)
    exe.save(tmp_path / "exe.zip")
    assert type(exe).load(tmp_path / "exe.zip").blocks[0].tiles == exe.blocks[0].tiles


def _assembled(groups, operands, size):
    """The flat output the view's groups of runs make of `operands` (arrays)."""
    out = np.full(size, np.nan, np.float32)
    covered = np.zeros(size, np.int64)
    for k, first, pitch, length, count, at, step in groups:
        for j in range(count):
            out[at + j * step:at + j * step + length] = operands[k].reshape(-1)[
                first + j * pitch:first + j * pitch + length]
            covered[at + j * step:at + j * step + length] += 1
    assert (covered == 1).all()                   # every element once
    return out


SLICES = [((6, 5, 4), (1, 2, 0), (3, 2, 4), (1, 1, 1)),
          ((6, 5, 4), (2, 1, 1), (1, 3, 2), (5, 1, 1)),
          ((6, 5, 4), (0, 0, 0), (6, 5, 4), (1, 1, 1)),
          ((6, 5, 4), (0, 0, 1), (6, 5, 2), (1, 1, 1)),       # channels of every pixel
          ((3, 4, 5, 6), (1, 0, 2, 0), (2, 4, 2, 6), (1, 1, 1, 1)),
          ((3, 4, 5, 6), (1, 1, 0, 3), (2, 2, 5, 2), (1, 1, 1, 1)),
          ((7,), (2,), (4,), (1,)),
          ((), (), (), ())]


@pytest.mark.parametrize("shape,begin,sizes,strides", SLICES)
def test_slice_groups_are_the_kernels_elements(shape, begin, sizes, strides):
    x = np.asarray(RNG.standard_normal(shape), np.float32)
    op = get_op("strided_slice")
    params = dict(begin=begin, sizes=sizes, strides=strides)
    (groups,) = op.view([TensorType(shape, "float32")], [TensorType(sizes, "float32")],
                        **params)
    want = op.kernel(x, **params).reshape(-1)
    np.testing.assert_array_equal(_assembled(groups, [x], want.size), want)


@pytest.mark.parametrize("axis", (0, 1, 2))
def test_concat_groups_are_the_kernels_elements(axis):
    shapes = [[3, 4, 5], [3, 4, 5], [3, 4, 5]]
    for s, extra in zip(shapes, (1, 2, 3)):
        s[axis] = extra
    xs = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    op = get_op("concat")
    out = op.kernel(*xs, axis=axis)
    (groups,) = op.view([TensorType(s, "float32") for s in shapes],
                        [TensorType(out.shape, "float32")], axis=axis)
    np.testing.assert_array_equal(_assembled(groups, xs, out.size), out.reshape(-1))


@pytest.mark.parametrize("axis", (0, 1, 2))
def test_split_groups_are_the_kernels_elements(axis):
    x = RNG.standard_normal((6, 5, 4)).astype(np.float32)
    sizes = {0: (1, 3, 2), 1: (2, 3), 2: (1, 1, 2)}[axis]
    op = get_op("split")
    parts = op.kernel(x, axis=axis, sizes=sizes)
    groups = op.view([TensorType(x.shape, "float32")],
                     [TensorType(p.shape, "float32") for p in parts], axis=axis, sizes=sizes)
    for part, part_groups in zip(parts, groups):
        np.testing.assert_array_equal(_assembled(part_groups, [x], part.size),
                                      part.reshape(-1))


def test_the_parts_of_a_split_add_no_bytes():
    """x[8, 16] split in two along rows, each part negated: no step holds a part's bytes."""
    b = Builder()
    x = new_input((8, 16), "float32")
    top, bottom = b.emit("split", [x], axis=0, sizes=(3, 5))
    graph = b.graph([x], [b.emit("neg", [top]), b.emit("neg", [bottom])])
    plan, tile_map = _plan(graph)
    assert tile_map.roots(top.id) == tile_map.roots(bottom.id) == (x.id,)
    # x stays alive until the second part's reader (the parts view it).
    assert plan.liveness == [8 * 16 * F32,
                             (8 * 16 + 3 * 16) * F32 + _received(graph, tile_map, 1),
                             (8 * 16 + 3 * 16 + 5 * 16) * F32 + _received(graph, tile_map, 2)]
    assert step_cycles(graph.equations[0], tile_map, small_target(4)) == [0, 0, 0, 0]
