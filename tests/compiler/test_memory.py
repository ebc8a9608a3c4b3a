import numpy as np
import pytest

from ipu_keras._src.compiler import compile_graph
from ipu_keras._src.compiler.passes.memory import (
    CATEGORIES, CODE_CATEGORIES, CONTROL_CODE_BYTES_PER_STEP, allow_out_of_memory,
    check_memory, plan_memory,
)
from ipu_keras._src.compiler.passes import traffic
from ipu_keras._src.compiler.passes.tile_map import plan_tile_mapping
from ipu_keras.errors import ConfigurationError, OutOfTileMemoryError
from ipu_keras._src.ir import TensorType, VariableSpec
from ipu_keras._src.ir.graph import Source
from ipu_keras._src.simulator import Engine
from ipu_keras._src.ops.builder import Builder, new_input
from tests.graphs import counting_loop, dense_step, small_target


pytestmark = pytest.mark.filterwarnings("ignore:The matmul planner found no plan")


def _plan(graph, target, code=False):
    tiles = plan_tile_mapping(graph, target)
    return plan_memory(graph, tiles, compile_ipu_code=code), tiles


def test_variables_and_constants_are_always_live():
    graph = dense_step()
    plan, _ = _plan(graph, small_target(4))
    assert plan.categories["variables"].sum() == 3 * 2 * 4
    assert plan.categories["constants"].sum() == 2 * 4 + 4
    for category in CODE_CATEGORIES:
        if category != "vertex_state":
            assert plan.categories[category].sum() == 0


def test_vertex_state_counts_whether_or_not_code_is_compiled():
    # Poplar's IPU Model without code still holds each vertex's state (memory.py's source:
    # the tut4 report with 0 B of code and 271 kB of vertexInstanceState).
    without, _ = _plan(dense_step(), small_target(4))
    with_code, _ = _plan(dense_step(), small_target(4), code=True)
    assert without.categories["vertex_state"].sum() > 0
    assert (without.categories["vertex_state"] == with_code.categories["vertex_state"]).all()
    assert with_code.always_live.sum() > without.always_live.sum()


def test_peak_counts_only_values_live_at_the_same_time():
    b = Builder()
    x = new_input((256,), "float32")  # 1 KiB
    a = b.emit("cast", [x], dtype="float16")
    c = b.emit("cast", [a], dtype="float32")  # a dies here
    d = b.emit("cast", [c], dtype="float16")
    plan, _ = _plan(b.graph([x], [d]), small_target(1))
    # Each step holds its operand and its result (of another type: none is written in
    # place); x and a die at their last use.
    assert plan.not_always_live.sum() == 1024 + 512
    assert plan.liveness == [1536, 1536, 1536]


def test_an_elementwise_step_writes_in_place_of_an_operand_it_reads_last():
    """As IPU TensorFlow's InplaceFinder (a program's input is a buffer of its own too):
    not into an operand read later, nor one of another type or layout."""
    b = Builder()
    x = new_input((256,), "float32")                  # 1 KiB
    a = b.emit("exp", [x])                            # x dies here: in place
    c = b.emit("mul", [a, a])                         # a dies here: in place
    d = b.emit("neg", [c])                            # c dies here: in place
    e = b.emit("add", [d, b.emit("neg", [d])])        # neg's d is read later: new buffer
    f = b.emit("cast", [e], dtype="float16")          # another type: a new buffer
    plan, _ = _plan(b.graph([x], [f]), small_target(1))
    assert plan.liveness == [1024, 1024, 1024, 2048, 2048, 1024 + 512]


def test_loop_bodies_add_their_peak_on_top_of_the_caller():
    graph, _ = counting_loop()
    plan, _ = _plan(graph, small_target(1))
    assert plan.not_always_live.sum() >= 3 * 8


def _call_of_exp(after):
    """y = call(exp)(x), then `after(b, x, y)`: the output of the program. x is 1 KiB."""
    fb = Builder()
    fx = new_input((256,), "float32")
    fn = fb.graph([fx], [fb.emit("cast", [fb.emit("exp", [fx])], dtype="float16")])
    b = Builder()
    x = new_input((256,), "float32")
    y = b.emit("call", [x], fn=fn)
    return _plan(b.graph([x], [after(b, x, y)]), small_target(1))[0]


def test_a_call_copies_its_operands_in_and_those_it_reads_last_die_once_copied():
    # The body holds its own copy of x (1 KiB), exp's result written in place of it and
    # the cast's half result (512 B): a peak of 1.5 KiB. Read last by the call, x dies
    # once copied in: the peak is the copy-in, x beside its copy. Read again after the
    # call, x stays live through the body too.
    dying = _call_of_exp(lambda b, x, y: y)
    kept = _call_of_exp(lambda b, x, y: b.emit("add", [b.emit("cast", [y], dtype="float32"), x]))
    assert dying.liveness[0] == max(1024 + 1024, 1024 + 512, 512 + 512)
    assert kept.liveness[0] == max(1024 + 1024, 1024 + 1024 + 512, 1024 + 512 + 512)


def test_code_is_estimated_per_vertex_type_when_compiling_ipu_code():
    plan, _ = _plan(dense_step(), small_target(4), code=True)
    for category in CODE_CATEGORIES:
        assert plan.categories[category].sum() > 0, category


def test_out_of_memory_names_the_tile_and_uses_the_real_wording():
    b = Builder()
    x = new_input((64, 1024), "float32")  # 256 KiB spread over 4 tiles
    w = b.emit("read_var", [], var=0, type=TensorType((1024, 1024), "float32"))  # 4 MiB
    y = b.emit("matmul", [x, w])
    graph = b.graph([x], [y], variables=[VariableSpec("w", TensorType((1024, 1024), "float32"))])
    target = small_target(4, "ipu1")
    plan, tiles = _plan(graph, target)
    with pytest.raises(OutOfTileMemoryError) as info:
        check_memory(plan, graph, tiles, target)
    err = info.value
    assert err.bytes_available == 262144 and err.bytes_used > 262144
    assert str(err).startswith(
        f"Out of memory on tile {err.tile}: {err.bytes_used} bytes used but tiles only have "
        "262144 bytes of memory")
    assert "matmul" in str(err) and "sharding" in str(err)
    bigger = small_target(1472)
    plan, tiles = _plan(graph, bigger)
    check_memory(plan, graph, tiles, bigger)
    assert np.max(plan.total) < bigger.bytes_per_tile


def test_summary_has_per_tile_categories_that_add_up():
    target = small_target(4)
    exe = compile_graph(dense_step(), target)
    memory = exe.memory
    per_tile = memory["tile_categories"]
    assert set(per_tile) == set(CATEGORIES)
    assert all(len(v) == target.num_tiles for v in per_tile.values())
    totals = np.sum([per_tile[c] for c in CATEGORIES], axis=0)
    assert totals.tolist() == memory["tile_memory"]
    assert memory["always_live"][0] + memory["not_always_live"][0] == memory["tile_memory"][0]
    assert memory["out_of_memory"] is None and memory["tiles_out_of_memory"] == []


def test_stream_buffers_and_control_code_by_hand():
    graph, _ = counting_loop()
    plan, _ = _plan(graph, small_target(1), code=True)
    # One float32[2] element of the infeed and one of the outfeed.
    assert plan.categories["stream_buffers"].sum() == 8 + 8
    # Program steps that are not constants or control flow: less, infeed, mul, add, outfeed,
    # add; the control code of each is on every tile.
    assert plan.categories["control_code"].tolist() == [6 * CONTROL_CODE_BYTES_PER_STEP]


def _matmul_of_input(rows, after=None):
    """y = x[rows, 64] @ ones[64, 16] (float32), then `after(b, x, y)` (default: y)."""
    b = Builder()
    x = new_input((rows, 64), "float32")
    y = b.emit("matmul", [x, b.const(np.ones((64, 16), np.float32))])
    plan, tiles = _plan(b.graph([x], [after(b, x, y) if after else y]), small_target(1))
    return plan, tiles.plans[y.id].temp_bytes


def test_a_matmul_is_a_cached_function_that_copies_its_operands_in():
    # IPU TensorFlow runs every dot as a cached Poplar function (memory.py's docstring):
    # each call copies both operands into the function's inputs. Step 0 defines the
    # (always-live) constant; x, read last by the matmul, dies once copied: the body
    # holds the two copies, y and the plan's temporaries (operand blocks; float
    # partials are the output itself).
    x_bytes, w_bytes, y_bytes = 16 * 64 * 4, 64 * 16 * 4, 16 * 16 * 4
    plan, temp = _matmul_of_input(16)
    assert temp == x_bytes + w_bytes
    assert plan.liveness == [x_bytes, x_bytes + w_bytes + y_bytes + temp]
    # Read again after the matmul, x stays live beside its copy.
    kept, _ = _matmul_of_input(16, lambda b, x, y: b.emit("concat", [x, y], axis=1))
    assert kept.liveness[1] == x_bytes + x_bytes + w_bytes + y_bytes + temp


def test_a_dot_by_a_vector_is_not_a_function():
    # One row: IPU TensorFlow's algebraic simplifier makes the dot a multiply and a
    # reduce (ops/nn.py, `_matmul_is_function`): no call, no copies.
    x_bytes, y_bytes = 64 * 4, 16 * 4
    plan, temp = _matmul_of_input(1)
    assert plan.liveness == [x_bytes, x_bytes + y_bytes + temp]


def test_a_batch_norm_is_a_function_whose_output_is_never_in_place():
    b = Builder()
    x = new_input((8, 4), "float32")
    ones, zeros = (b.const(np.full(4, v, np.float32)) for v in (1, 0))
    y = b.emit("batch_norm", [x, ones, zeros, zeros, ones], epsilon=1e-3, training=False)
    graph = b.graph([x], [y[0]])
    plan, tiles = _plan(graph, small_target(1))
    received = traffic.received_bytes(graph.equations[-1], tiles).sum()
    # x dies once copied in; the body holds the copies of x and of the four vectors, and
    # the five outputs (y [8, 4] and four per-channel vectors): y is not written over x,
    # as an elementwise step's result would be; and what the step receives.
    x_and_vectors = 8 * 4 * 4 + 4 * 4 * 4
    assert plan.liveness[-1] == 2 * x_and_vectors + received


def test_views_share_their_source_memory():
    b = Builder()
    x = new_input((256,), "float32")
    y = b.emit("cast", [b.emit("reshape", [x], shape=(16, 16))], dtype="float16")
    plan, tiles = _plan(b.graph([x], [y]), small_target(1))
    assert plan.liveness == [1024, 1024 + 512]  # the reshape holds nothing of its own


def test_exchanged_operands_are_temporaries_of_their_step():
    b = Builder()
    x, z = new_input((64,), "float32"), new_input((64,), "float32")
    y = b.emit("add", [x, z])
    target = small_target(8)
    plan, tiles = _plan(b.graph([x, z], [y]), target)
    received = (tiles.values[y.id].elements(64, 8) * 4).sum()  # z is elsewhere
    assert tiles.values[y.id] == tiles.values[x.id] != tiles.values[z.id]
    assert plan.liveness == [2 * 256 + received]   # y is written in place of x


def test_allow_out_of_memory_defers_the_error_to_run_time(monkeypatch):
    graph = _too_big()
    target = small_target(4, "ipu1")
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", '{"debug.allowOutOfMemory": "true"}')
    exe = compile_graph(graph, target)
    oom = exe.memory["out_of_memory"]
    assert oom["bytes_available"] == 262144 and oom["tile"] in exe.memory["tiles_out_of_memory"]
    engine = Engine(exe)
    with pytest.raises(OutOfTileMemoryError, match="Out of memory on tile"):
        engine.run([np.zeros((64, 1024), np.float32)], [np.zeros((1024, 1024), np.float32)],
                   None)
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", "{}")
    with pytest.raises(OutOfTileMemoryError):
        compile_graph(graph, target)
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", "not json")
    with pytest.raises(ConfigurationError, match="Received: POPLAR_ENGINE_OPTIONS="):
        compile_graph(graph, target)


def test_the_ipu_model_lists_the_tiles_out_of_memory_and_runs_the_program(monkeypatch):
    graph, target = _too_big(), small_target(4, "ipu1")
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--use_ipu_model")
    exe = compile_graph(graph, target)
    assert exe.memory["out_of_memory"] is None
    assert exe.memory["max_tile_bytes"] > target.bytes_per_tile
    assert exe.memory["max_tile"] in exe.memory["tiles_out_of_memory"]
    x, w = np.ones((64, 1024), np.float32), np.full((1024, 1024), 0.5, np.float32)
    np.testing.assert_array_equal(Engine(exe).run([x], [w], None)[0], x @ w)
    with pytest.raises(OutOfTileMemoryError):
        compile_graph(graph, target, ipu_model=False)


def test_engine_options_parsing():
    assert allow_out_of_memory({}) is False
    assert allow_out_of_memory({"POPLAR_ENGINE_OPTIONS": '{"debug.allowOutOfMemory": true}'})
    assert not allow_out_of_memory({"POPLAR_ENGINE_OPTIONS": '{"autoReport.all": "true"}'})


def test_out_of_memory_names_the_keras_layer():
    b = Builder(Source("model/dense_1/MatMul", "dense_1"))
    x = new_input((64, 1024), "float32")
    w = b.emit("read_var", [], var=0, type=TensorType((1024, 1024), "float32"))
    y = b.emit("matmul", [x, w])
    graph = b.graph([x], [y], variables=[VariableSpec("w", TensorType((1024, 1024), "float32"))])
    with pytest.raises(OutOfTileMemoryError, match="layer 'dense_1'"):
        compile_graph(graph, small_target(4, "ipu1"))


def _too_big():
    b = Builder()
    x = new_input((64, 1024), "float32")
    w = b.emit("read_var", [], var=0, type=TensorType((1024, 1024), "float32"))
    y = b.emit("matmul", [x, w])
    return b.graph([x], [y], variables=[VariableSpec("w", TensorType((1024, 1024), "float32"))])
