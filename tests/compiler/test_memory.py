import numpy as np
import pytest

from ipu_keras.compiler.passes.memory import check_memory, plan_memory
from ipu_keras.compiler.passes.tile_map import plan_tile_mapping
from ipu_keras.errors import OutOfTileMemoryError
from ipu_keras.ir import TensorType, VariableSpec
from ipu_keras.ops.builder import Builder, new_input
from tests.graphs import counting_loop, dense_step, small_target


def _plan(graph, target, code=False):
    tiles = plan_tile_mapping(graph, target)
    return plan_memory(graph, tiles, compile_ipu_code=code), tiles


def test_variables_and_constants_are_always_live():
    graph = dense_step()
    plan, _ = _plan(graph, small_target(4))
    assert plan.categories["variables"].sum() == 3 * 2 * 4
    assert plan.categories["constants"].sum() == 2 * 4 + 4
    assert plan.categories["code"].sum() == 0


def test_peak_counts_only_values_live_at_the_same_time():
    b = Builder()
    x = new_input((256,), "float32")  # 1 KiB
    a = b.emit("neg", [x])
    c = b.emit("neg", [a])  # a dies here
    d = b.emit("neg", [c])
    plan, _ = _plan(b.graph([x], [d]), small_target(1))
    # Each step holds its operand and its result; x and a die at their last use.
    assert plan.not_always_live.sum() == 2 * 1024
    assert plan.liveness == [2048, 2048, 2048]


def test_loop_bodies_add_their_peak_on_top_of_the_caller():
    graph, _ = counting_loop()
    plan, _ = _plan(graph, small_target(1))
    assert plan.not_always_live.sum() >= 3 * 8


def test_code_is_estimated_per_vertex_type_when_compiling_ipu_code():
    plan, _ = _plan(dense_step(), small_target(4), code=True)
    assert plan.categories["code"].sum() > 0


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
