import numpy as np

from ipu_keras._src.compiler.passes.tile_map import GRAIN_BYTES, Mapping, plan_tile_mapping
from ipu_keras._src.ops.builder import Builder, new_input
from ipu_keras._src.device.targets import get_target
from ipu_keras._src.ir import TensorType, VariableSpec
from tests.graphs import dense_step, small_target


def test_mapping_elements_cover_the_value_and_wrap_around():
    counts = Mapping(start=14, tiles=4, per_tile=10).elements(35, 16)
    assert counts.sum() == 35
    assert counts[14] == counts[15] == counts[0] == 10 and counts[1] == 5


def test_linear_mapping_respects_the_grain_and_spreads_starts():
    b = Builder()
    x = new_input((8,), "float32")
    big = new_input((64, 64), "float32")
    graph = b.graph([x, big], [x, big])
    tiles = plan_tile_mapping(graph, small_target(16))
    small, large = tiles.values[x.id], tiles.values[big.id]
    assert small.tiles == 1 and small.per_tile == 8  # 32 bytes < one grain
    assert large.tiles == 16 and large.per_tile == 64 * 64 // 16
    assert large.start == (small.start + 1) % 16
    assert GRAIN_BYTES // 4 <= large.per_tile


def test_elementwise_ops_keep_their_operands_mapping():
    b = Builder()
    x = new_input((32, 32), "float32")
    y = b.emit("relu", [b.emit("neg", [x])])
    tiles = plan_tile_mapping(b.graph([x], [y]), small_target(16))
    assert tiles.values[y.id] == tiles.values[x.id]


def test_variable_reads_alias_the_variable_mapping():
    graph = dense_step()
    tiles = plan_tile_mapping(graph, small_target(16))
    read = next(e for e in graph.equations if e.op == "read_var")
    assert tiles.values[read.outputs[0].id] == tiles.variables[0]
    assert np.sum(tiles.variables[0].elements(6, 16)) == 6


def test_a_variable_takes_the_layout_of_the_product_that_updates_it():
    """w -= 0.1 * (x^T @ y): the weight lives where its gradient is computed (IPU TF lays
    it out for its product and poplin's weight update writes that layout), so the update
    receives nothing; the read feeding the forward product shares the new layout."""
    from ipu_keras._src.compiler.passes import traffic

    b = Builder()
    x = new_input((64, 512), "float32", "x")
    read = b.emit("read_var", [], var=0, type=TensorType((512, 256), "float32"))
    y = b.emit("relu", [b.emit("matmul", [x, read])])
    grad = b.emit("matmul", [x, y], transpose_a=True)
    b.emit("write_var", [b.emit("mul", [grad, b.const(np.float32(0.1))])], var=0, mode="sub")
    graph = b.graph([x], [y], variables=[VariableSpec("w", TensorType((512, 256), "float32"))])
    tiles = plan_tile_mapping(graph, get_target("ipu2"))
    assert tiles.variables[0] == tiles.values[grad.id] == tiles.values[read.id]
    write = graph.equations[-1]
    assert write.op == "write_var" and traffic.received_bytes(write, tiles).sum() == 0
