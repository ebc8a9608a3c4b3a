"""Cycle micro-cases, computed by hand from the target's figures."""
import dataclasses
import math


from ipu_keras._src.compiler import compile_graph
from ipu_keras._src.ops.builder import Builder, new_input
from ipu_keras._src.device import cost
from ipu_keras._src.device.targets import get_target
from tests.graphs import small_target

OVERHEAD = cost.VERTEX_OVERHEAD_CYCLES
LATENCY = cost.EXCHANGE_LATENCY_CYCLES
LOOP = cost.ELEMENTWISE_LOOP_CYCLES


def test_vector_work_is_split_over_six_barrel_scheduled_workers():
    t = get_target("ipu2")
    assert t.workers_per_tile == 6
    # float32: 2 per instruction; 100 elements -> 17 per worker -> 9 instructions, each
    # a loop iteration of LOOP worker cycles (6 tile cycles each).
    assert cost.compute_cycles("vector", 100, "float32", t) == OVERHEAD + 6 * 9 * LOOP
    # float16: 4 per instruction -> 5 instructions.
    assert cost.compute_cycles("vector", 100, "float16", t) == OVERHEAD + 6 * 5 * LOOP
    # int32 has no SIMD path: 17 instructions.
    assert cost.compute_cycles("vector", 100, "int32", t) == OVERHEAD + 6 * 17 * LOOP
    # A single element still waits for its worker's slot.
    assert cost.compute_cycles("vector", 1, "float32", t) == OVERHEAD + 6 * LOOP
    assert cost.compute_cycles("transcendental", 12, "float32", t) == OVERHEAD + 6 * 8 * LOOP
    assert cost.compute_cycles("none", 100, "float32", t) == 0


def test_amp_copy_exchange_sync_and_host_link_rates():
    mk1, mk2 = get_target("ipu1"), get_target("ipu2")
    assert cost.compute_cycles("amp", 6400, "float16", mk1) == OVERHEAD + 6400 // 32
    assert cost.compute_cycles("amp", 6400, "float32", mk2) == OVERHEAD + 6400 // 16
    assert cost.amp_rate("float16", "half", mk2) == 64
    assert cost.compute_cycles("copy", 100, "float32", mk2) == OVERHEAD + 400 // 8
    assert cost.exchange_cycles(1000, mk2) == LATENCY + 250
    assert cost.exchange_cycles(0, mk2) == 0
    assert cost.sync_cycles(mk2) == 50 and cost.sync_cycles(mk2, external=True) == 500
    # A stream copy pays its phases' fixed cost (the lightweight-profiling tutorial's
    # 4-byte copy: 155 + 1,513 + 87), then its bytes take as long as the slower of the
    # Mk2 path's stages (targets.py). In: the IPU's own stage (3.3 GB/s) is the slower for
    # one replica: 6.6e6 bytes take 2 ms, 2.66e6 cycles at 1.33 GHz; three replicas share
    # the host's link (7.0625 GB/s), slower still.
    fixed = cost.STREAM_COPY_CYCLES
    assert fixed == 1_755
    assert cost.host_io_cycles(6_600_000, mk2) == fixed + 2_660_000
    assert cost.host_io_cycles(6_600_000, mk2, replicas=3) == fixed + math.ceil(
        3 * 6_600_000 / (56.5e9 / 8) * 1.33e9)
    # Out: the host's link (2.9375 GB/s) is the slower even for one replica.
    assert cost.host_io_cycles(5_875_000, mk2, out=True) == fixed + 2_660_000
    # Mk1: one stage, the host's PCIe, both ways: 6.4e6 bytes in 100 us at 1.6 GHz.
    mk1 = get_target("ipu1")
    assert cost.host_io_cycles(6_400_000, mk1) == cost.host_io_cycles(
        6_400_000, mk1, out=True) == fixed + 160_000
    # Nothing to copy: no copy.
    assert cost.host_io_cycles(0, mk2) == 0


def test_amp_vertex_runs_whole_channel_groups_or_the_vector_path():
    mk1, mk2 = get_target("ipu1"), get_target("ipu2")
    # Input x output channels per AMP pass: the chain (4) x one 64-bit load of inputs,
    # by the rate x cycles per pass / input channels: 16 x 16 float16, 8 x 16 float32 on
    # Mk2; Mk1 has half the rate, so 8 output channels.
    assert cost.amp_groups("float16", mk2) == (16, 16)
    assert cost.amp_groups("float32", mk2) == (8, 16)
    assert cost.amp_groups("float16", mk1) == (16, 8)
    # A separate half-partials rate (none of the standard targets lists one) widens it.
    fast = dataclasses.replace(mk2, amp_macs_per_cycle={"float16": 64, "float32": 16,
                                                        "float16.half": 128})
    assert cost.amp_groups("float16", fast, "half") == (16, 32)
    assert cost.amp_groups("float16", fast) == (16, 16)
    # 60 positions x 20 channels, depth 20, float16: both rounded up to 2 groups, so 4
    # passes, each loading 16 x 16 half weights and 10 positions per worker.
    worker = cost.AMP_WORKER_OVERHEAD + (10 - 3) * cost.AMP_PASS_CYCLES["float16"]
    per_pass = cost.AMP_PASS_OVERHEAD_CYCLES + 16 * 16 * 2 // 16 + 6 * worker
    amp = cost.AMP_SUPERVISOR_CYCLES + cost.AMP_GROUP_CYCLES + 4 * per_pass
    assert cost.amp_vertex_cycles(60, 20, 20, "float16", mk2) == amp
    # Two conv groups run their passes one after the other.
    assert (cost.amp_vertex_cycles(60, 20, 20, "float16", mk2, conv_groups=2)
            == amp + cost.AMP_GROUP_CYCLES + 4 * per_pass)
    # One output channel (a matrix-vector product) wastes 15 of 16 lanes: the vector
    # path, one float32 MAC per lane per instruction, 2 lanes, is cheaper.
    vector = OVERHEAD + 6 * math.ceil(math.ceil(600 * 1000 / 6) / 2)
    assert cost.amp_vertex_cycles(600, 1000, 1, "float32", mk2) == vector
    assert cost.amp_vertex_cycles(0, 1000, 1, "float32", mk2) == 0


def test_a_reduction_reduces_in_place_then_combines_partials():
    b = Builder()
    x = new_input((1024,), "float32")
    total = b.emit("reduce_sum", [x], axes=(0,), keep_dims=False)
    target = small_target(4)
    exe = compile_graph(b.graph([x], [total]), target, compile_ipu_code=False)
    # 256 elements per tile reduced locally, then 4 partials on the output's tile.
    local = OVERHEAD + 6 * math.ceil(math.ceil(256 / 6) / 2)
    combine = OVERHEAD + 6 * math.ceil(math.ceil(4 / 6) / 2)
    # The argument (4096 bytes) and the result (4) cross the host link, a sync each way.
    host = cost.host_io_cycles(4096, target) + cost.host_io_cycles(4, target, out=True)
    assert exe.blocks[0].cycles == {
        "compute": local + combine, "exchange": LATENCY + math.ceil(3 * 4 / 4),
        "sync": 2 * target.internal_sync_cycles + 2 * target.external_sync_cycles,
        "host_io": host}


def test_an_operand_mapped_elsewhere_is_exchanged_by_interval():
    b = Builder()
    x, z = new_input((64,), "float32"), new_input((64,), "float32")
    y = b.emit("add", [x, z])
    target = small_target(8)
    exe = compile_graph(b.graph([x, z], [y]), target, compile_ipu_code=False)
    # x and z each use 4 tiles of 16 elements (64 bytes); y follows x, z lies on other
    # tiles, so each of y's tiles receives its 16 elements of z.
    assert exe.blocks[0].cycles["exchange"] == LATENCY + 16 * 4 // 4


def test_an_unsharded_graph_runs_on_one_ipu_of_a_bigger_device():
    b = Builder()
    x = new_input((1024,), "float32")
    y = b.emit("neg", [x])
    target = get_target("ipu2", tiles_per_ipu=4, num_ipus=2)
    exe = compile_graph(b.graph([x], [y]), target, compile_ipu_code=False)
    assert exe.target["num_ipus"] == 1          # the other IPU is for a replica
    one_ipu = compile_graph(b.graph([x], [y]), small_target(4), compile_ipu_code=False)
    replica, alone = exe.blocks[0].cycles, one_ipu.blocks[0].cycles
    assert {k: v for k, v in replica.items() if k != "host_io"} == {
        k: v for k, v in alone.items() if k != "host_io"}
    # Both replicas' arguments and results cross the host's one link, each IPU's through
    # its own stage.
    def host(replicas):
        return (cost.host_io_cycles(4096, target, replicas)
                + cost.host_io_cycles(4096, target, replicas, out=True))
    assert alone["host_io"] == host(1) and replica["host_io"] == host(2)


def test_an_inter_ipu_copy_pays_the_link_an_exchange_and_an_external_sync():
    b = Builder()
    x = new_input((1024,), "float32")
    b.shard = 0
    y = b.emit("neg", [x])
    b.shard = 1
    z = b.emit("neg", [y])
    target = get_target("ipu2", tiles_per_ipu=4, num_ipus=2)
    exe = compile_graph(b.graph([x], [z]), target, compile_ipu_code=False)
    assert exe.target["num_ipus"] == 2
    rows = {row.op: list(row.cycles.values()) for row in exe.blocks[0].profile}
    copy = rows["ipu_copy"]
    # IPUs 0 and 1 are partners: six links of 16 GB/s each way join them.
    link = cost.IPU_LINK_LATENCY_CYCLES + math.ceil(4096 / (6 * 16e9) * 1.33e9)
    # 1024 floats land on 4 destination tiles: 1024 bytes each over the exchange.
    assert copy[1] == link + cost.EXCHANGE_LATENCY_CYCLES + 1024 // 4
    assert copy[2] == target.external_sync_cycles
    assert rows["neg"][2] == target.internal_sync_cycles


def test_a_transfer_between_ipus_uses_the_links_that_join_them():
    """An IPU-M2000's two pairs: six links join partners, two the pairs' neighbours, each
    link 16 GB/s each way (ten links both ways are the published 320 GB/s); Mk1's card
    is not described link by link, so a transfer there may use all its links."""
    mk2 = get_target("ipu2", num_ipus=4)
    assert cost.link_bytes_per_second(mk2, 0, 1) == cost.link_bytes_per_second(mk2, 3, 2) == 96e9
    assert cost.link_bytes_per_second(mk2, 1, 3) == cost.link_bytes_per_second(mk2, 0, 2) == 32e9
    assert 10 * 2 * mk2.ipu_link_bytes_per_second / (2 * mk2.ipu_links) == 320e9
    mk1 = get_target("ipu1", num_ipus=2)
    assert cost.link_bytes_per_second(mk1, 0, 1) == mk1.ipu_link_bytes_per_second
    nbytes = 1 << 20
    pair = cost.ipu_link_cycles(nbytes, mk2, 0, 1)
    rail = cost.ipu_link_cycles(nbytes, mk2, 1, 3)
    assert rail - cost.IPU_LINK_LATENCY_CYCLES == math.ceil(nbytes / 32e9 * mk2.clock_hz)
    assert pair - cost.IPU_LINK_LATENCY_CYCLES == math.ceil(nbytes / 96e9 * mk2.clock_hz)
    # A ring of two replicas stays within a pair; a ring of four also crosses the rail,
    # and each of its steps waits for that slower hop.
    assert cost.all_reduce_cycles(nbytes, 2, mk2)[1] == 2 * cost.ipu_link_cycles(
        nbytes // 2, mk2, 0, 1)
    assert cost.all_reduce_cycles(nbytes, 4, mk2)[1] == 6 * cost.ipu_link_cycles(
        nbytes // 4, mk2, 1, 2)


def test_an_all_reduce_runs_poplibs_collective_program():
    """Each ring step: the cross-replica copy with an external sync, then three compute
    sets (slice, add or copy, index update) on the tiles holding the tensor; two more set
    the ring up (poplibs' CollectivesProgram.hpp)."""
    mk2 = get_target("ipu2", num_ipus=2)
    nbytes, tile_bytes = 64_000, 1_000
    compute, exchange, sync = cost.all_reduce_cycles(nbytes, 2, mk2, tile_bytes)
    fragment = math.ceil(tile_bytes / 2 / 4)
    sets = 2 * cost.COLLECTIVE_STEP_COMPUTE_SETS + 2
    assert exchange == 2 * cost.ipu_link_cycles(nbytes // 2, mk2, 0, 1)
    assert sync == 2 * mk2.external_sync_cycles + sets * mk2.internal_sync_cycles
    add = cost.worker_cycles(fragment, "float32", mk2, loop_cycles=cost.ELEMENTWISE_LOOP_CYCLES)
    copy = math.ceil(4 * fragment / mk2.memcpy_bytes_per_cycle)
    assert compute == sets * cost.VERTEX_OVERHEAD_CYCLES + 2 * (add + copy)
    assert cost.all_reduce_cycles(nbytes, 1, mk2) == [0, 0, 0]
    # A tensor held on fewer tiles has more of each fragment on its busiest tile.
    assert cost.all_reduce_cycles(nbytes, 2, mk2, 8_000)[0] > compute
