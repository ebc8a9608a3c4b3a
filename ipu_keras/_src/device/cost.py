"""The cost model: turns work on one tile, bytes moved and syncs into cycles on a target.

Every rate comes from the target description (`device/targets.py`, derived from
`IPU_REFERENCE.md` section 1); the few constants here are overheads, each documented
as an estimate. The compiler calls these functions at compile time; nothing here runs
on the engine's hot path.

The model, per compute set (a superstep: sync, exchange, compute):

* vector work (elementwise, reductions): a tile's elements are split evenly over its
  `workers_per_tile` worker contexts; a worker issues one instruction every
  `workers_per_tile` cycles (barrel scheduling) and one instruction processes
  `vector_elements_per_cycle(dtype)` elements (the 64-bit datapath: 2 x float32,
  4 x float16; integers 1). So a tile with `e` elements takes
  `workers * ceil(ceil(e / workers) * instructions_per_element / width)` cycles.
* AMP work of a matmul or convolution (the ops `compiler/passes/planner.py` plans):
  `amp_vertex_cycles` per tile and serial pass, poplin's 1x1 AMP vertex estimate. The
  tile's block is rounded up to whole input x output channel groups (`amp_groups`, from
  the target's AMP rate for the input dtype and partials type, if the target lists a
  separate rate as "float16.half"); each group pass pays supervisor cycles, its weight
  load and the workers' pipeline fill; the vector path is charged instead when cheaper.
  Other AMP work (`compute_cycles("amp", ...)`, ops the planner does not plan):
  multiply-accumulates / the target's AMP rate for the input dtype.
* copies: bytes / `memcpy_bytes_per_cycle`.
* every vertex but the planned AMP one (its overheads above) pays
  `VERTEX_OVERHEAD_CYCLES` (the supervisor launching workers, as the hardware measures
  it: poplibs' estimate plus `HARDWARE_VERTEX_CYCLES`); an
  elementwise op's loop costs `ELEMENTWISE_LOOP_CYCLES` per vector instruction (its
  loads and store), reductions and partial sums one.
* a compute set costs its slowest tile; an exchange costs the bytes its busiest tile
  receives / `exchange_bytes_per_cycle` plus `EXCHANGE_LATENCY_CYCLES`.
* a sync costs `internal_sync_cycles` within one IPU, `external_sync_cycles` when
  the superstep spans IPUs or involves the host (stream copies).
* host I/O: a stream copy's fixed `STREAM_COPY_CYCLES`, then its bytes through the
  stages of its path (`targets.py`): the host's link, which the replicas of one device
  share (a stream copy moves every replica's bytes over it), and each IPU's own stage
  into its tiles; the stages overlap, so the bytes take as long as the slower of them.
* a call of an outlined function: `CALL_OVERHEAD_CYCLES` for the call and return, then
  one copy compute set for its arguments into the shared body's inputs and one for its
  results out (each on its busiest tile, with a sync); its body's cycles are the body
  block's, counted once per call.
* an inter-IPU copy: its bytes over the IPU-Links that join its two IPUs
  (`link_bytes_per_second`: a pair's six links, the rail's two, one direction) plus
  `IPU_LINK_LATENCY_CYCLES`, on top of the exchange that lands them on the destination
  tiles and an external sync.
"""
import math

import numpy as np

HARDWARE_VERTEX_CYCLES = 82
"""Measured: what one popops vertex costs on the hardware beyond poplibs' estimate of it.
tessellate-ipu (graphcore-research/tessellate-ipu@3ab241f,
`notebooks/01-tessellate-ipu-tile-api-basics.ipynb`) timed popops' BinaryOp1D float add
with the tiles' cycle counters on an ipu2: 285 cycles for 10 floats and 1,815 for 1,024
(counter overhead taken off), where the estimator gives 203 and 1,733. Both differ by
the same 82 cycles, so the estimate's slope holds and its fixed cost is short: the
vertex's launch as the hardware runs it. (The same project's timing of poplin's AMP
vertex agrees with poplin's estimate within 1%, so the AMP vertex gets no addition.)"""

VERTEX_OVERHEAD_CYCLES = 11 + 6 * 29 + HARDWARE_VERTEX_CYCLES
"""Published (popops `BinaryOp1D` float estimate): the supervisor's 11 cycles to launch
one elementwise vertex plus 29 fixed worker cycles, six times over (barrel scheduling);
plus the `HARDWARE_VERTEX_CYCLES` the hardware adds to that estimate."""

ELEMENTWISE_LOOP_CYCLES = 3
"""Published (popops `binaryOpInnerLoopCycles`): worker cycles per 64-bit vector of an
elementwise op's inner loop, one for the operation and two for its loads and store."""

TRANSCENDENTAL_CYCLES = 8
"""Estimate: vector-instruction equivalents of one exp/log/tanh-class element."""

STREAM_COPY_CYCLES = 155 + 1_513 + 87
"""Measured: what one host stream copy costs on the hardware beyond its bytes. Graphcore's
lightweight-profiling tutorial (graphcore/examples@3cc8f81,
`tutorials/tutorials/popvision/lightweight_profiling/README.md`, 'Example 3: I/O') prints
the cycles of each phase of every stream copy of a run, read on the IPU: the run's first
copy, 4 bytes the host had ready, took 155 cycles in `StreamCopyBegin`, 1,513 in
`StreamCopyMid` (the transfer) and 87 in `StreamCopyEnd`. Every other 4-byte copy of that
trace spends 1,491 to 1,771 cycles in its Mid phase, so the transfer's latency, not its
bytes, sets it. Begin and End grow without bound when the host is late (about 80,000
cycles each when a host callback supplies the data): not charged, as an infeed's elements
are prefetched. The tutorial (of 2022) does not name its machine, by its date a Mk2 or Bow
IPU-Machine; a Mk1 C2 card pays the same, for want of a figure of its own."""

EXCHANGE_LATENCY_CYCLES = 30
"""Estimate: fixed cost of one exchange phase (programming the exchange, first word)."""

IPU_LINK_LATENCY_CYCLES = 700
"""Estimate: fixed cost of one transfer over the IPU-Links (link serialisation and
flight, about half a microsecond at 1.33 GHz)."""

CALL_OVERHEAD_CYCLES = 50
"""Estimate: the control code of a call of a shared (outlined) function and its return."""

AMP_PASS_CYCLES = {"float16": 4, "float32": 8}
"""Published (poplin `PerformanceEstimation.hpp`, `coreCycles` of the 1x1 AMP vertex):
cycles for one output position to pass through one input x output channel group of the
AMP with all six workers busy; 4 for half inputs, 8 for float inputs."""

AMP_IN_GROUP = {"float16": 16, "float32": 8}
"""Published (poplin `ConvVertexType.cpp`): input channels per AMP pass, the conv chain
length (4) x the elements of one 64-bit input load (4 half, 2 float). The output channels
per pass (the conv units) follow from the rate: `rate * AMP_PASS_CYCLES / AMP_IN_GROUP`
(Mk2: 16 for both dtypes; Mk1: 8), as `amp_groups` derives."""

AMP_SUPERVISOR_CYCLES = 50
"""Published (poplin 1x1 AMP vertex estimate, `supervisorNonloopOverhead`)."""

AMP_GROUP_CYCLES = 22
"""Published (same estimate): per conv group, 12 + 10 supervisor cycles around its loops."""

AMP_PASS_OVERHEAD_CYCLES = 26
"""Published (same estimate): per input x output channel-group pass, 19 + 7 supervisor
cycles, on top of loading that pass's weights."""

AMP_WORKER_OVERHEAD = 46
"""Published (same estimate): worker cycles of one pass for up to 3 output positions
(pipeline fill and drain); each further position costs `AMP_PASS_CYCLES`. Worker cycles
count six times in tile cycles (the six workers are barrel-scheduled)."""

AMP_COEFF_LOAD_BYTES_PER_CYCLE = 16
"""Published (poplin `getConvPartialAmpSupervisorWeightLoadCycleEstimate`): weights load
into the conv units with 128-bit loads, 16 bytes per cycle."""

PARTIALS_BYTES = {"float": 4, "half": 2}
"""Bytes of one matmul/conv partial sum per `partialsType`."""


def _width(dtype, target):
    """Elements per vector instruction (one instruction per cycle on a busy tile)."""
    if hasattr(target, "vector_elements_per_cycle"):
        return target.vector_elements_per_cycle(dtype)
    if dtype == "float16":
        return 2 * target.vector_flops_per_cycle
    return target.vector_flops_per_cycle if dtype in ("float32", "float64") else 1


def worker_cycles(elements, dtype, target, instructions_per_element=1, loop_cycles=1):
    """Cycles for one tile's workers to process `elements` (int or numpy array), each
    vector instruction costing `loop_cycles` worker cycles."""
    workers = target.workers_per_tile
    per_worker = -(-np.asarray(elements, np.int64) // workers)
    width = _width(dtype, target)
    out = workers * (-(-(per_worker * instructions_per_element) // width)) * loop_cycles
    return int(out) if np.ndim(out) == 0 else out


def vector_cycles(elements, dtype, target, instructions_per_element=1, loop_cycles=1):
    """Cycles of one vector vertex over `elements` on a tile, overhead included."""
    e = np.asarray(elements, np.int64)
    cycles = worker_cycles(e, dtype, target, instructions_per_element, loop_cycles)
    out = np.where(e > 0, VERTEX_OVERHEAD_CYCLES + cycles, 0)
    return int(out) if out.ndim == 0 else out


def amp_rate(dtype, partials_type, target):
    """AMP multiply-accumulates per tile per cycle for an input dtype and partials type."""
    key = "float16" if np.dtype(dtype) == np.float16 else "float32"
    return target.amp_macs_per_cycle.get(f"{key}.{partials_type}", target.amp_macs(dtype))


def amp_groups(dtype, target, partials_type="float"):
    """(input channels, output channels) of one AMP pass for an input dtype (the output
    channels from `amp_rate`, so a target's separate half-partials rate counts)."""
    key = "float16" if np.dtype(dtype) == np.float16 else "float32"
    core, in_group = AMP_PASS_CYCLES[key], AMP_IN_GROUP[key]
    return in_group, max(1, amp_rate(dtype, partials_type, target) * core // in_group)


def amp_vertex_cycles(field, depth, cols, dtype, target, conv_groups=1,
                      partials_type="float", nx1=None):
    """Cycles of one matmul/conv vertex on a tile: `field` output positions by `cols`
    output channels (per conv group), contracting `depth` elements.

    The AMP runs whole channel groups (`amp_groups`): depth and cols are rounded up to
    them, so a 1-channel operand wastes lanes. Each group pass pays the supervisor, a
    weight load and the workers' pipeline fill (poplin's 1x1 AMP vertex estimate). A
    kernel larger than 1x1 runs poplin's nx1 vertex instead (`nx1`: its passes, see
    `nx1_vertex_cycles`). When the vector path is cheaper (few output channels: poplin's
    horizontal MAC vertex, one multiply-accumulate per lane per instruction) it is
    charged instead. `partials_type` picks the AMP rate (`amp_rate`). Arguments may be
    numpy arrays (one vertex per entry)."""
    field, depth, cols = (np.asarray(a, np.int64) for a in (field, depth, cols))
    key = "float16" if np.dtype(dtype) == np.float16 else "float32"
    in_group, out_group = amp_groups(dtype, target, partials_type)
    loads = out_group * in_group * np.dtype(key).itemsize // AMP_COEFF_LOAD_BYTES_PER_CYCLE
    workers = target.workers_per_tile
    per_worker = -(-field // workers)
    if nx1 is None:
        passes = conv_groups * -(-depth // in_group) * -(-cols // out_group)
        inner = workers * (AMP_WORKER_OVERHEAD
                           + np.maximum(0, per_worker - 3) * AMP_PASS_CYCLES[key])
        amp = (AMP_SUPERVISOR_CYCLES + conv_groups * AMP_GROUP_CYCLES
               + passes * (AMP_PASS_OVERHEAD_CYCLES + loads + inner))
    else:
        amp = nx1_vertex_cycles(per_worker, -(-cols // out_group), key, target, conv_groups,
                                partials_type, loads, *nx1)
    vector = VERTEX_OVERHEAD_CYCLES + worker_cycles(conv_groups * field * cols * depth,
                                                    key, target)
    out = np.where(field * depth * cols > 0, np.minimum(amp, vector), 0)
    return int(out) if out.ndim == 0 else out


NX1 = {"overhead": 109, "retention": 9, "zeroing": {"float": 9, "half": 10},
       "group": 16, "in_group": 14, "out_group": 14, "zero_out_group": 17, "row": 14,
       "position": 12, "filter_rows": {4: 60, 2: 46, 1: 15}, "filter_row": 20,
       "load_end": 3, "stall": 6, "start": 17, "entry": 3,
       "runs": {"float16": (17, 29, 33, 34), "float32": (17, 33, 44, 45)}}
"""Published (graphcore/poplibs@7eac0f2, lib/poplin/PerformanceEstimation.hpp, the
`ConvPartialnx1` estimate, half and float): the supervisor's fixed cycles, the workers'
retained state and partials zeroing (per worker), the loops over conv groups, input and
output channel groups and the kernel's rows and positions, the extra weight-load cycles
by filter height (`filter_row` a row past the listed heights; a height of 4 loads with
64-bit loads only, halving the load rate) and the load's end, the 6-cycle stall of each
supervisor loop's branch but the last, and a worker's cycles per run of 0, 1, 2 and 3
output positions (each further position costs `AMP_PASS_CYCLES`)."""


def nx1_vertex_cycles(per_worker, out_groups, key, target, conv_groups, partials_type,
                      loads, in_groups, kernel_rows, kernel_cols, filter_height):
    """Cycles of poplin's nx1 AMP vertex (`NX1`): `in_groups` input channel groups, each
    walking `kernel_rows` passes of `filter_height` kernel rows by `kernel_cols` kernel
    positions, over `out_groups` output channel groups, `per_worker` positions a worker."""
    workers = target.workers_per_tile
    half_partials = partials_type == "half" and key == "float16"
    runs = NX1["runs"][key]
    run = np.where(per_worker >= 3, runs[3] + (per_worker - 3) * AMP_PASS_CYCLES[key],
                   np.take(runs, np.minimum(per_worker, 2)))
    worker = NX1["start"] + half_partials + NX1["entry"] + run - NX1["retention"]
    if filter_height == 4 and AMP_COEFF_LOAD_BYTES_PER_CYCLE > 8:
        loads = loads * 2
    load = (loads + NX1["filter_rows"].get(filter_height, NX1["filter_row"] * filter_height)
            + NX1["load_end"])
    inner = (kernel_rows * (NX1["row"] + kernel_cols * (NX1["position"] + load))
             + kernel_rows * kernel_cols * workers * worker)
    zeroing = NX1["zeroing"]["half" if half_partials else "float"]
    stall = NX1["stall"]
    return (NX1["overhead"] + workers * (NX1["retention"] + zeroing)
            + conv_groups * (out_groups * NX1["zero_out_group"] + (out_groups - 1) * stall + 1)
            + (conv_groups - 1) * stall + 1
            + conv_groups * (NX1["group"] + in_groups * (
                NX1["in_group"] + out_groups * (NX1["out_group"] + inner))))


def compute_cycles(kind, units, dtype, target):
    """Cycles one tile spends doing `units` of work of `kind` on elements of `dtype`."""
    if kind == "none" or units <= 0:
        return 0
    if kind == "amp":
        return VERTEX_OVERHEAD_CYCLES + math.ceil(units / target.amp_macs(dtype))
    if kind == "copy":
        itemsize = np.dtype(dtype).itemsize
        return VERTEX_OVERHEAD_CYCLES + math.ceil(units * itemsize / target.memcpy_bytes_per_cycle)
    factor = TRANSCENDENTAL_CYCLES if kind == "transcendental" else 1
    return vector_cycles(int(units), dtype, target, factor, ELEMENTWISE_LOOP_CYCLES)


def exchange_cycles(bytes_received, target):
    """Cycles of an exchange phase in which the busiest tile receives `bytes_received`.

    Accepts an int or a numpy array (one exchange per entry)."""
    if np.ndim(bytes_received):
        b = np.asarray(bytes_received, np.int64)
        return np.where(b > 0, EXCHANGE_LATENCY_CYCLES + -(-b // target.exchange_bytes_per_cycle),
                        0)
    if bytes_received <= 0:
        return 0
    return EXCHANGE_LATENCY_CYCLES + math.ceil(bytes_received / target.exchange_bytes_per_cycle)


def call_cycles(copies, target):
    """[compute, sync] cycles of calling an outlined function: `copies` holds the bytes
    the busiest tile copies for the arguments and for the results (zero: no copy)."""
    compute, supersteps = CALL_OVERHEAD_CYCLES, 0
    for nbytes in copies:
        if nbytes > 0:
            compute += VERTEX_OVERHEAD_CYCLES + math.ceil(nbytes / target.memcpy_bytes_per_cycle)
            supersteps += 1
    return compute, supersteps * sync_cycles(target)


def host_io_cycles(nbytes, target, replicas=1, out=False):
    """Cycles to stream `nbytes` to each of `replicas` replicas (`out`: from them to the
    host): the copy's `STREAM_COPY_CYCLES`, then the slower of the host's link, carrying
    every replica's bytes, and each IPU's own stage, carrying its own (`targets.py`)."""
    if nbytes <= 0:
        return 0
    host = target.host_link_bytes_per_second
    ipu = target.ipu_stream_bytes_per_second
    if out:
        host = target.host_link_out_bytes_per_second or host
        ipu = target.ipu_stream_out_bytes_per_second or ipu
    seconds = replicas * nbytes / host
    if ipu:
        seconds = max(seconds, nbytes / ipu)
    return STREAM_COPY_CYCLES + math.ceil(seconds * target.clock_hz)


def sync_cycles(target, external=False):
    """Cycles of one sync: internal (one IPU) or external (all IPUs, or the host)."""
    return target.external_sync_cycles if external else target.internal_sync_cycles


COLLECTIVE_STEP_COMPUTE_SETS = 3
"""Published program structure (poplibs' replicated collectives before they moved to GCL,
graphcore/poplibs@f5f9369, `lib/popops/CollectivesProgram.hpp`): besides the
cross-replica copy, each step of the ring runs three compute sets of its own, in
reduce-scatter the dynamic slice of the next fragment, the add of the received one and
the ring index's increment, in all-gather the copy of the received fragment, its
dynamic update into place and the increment; before the steps, the index's set-up and
the first slice. Each is a superstep: a vertex launched, an internal sync."""


def all_reduce_cycles(nbytes, replicas, target, tile_bytes=None):
    """[compute, exchange, sync] cycles of a ring all-reduce of `nbytes` on each of
    `replicas` replicas, whose busiest tile holds `tile_bytes` of it (default all).

    A ring reduce-scatter then all-gather (poplibs' collective program,
    `COLLECTIVE_STEP_COMPUTE_SETS`): 2 (R - 1) steps, each moving 1/R of the tensor to
    the next replica over the IPU-Links with an external sync, then slicing, adding (or
    copying) and updating that fragment on the tiles that hold it; two more compute
    sets set the ring up. Nothing when there is one replica. Replica r runs on IPU r:
    two replicas are partners, a longer ring also crosses between pairs, and every step
    waits for its slowest hop."""
    if replicas <= 1 or nbytes <= 0:
        return [0, 0, 0]
    steps = 2 * (replicas - 1)
    chunk = math.ceil(nbytes / replicas)
    hop = (0, 1) if replicas == 2 else (1, 2)
    exchange = steps * ipu_link_cycles(chunk, target, *hop)
    fragment = math.ceil(min(nbytes, tile_bytes or nbytes) / replicas / 4)
    sets = steps * COLLECTIVE_STEP_COMPUTE_SETS + 2
    compute = sets * VERTEX_OVERHEAD_CYCLES + steps * (
        worker_cycles(fragment, "float32", target, loop_cycles=ELEMENTWISE_LOOP_CYCLES)
        + math.ceil(4 * fragment / target.memcpy_bytes_per_cycle))
    sync = steps * sync_cycles(target, external=True) + sets * sync_cycles(target)
    return [compute, exchange, sync]


def link_bytes_per_second(target, source, destination):
    """One direction's IPU-Link bandwidth from IPU `source` to IPU `destination`: the
    links that join them (`targets.py`), or every link of the IPU when the target does
    not say how they are wired."""
    if not target.ipu_pair_links or not target.ipu_links:
        return target.ipu_link_bytes_per_second
    per_link = target.ipu_link_bytes_per_second / (2 * target.ipu_links)
    partners = source // 2 == destination // 2
    return per_link * (target.ipu_pair_links if partners else target.ipu_rail_links)


def ipu_link_cycles(nbytes, target, source=0, destination=1):
    """Cycles to move `nbytes` from IPU `source` to IPU `destination` over the
    IPU-Links that join them."""
    if nbytes <= 0:
        return 0
    rate = link_bytes_per_second(target, source, destination)
    return IPU_LINK_LATENCY_CYCLES + math.ceil(nbytes / rate * target.clock_hz)
