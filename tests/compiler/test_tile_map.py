import numpy as np

from ipu_keras._src.compiler.passes.tile_map import GRAIN_BYTES, Mapping, plan_tile_mapping
from ipu_keras._src.ops.builder import Builder, new_input
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
