"""The matmul/conv/gather planner: choices under availableMemoryProportion and partialsType."""
import dataclasses
import math

import numpy as np
import pytest

from ipu_keras._src.compiler import compile_graph
from ipu_keras._src.compiler.passes import memory, plan_blocks, planner
from ipu_keras._src.compiler.passes.planner import PlanOptions, Problem, choose_plan, problem_of
from ipu_keras._src.compiler.passes.tile_map import plan_tile_mapping
from ipu_keras.errors import ConfigurationError
from ipu_keras._src.ir import TensorType, VariableSpec
from ipu_keras._src.ops.builder import Builder, new_input
from ipu_keras._src.ops.registry import get_op
from ipu_keras._src.device import cost
from ipu_keras._src.device.targets import get_target
from tests.graphs import small_target

BIG = Problem(1, 1024, 1024, 1024, "float32", 4)


def test_big_matmul_on_ipu2_picks_a_multi_tile_plan_that_fits():
    target = get_target("ipu2")
    plan = choose_plan(BIG, PlanOptions(), target)
    assert plan.tiles > target.tiles_per_ipu // 2 and plan.fits
    assert plan.temp_bytes <= 0.6 * target.bytes_per_tile
    # Never faster than the AMP doing all MACs on every tile at once.
    ideal = BIG.macs / (target.tiles_per_ipu * target.amp_macs("float32"))
    assert ideal < plan.compute < 4 * ideal


def test_lower_proportion_gives_less_temporary_memory_and_no_fewer_cycles():
    target = get_target("ipu2")
    plans = [choose_plan(BIG, PlanOptions(p), target) for p in (0.6, 0.1, 0.05)]
    for looser, tighter in zip(plans, plans[1:]):
        assert tighter.temp_bytes <= looser.temp_bytes
        assert tighter.cycles >= looser.cycles
    assert plans[-1].temp_bytes < plans[0].temp_bytes
    assert plans[-1].temp_bytes <= 0.05 * target.bytes_per_tile


def test_one_tile_plan_by_hand_and_half_partials_halve_temporaries():
    target = small_target(1)
    problem = Problem(1, 64, 64, 64, "float16", 2)
    full = choose_plan(problem, PlanOptions(partials_type="float"), target)
    half = choose_plan(problem, PlanOptions(partials_type="half"), target)
    operands = 2 * 64 * 64 * 2  # both operands copied onto the tile, float16
    assert full.splits == half.splits == (64 * 64, 1, 1)  # one chunk, no k split
    assert full.temp_bytes == operands + 64 * 64 * 4  # float partials, cast afterwards
    assert half.temp_bytes == operands  # half partials are the output itself
    # poplin's AMP vertex: 64 output positions x 64 channels, depth 64, run in passes of
    # 16 input x 16 output channels, each loading its weights and filling the workers'
    # pipeline (the first 3 positions per worker cost AMP_WORKER_OVERHEAD).
    in_group = cost.AMP_IN_GROUP["float16"]                                       # 16
    out_group = target.amp_macs("float16") * cost.AMP_PASS_CYCLES["float16"] // in_group
    passes = (64 // in_group) * (64 // out_group)                                 # 16
    weights = in_group * out_group * 2 // cost.AMP_COEFF_LOAD_BYTES_PER_CYCLE     # 32
    workers = target.workers_per_tile
    per_worker = math.ceil(64 / workers)                                          # 11
    worker = cost.AMP_WORKER_OVERHEAD + (per_worker - 3) * cost.AMP_PASS_CYCLES["float16"]
    amp = (cost.AMP_SUPERVISOR_CYCLES + cost.AMP_GROUP_CYCLES
           + passes * (cost.AMP_PASS_OVERHEAD_CYCLES + weights + workers * worker))
    # The vector path (one MAC per lane per instruction, 4 float16 lanes) is far dearer.
    vector = cost.VERTEX_OVERHEAD_CYCLES + workers * math.ceil(
        math.ceil(64 ** 3 / workers) / 4)
    assert amp < vector
    assert full.compute == amp == 8488
    assert full.exchange == cost.EXCHANGE_LATENCY_CYCLES + operands // 4
    assert full.cycles == full.compute + full.exchange + target.internal_sync_cycles
    big16 = Problem(1, 1024, 1024, 1024, "float16", 2)
    ipu2 = get_target("ipu2")
    assert (choose_plan(big16, PlanOptions(partials_type="half"), ipu2).temp_bytes
            < choose_plan(big16, PlanOptions(partials_type="float"), ipu2).temp_bytes)


def test_k_split_pays_a_reduction_superstep():
    target = small_target(2)
    problem = Problem(1, 1, 4096, 1, "float32", 4)  # a dot product: only k can be split
    plan = choose_plan(problem, PlanOptions(), target)
    assert plan.splits[1] == 2 and plan.supersteps == 2
    assert plan.vertex_types == ("ConvPartial1x1Out", "ReduceAdd")


def test_impossible_proportion_doubles_the_bound_as_poplin_does_with_a_warning():
    target = get_target("ipu2")
    with pytest.warns(UserWarning, match="no plan whose temporary memory fits.*the fastest "
                      r"plan within \d+ bytes per tile, the bound doubled"):
        plan = choose_plan(BIG, PlanOptions(0.001), target, where="dense_1")
    assert not plan.fits
    _, temp, *_, cycles, _ = planner._evaluate(
        BIG, PlanOptions(0.001), target, target.tiles_per_ipu)
    bounds = planner.memory_bounds(0.001, target.bytes_per_tile)
    bound = next(b for b in bounds if (temp <= b).any())
    assert bound > bounds[0] and plan.temp_bytes <= bound
    assert plan.cycles == cycles[temp <= bound].min()
    # More memory bought fewer cycles than the least-memory plan.
    assert plan.cycles < cycles[temp == temp.min()].min()


def test_with_no_plan_within_twice_a_tile_the_fastest_plan_is_taken():
    one_tile = small_target(1)
    huge = Problem(1, 512, 512, 512, "float32", 4, rearranged=("a", "b", "out"))
    with pytest.warns(UserWarning, match="the fastest plan, none fitting twice a tile"):
        plan = choose_plan(huge, PlanOptions(), one_tile)
    _, temp, *_, cycles, _ = planner._evaluate(huge, PlanOptions(), one_tile, 1)
    assert temp.min() > planner.memory_bounds(0.6, one_tile.bytes_per_tile)[-1]
    assert plan.cycles == cycles.min()


def test_poplins_memory_bounds_double_past_twice_a_tile():
    assert planner.memory_bounds(0.6, 1000) == [600, 1200, 2400]
    assert planner.memory_bounds(0.25, 1000) == [250, 500, 1000, 2000]
    assert planner.memory_bounds(1.0, 1000) == [1000, 2000]


def test_poplar_options_are_parsed_from_strings_and_checked():
    options = PlanOptions.from_poplar_options(
        {"availableMemoryProportion": "0.3", "partialsType": "HALF", "other": "x"})
    assert options == PlanOptions(0.3, "half")
    assert PlanOptions.from_poplar_options({}) == PlanOptions(0.6, "float")
    with pytest.raises(ConfigurationError, match="Received: availableMemoryProportion='2'"):
        PlanOptions.from_poplar_options({"availableMemoryProportion": "2"})
    with pytest.raises(ConfigurationError, match="partialsType"):
        PlanOptions.from_poplar_options({"partialsType": "double"})


def _matmul_graph(m=256, k=512, n=256):
    b = Builder()
    x = new_input((m, k), "float32")
    w = b.emit("read_var", [], var=0, type=TensorType((k, n), "float32"))
    y = b.emit("matmul", [x, w])
    return b.graph([x], [y], variables=[VariableSpec("w", TensorType((k, n), "float32"))])


def test_compile_uses_matmul_options_and_reports_the_plans():
    target = get_target("ipu2")
    loose = compile_graph(_matmul_graph(), target)
    tight = compile_graph(_matmul_graph(), target,
                          matmul_options={"availableMemoryProportion": "0.002"},
                          conv_options={"availableMemoryProportion": "0.9"})
    (a,), (b,) = loose.info["plans"], tight.info["plans"]
    assert a["op"] == "matmul" and b["temp_bytes"] < a["temp_bytes"]
    assert b["cycles"] >= a["cycles"]


def _conv(op, ins, **params):
    b = Builder()
    values = [new_input(shape, "float32") for shape in ins]
    return b.emit(op, values, **params), b.equations[-1]


def test_conv_problems_count_the_registered_macs():
    common = dict(strides=(1, 1), dilations=(1, 1), padding=((1, 1), (1, 1)))
    cases = [
        ("conv", [(2, 8, 8, 6), (3, 3, 3, 4)], {}),  # 2 groups
        ("conv_input_grad", [(3, 3, 3, 4), (2, 8, 8, 4)], {"input_shape": (2, 8, 8, 6)}),
        ("conv_filter_grad", [(2, 8, 8, 6), (2, 8, 8, 4)], {"filter_shape": (3, 3, 3, 4)}),
    ]
    for op, ins, extra in cases:
        _, eqn = _conv(op, ins, **common, **extra)
        work = get_op(op).cost([v.type for v in eqn.inputs], [v.type for v in eqn.outputs],
                               **eqn.params)
        assert problem_of(eqn).macs == work.amount, op


def test_convolutions_use_the_convolution_options():
    b = Builder()
    x = new_input((4, 16, 16, 32), "float32")
    w = b.const(np.ones((3, 3, 32, 64), np.float32))
    y = b.emit("conv", [x, w], strides=(1, 1), dilations=(1, 1), padding=((1, 1), (1, 1)))
    graph = b.graph([x], [y])
    target = get_target("ipu2")
    tiles = plan_tile_mapping(graph, target, PlanOptions(0.001), PlanOptions(0.6))
    plan = tiles.plans[y.id]
    assert plan.kind == "conv" and plan.fits and plan.tiles > 1


def test_embedding_gather_is_planned_next_to_its_table():
    b = Builder()
    ids = new_input((32,), "int32")
    table = b.emit("read_var", [], var=0, type=TensorType((1000, 64), "float32"))
    rows = b.emit("gather", [table, ids], axis=0, batch_dims=0)
    spec = VariableSpec("embeddings", TensorType((1000, 64), "float32"))
    graph = b.graph([ids], [rows], variables=[spec])
    target = small_target(16)
    tiles = plan_tile_mapping(graph, target)
    plan = tiles.plans[rows.id]
    assert plan.kind == "gather" and plan.start == tiles.variables[0].start
    assert plan.tiles == tiles.variables[0].tiles and plan.supersteps == 2
    out_per_tile = tiles.values[rows.id].per_tile
    assert plan.receive_bytes == 32 * 4 + out_per_tile * 4  # indices + the rows it gets


def test_a_large_product_takes_2d_blocks_cheaper_than_any_flat_chunk():
    """Poplar tutorial 4's first product (900x600 @ 600x300 float) on a Mk2: a flat chunk
    of a few whole rows needs every column of B for its depth slice and splits k many
    ways; a 2-d block of the output needs only its rows of A and columns of B, and its
    AMP passes see a longer field. The planner keeps the cheaper, and it is a block."""
    target = get_target("ipu2")
    problem = Problem(1, 900, 600, 300, "float32", 4)
    plan = choose_plan(problem, PlanOptions(), target)
    rows, cols = plan.block
    assert 1 < rows < 900 and 1 < cols < 300
    c, temp, receive, _, _, _, cycles, _ = planner._evaluate(
        problem, PlanOptions(), target, target.tiles_per_ipu)
    fits = temp <= 0.6 * target.bytes_per_tile
    flat = c.aligned & fits
    assert plan.cycles < cycles[flat].min()
    assert plan.receive_bytes < receive[flat][np.argmin(cycles[flat])]
    # The product's elements are shared out linearly over the plan's tiles (each owner
    # gathers its elements' partials), so the output mapping stays one range per tile.
    assert plan.per_tile == math.ceil(900 * 300 / plan.tiles)
    # The block's tiles together cover the output once per slice of k.
    across, down = -(-300 // cols), -(-900 // rows)
    assert plan.tiles == across * down * plan.k_split


def test_weight_update_convolutions_pay_poplins_rearrangements():
    """poplin copies a weight-update convolution's input, output gradients and result into
    and out of its plan's layout (`addTransformCycleEstimate`): each tile copies its share
    at 4 bytes a cycle for float, x 5 / 4, and receives it over the exchange, in one
    superstep before the products and one after."""
    common = dict(strides=(1, 1), dilations=(1, 1), padding=((0, 0), (0, 0)))
    _, eqn = _conv("conv_filter_grad", [(8, 13, 13, 32), (8, 11, 11, 64)],
                   filter_shape=(3, 3, 32, 64), **common)
    # (allocated: no copy for being broadcast, `test_an_operand_broadcast_...`)
    problem = dataclasses.replace(problem_of(eqn), allocated=("a", "b"))
    assert problem.rearranged == ("a", "b", "out")
    plain = dataclasses.replace(problem, rearranged=())
    target = get_target("ipu2")
    c, _, receive, compute, exchange, steps, cycles, _ = planner._evaluate(
        problem, PlanOptions(), target, target.tiles_per_ipu)
    _, _, receive0, compute0, exchange0, steps0, cycles0, _ = planner._evaluate(
        plain, PlanOptions(), target, target.tiles_per_ipu)
    i = int(np.argmin(cycles))
    used = int(c.used[i])
    before = math.ceil(8 * 13 * 13 * 32 * 4 / used) + math.ceil(8 * 11 * 11 * 64 * 4 / used)
    after = math.ceil(3 * 3 * 32 * 64 * 4 / used)
    copy = sum(cost.VERTEX_OVERHEAD_CYCLES + math.ceil(b * 5 / (4 * 4)) for b in (before, after))
    moved = sum(cost.exchange_cycles(b, target) for b in (before, after))
    assert compute[i] - compute0[i] == copy
    assert exchange[i] - exchange0[i] == moved
    assert steps[i] - steps0[i] == 2
    assert receive[i] - receive0[i] == before + after
    assert cycles[i] - cycles0[i] == copy + moved + 2 * target.internal_sync_cycles
    _, forward = _conv("conv", [(8, 13, 13, 32), (3, 3, 32, 64)], **common)
    assert problem_of(forward).rearranged == ()


def test_an_operand_broadcast_to_more_than_7_tiles_is_copied_once_unless_allocated():
    """poplin copies an operand into the plan's layout before broadcasting it to more than
    7 tiles (`inViewMaxBroadcastDests`), A to each block of output columns and B to each
    block of rows, unless it was created in that layout (a variable or input, which IPU
    TensorFlow's allocation finder lays out for the product)."""
    problem = Problem(1, 900, 600, 300, "float32", 4)
    target = get_target("ipu2")
    c = plan_blocks.candidates(problem, target.tiles_per_ipu,
                               planner.k_grains(problem, PlanOptions(), target))
    copied = planner._copied(problem, c)
    np.testing.assert_array_equal(copied["a"], -(-300 // np.minimum(c.cols, 300)) > 7)
    np.testing.assert_array_equal(copied["b"], -(-900 // np.minimum(c.rows, 900)) > 7)
    assert copied["a"].any() and copied["b"].any() and not copied["out"].any()
    assert not (copied["a"] & copied["b"]).all()
    allocated = dataclasses.replace(problem, allocated=("a", "b"))
    assert not any(m.any() for m in planner._copied(allocated, c).values())
    _, temp, receive, compute, exchange, steps, cycles, _ = planner._evaluate(
        problem, PlanOptions(), target, target.tiles_per_ipu)
    _, temp0, receive0, compute0, exchange0, steps0, cycles0, _ = planner._evaluate(
        allocated, PlanOptions(), target, target.tiles_per_ipu)
    moved = (np.where(copied["a"], -(-900 * 600 * 4 // c.used), 0)
             + np.where(copied["b"], -(-600 * 300 * 4 // c.used), 0))
    np.testing.assert_array_equal(receive - receive0, moved)
    np.testing.assert_array_equal(temp - temp0, moved)
    np.testing.assert_array_equal(steps - steps0, moved > 0)
    assert ((cycles > cycles0) == (moved > 0)).all()


def test_the_tile_map_marks_inputs_and_constants_allocated():
    """A product reading a graph input and a constant copies neither into its layout; the
    same product reading a computed value (relu's) pays the copy of what it broadcasts
    (the weights: the forward product is planned swapped, `planner.orient_matmul`, and
    sends them to each of its 29 blocks of rows)."""
    def plan(computed):
        b = Builder()
        x = new_input((900, 600), "float32")
        w = b.const(np.ones((600, 300), np.float32))
        y = b.emit("matmul", [x, b.emit("relu", [w]) if computed else w])
        return plan_tile_mapping(b.graph([x], [y]), get_target("ipu2")).plans[y.id]

    direct, computed = plan(False), plan(True)
    # The computed operand's plan pays the copy, or takes a plan that broadcasts it to at
    # most 7 blocks, slower than the direct product's best.
    assert computed.cycles > direct.cycles
    assert (computed.block != direct.block
            or computed.receive_bytes > direct.receive_bytes)


def test_a_k_split_wider_than_the_output_holds_no_padded_partials():
    """[2, 50176] @ [50176, 32]: the best plans split k far more ways than the 64
    outputs; a tile then holds partials of its slice of those 64 outputs, never of
    padding past them (a chunk of 784 "elements" once gave every tile 3 KB of them)."""
    problem = Problem(1, 2, 50176, 32, "float32", 4)
    target = get_target("ipu2")
    c = plan_blocks.candidates(problem, target.tiles_per_ipu)
    assert c.chunk.max() <= 64 and (c.owned * c.k >= c.chunk)[c.aligned].all()
    plan = choose_plan(problem, PlanOptions(), target)
    depth = math.ceil(50176 / plan.k_split)
    operands = (2 + 32) * depth * 4
    assert plan.k_split > 64 and plan.temp_bytes <= operands + 64 * 4


def test_an_outer_product_writes_its_output_with_no_partials_of_its_own():
    """The weight gradient of a batch-1 float16 dense layer, [50176, 1] @ [1, 32]: k = 1,
    nothing to accumulate, so (as poplin's OuterProduct vertex) it writes float16 into
    the output: no float partials, whatever partialsType says. k = 2 keeps them."""
    target = get_target("ipu2")
    outer = Problem(1, 50176, 1, 32, "float16", 2)
    plans = [choose_plan(outer, PlanOptions(partials_type=p), target) for p in ("float", "half")]
    assert plans[0] == plans[1]
    plan = plans[0]
    assert plan.partial_bytes == 2 and plan.k_split == 1 and not plan.block
    # Its x rows and dy's row only: not even a half buffer of its chunk of outputs.
    rows = math.ceil(plan.per_tile / 32)
    assert (rows + 32) * 2 <= plan.temp_bytes < plan.per_tile * 2
    deeper = Problem(1, 50176, 2, 32, "float16", 2)
    plan = choose_plan(deeper, PlanOptions(), target)
    assert plan.partial_bytes == 4
    assert plan.temp_bytes >= plan.per_tile * 4       # float partials of its chunk
    assert planner.partial_bytes(Problem(1, 64, 1, 64, "float32", 4), PlanOptions()) == 4


def test_only_the_tiles_that_own_output_are_charged_the_partials_they_receive():
    """[1, 50176] @ [50176, 32] float16 splits k far more ways than its 32 outputs: the
    tiles owning an output receive its partials from the others; the rest receive none,
    so they hold only their operand slices and their own partials."""
    problem = Problem(1, 1, 50176, 32, "float16", 2)
    target = get_target("ipu2")
    plan = choose_plan(problem, PlanOptions(), target)
    assert plan.k_split > 32 and plan.per_tile == 1 and plan.owners == 32 < plan.tiles
    depth = math.ceil(50176 / plan.k_split)
    chunk = plan.splits[0]
    idle = (depth + depth * chunk) * 2 + chunk * 4      # x and w slices, float partials
    assert plan.idle_temp_bytes == idle
    assert plan.temp_bytes == max(idle, chunk * 4 + (plan.k_split - 1) * 4)
    temp = plan.tile_temp_bytes()
    assert temp.shape == (plan.tiles,) and (temp[:32] == plan.temp_bytes).all()
    assert (temp[32:] == idle).all() and idle < plan.temp_bytes
    gather = planner.plan_gather(4, 10, 8, TensorType((4, 2), "float32"), 2, "float32",
                                 target)
    assert list(gather.tile_temp_bytes()) == [gather.temp_bytes] * 4
    # The memory plan charges each tile its own share.
    b = Builder()
    x = new_input((1, 50176), "float16")
    w = b.emit("read_var", [], var=0, type=TensorType((50176, 32), "float16"))
    b.emit("matmul", [x, w])
    graph = b.graph([x], [b.equations[-1].outputs[0]],
                    variables=[VariableSpec("w", TensorType((50176, 32), "float16"))])
    tile_map = plan_tile_mapping(graph, target)
    step = memory._Liveness(tile_map).step_temporaries(graph.equations[-1])
    assert step.sum() == 32 * plan.temp_bytes + (plan.tiles - 32) * idle


def test_a_forward_matmul_takes_the_orientation_poplin_would():
    """poplin tries a matmul with its operands swapped first and charges the other
    orientation the rearrangement of its operands and output (`planner.orient_matmul`)."""
    target = get_target("ipu2")
    two_rows = Problem(1, 2, 50176, 32, "float16", 2, allocated=("a", "b"))
    turned = planner.orient_matmul(two_rows, PlanOptions(), target)
    assert (turned.m, turned.n, turned.allocated) == (32, 2, ("b", "a"))
    # The two rows become output channels padded to a whole group: more partials.
    assert (sum(choose_plan(turned, PlanOptions(), target).tile_temp_bytes())
            > sum(choose_plan(two_rows, PlanOptions(), target).tile_temp_bytes()))
    # A tie (a row and a column of the same sizes) goes to the swapped one.
    assert planner.orient_matmul(Problem(1, 1, 64, 1, "float32", 4), PlanOptions(),
                                 target).inputs == ("b", "a")
    # On 16 tiles, (1024 x 64) @ (64 x 64) swapped is slower than unswapped with the
    # rearrangements charged: it keeps its orientation.
    tall = Problem(1, 1024, 64, 64, "float16", 2)
    sixteen = small_target(16)
    assert planner.orient_matmul(tall, PlanOptions(), sixteen) is tall
    charged = choose_plan(dataclasses.replace(tall, rearranged=("a", "b", "out")),
                          PlanOptions(), sixteen)
    turned = choose_plan(planner.swapped(tall), PlanOptions(), sixteen)
    assert charged.fits and turned.fits and charged.cycles < turned.cycles


def test_backward_matmuls_keep_their_orientation():
    b = Builder()
    x, dy = new_input((2, 64), "float32"), new_input((2, 8), "float32")
    w = b.emit("read_var", [], var=0, type=TensorType((64, 8), "float32"))
    y = b.emit("matmul", [x, w])
    grad = b.emit("matmul", [x, dy], transpose_a=True)
    graph = b.graph([x, dy], [y, grad], variables=[VariableSpec("w", TensorType((64, 8),
                                                                                "float32"))])
    tile_map = plan_tile_mapping(graph, get_target("ipu2"))
    forward, backward = (tile_map.plan_of(e) for e in graph.equations[1:])
    assert forward is not None and backward is not None


@pytest.mark.parametrize("problem,grains", [
    # (256 x 256) @ (256 x 16) in half: 16 grains of the AMP's 16 input channels.
    (Problem(1, 256, 256, 16, "float16", 2), 16),
    # float: the AMP's input group is 8, so 600 channels make 75 grains.
    (Problem(1, 900, 600, 300, "float32", 4), 75),
    # A 3x3 convolution of 20 half channels: 2 grains in each of 3 kernel rows (the
    # innermost kernel dimension is never split).
    (Problem(1, 64, 180, 32, "float16", 2, kernel=(3, 3, 20)), 6),
])
def test_the_contraction_is_split_in_whole_grains_of_input_channels(problem, grains):
    """poplin splits a product's input channels only in whole grains of its vertex's
    input channel group, and a kernel only along its outer dimensions (poplibs
    ConvModel.cpp: `totalInChanSplit` at most `numInChanGrains`)."""
    target = get_target("ipu2")
    options = PlanOptions()
    assert planner.k_grains(problem, options, target) == grains
    assert plan_blocks.candidates(problem, target.tiles_per_ipu, grains).k.max() <= grains
    assert choose_plan(problem, options, target).k_split <= grains


def test_a_tiny_product_no_longer_splits_its_contraction_below_a_grain():
    """Ten 256-unit half layers at batch 16 (IPU TensorFlow's combined-weights test):
    the weight-shaped product once split its 256-deep contraction 46 ways, 5 or 6
    elements a tile, each tile's AMP pass padding them to 16."""
    target = get_target("ipu2")
    plan = choose_plan(Problem(1, 256, 256, 16, "float16", 2), PlanOptions(), target)
    assert 1 < plan.k_split <= 16 and math.ceil(256 / plan.k_split) % 16 == 0
