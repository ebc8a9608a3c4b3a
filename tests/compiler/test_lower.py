"""Lowering and the cycle tables it computes from the target's figures."""
import math

import numpy as np

from ipu_keras._src.compiler import compile_graph
from ipu_keras._src.ops.builder import Builder, new_input
from ipu_keras._src.device import cost
from tests.graphs import counting_loop, dense_step, small_target


def test_blocks_are_ordered_parent_first_with_constants_preset():
    graph, _ = counting_loop()
    exe = compile_graph(graph, small_target(4))
    kinds = [s.kind for s in exe.blocks[0].steps]
    assert kinds == ["while"]
    cond, body = exe.blocks[0].steps[0].blocks
    assert 0 < cond < len(exe.blocks) and 0 < body < len(exe.blocks)
    assert [s.kind for s in exe.blocks[body].steps] == ["infeed", "exec", "exec", "outfeed",
                                                        "exec"]
    assert exe.constants and all(isinstance(slot, int) for slot, _ in exe.constants)


def test_elementwise_cycles_follow_the_target_by_hand():
    b = Builder()
    x = new_input((1024,), "float32")
    y = b.emit("neg", [x])
    target = small_target(4)
    exe = compile_graph(b.graph([x], [y]), target, compile_ipu_code=False)
    # 1024 floats over 4 tiles: 256 per tile, 43 for each of the 6 workers (ceil); a
    # worker's loop handles one 2 x float32 vector per 3 worker cycles (op, loads and
    # store), a worker cycle being 6 tile cycles: 6 * 3 * ceil(43 / 2) = 396; the vertex's
    # launch is popops' 185 estimated cycles plus the 82 the hardware adds to it.
    per_worker = math.ceil(256 / target.workers_per_tile)
    expected = cost.VERTEX_OVERHEAD_CYCLES + target.workers_per_tile * math.ceil(
        per_worker / target.vector_flops_per_cycle) * cost.ELEMENTWISE_LOOP_CYCLES
    assert expected == 185 + 82 + 396
    # The argument and the result (4096 bytes each) cross the host link, a sync each way.
    host = cost.host_io_cycles(4096, target) + cost.host_io_cycles(4096, target, out=True)
    assert exe.blocks[0].cycles == {
        "compute": expected, "exchange": 0,
        "sync": target.internal_sync_cycles + 2 * target.external_sync_cycles,
        "host_io": host}


def test_matmul_cycles_use_the_amp_vertex_and_pay_an_exchange():
    b = Builder()
    x = new_input((16, 64), "float32")
    w = b.const(np.ones((64, 16), np.float32))
    y = b.emit("matmul", [x, w])
    target = small_target(1)
    exe = compile_graph(b.graph([x], [y]), target, compile_ipu_code=False)
    cycles = exe.blocks[0].cycles
    # poplin's AMP vertex: 16 output positions x 16 channels, depth 64, in passes of
    # 8 input x 16 output channels (float32); each pass loads its weights and fills the
    # workers' pipeline (16 positions over 6 workers: 3 each, all within the fill).
    in_group = cost.AMP_IN_GROUP["float32"]                                       # 8
    out_group = target.amp_macs("float32") * cost.AMP_PASS_CYCLES["float32"] // in_group
    passes = (64 // in_group) * math.ceil(16 / out_group)                         # 8
    weights = in_group * out_group * 4 // cost.AMP_COEFF_LOAD_BYTES_PER_CYCLE     # 32
    worker = target.workers_per_tile * cost.AMP_WORKER_OVERHEAD
    amp = (cost.AMP_SUPERVISOR_CYCLES + cost.AMP_GROUP_CYCLES
           + passes * (cost.AMP_PASS_OVERHEAD_CYCLES + weights + worker))
    assert cycles["compute"] == amp == 2744
    # One tile computes everything: it receives all of x and all of w.
    assert cycles["exchange"] == cost.EXCHANGE_LATENCY_CYCLES + (16 * 64 + 64 * 16) * 4 // 4


def test_stream_copies_cost_host_link_cycles():
    graph, _ = counting_loop()
    target = small_target(4)
    exe = compile_graph(graph, target)
    body = exe.blocks[0].steps[0].body_block
    # One element in through the infeed, one out through the outfeed, 8 bytes each.
    expected = cost.host_io_cycles(8, target) + cost.host_io_cycles(8, target, out=True)
    assert exe.blocks[body].cycles["host_io"] == expected


def test_compile_reports_written_variables_and_pass_times():
    exe = compile_graph(dense_step(), small_target(4))
    assert exe.variables == [{"name": "w", "shape": [3, 2], "dtype": "float32",
                              "written": True}]
    assert set(exe.info["pass_seconds"]) >= {"verify", "inline", "constant-fold", "dead-code",
                                             "tile-map", "memory-plan", "lower"}
