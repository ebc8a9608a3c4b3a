"""Fidelity: the cycle model's estimates next to figures Graphcore published.

Each case builds a workload ipu_keras can express, runs it on the simulated Mk2
("ipu2": GC200, 1472 tiles, 1.33 GHz), or on the IPU the figure was measured on, and
compares the simulated cycles with a published figure converted to cycles on that IPU.
The cost model is never tuned to these figures (IPU_REFERENCE.md): it derives from the
machine and from Graphcore's published codelet estimates and measurements
(`device/cost.py`); this file only measures how close that gets.
`CASES` is the table; `run_case` measures one; `bench/fidelity.py` prints the table.

Sources (commit-pinned):
* EX = github.com/graphcore/examples @ 3cc8f81f13728dd8c17d0d3c8d2fc1549b159485
* PL = github.com/graphcore/poplibs @ 7eac0f266ced5b064b3284a3cd90d491745b387c
* TS = github.com/graphcore-research/tessellate-ipu @ 3ab241f33359de7e2788c9837b37b78cf6d19dcd
  (hardware cycle counters read on the tiles of an ipu2, Mk2's tile; cycles, so the
  figures hold at any clock)
* LBM = github.com/thorbenlouw/lbm-graphcore @ df670f6b4bad5335e19fa1644271d5419e1cf5fd
  (T. Louw's MSc project, University of Bristol, 2020: Poplar programs timed on Mk1 IPUs
  and profiled on the IPUModel)
"""
import dataclasses
import math

import numpy as np
import pytest

from tests.fidelity import case_params, mnist_cnn

MK2_CLOCK_HZ = 1.33e9
CLOSE = (0.75, 1.25)
"""Issue 33's band: an independent case within 25% of its published figure. The cases
outside it keep the band of 2 and say why in their text."""
EX = "graphcore/examples@3cc8f81"
PL = "graphcore/poplibs@7eac0f2"
TS = "graphcore-research/tessellate-ipu@3ab241f"
TS_COUNTER_CYCLES = 45
"""TS's `ipu_cycle_count_overhead()`: what two back-to-back counter reads measure, taken
off its raw counts to leave the measured work."""


@dataclasses.dataclass(frozen=True)
class Case:
    """One published figure: `published` cycles on the IPU it was measured on (one Mk2
    unless the case says otherwise), `band` the accepted estimate/published ratios, `why`
    the workload and the conversion."""

    name: str
    published: float
    source: str
    why: str
    band: tuple = (0.5, 2.0)
    slow: bool = False
    independent: bool = True
    """False when the figure is one the model is built from (a codelet estimator whose
    arithmetic the case checks, or the measurement a constant is derived from): such a
    case checks our arithmetic, not the model's fidelity."""


# -- workloads: each returns simulated cycles of the published quantity ----------------


def _configure(num_ipus=1, tiles_per_ipu=0, version="ipu2"):
    import ipu_keras as ipu

    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = num_ipus
    cfg.ipu_model.tiles_per_ipu = tiles_per_ipu
    cfg.ipu_model.version = version
    cfg.configure_ipu_system()


def _device_cycles(report):
    """Cycles on the device, without host I/O (the published figures exclude it)."""
    return sum(v for k, v in report.cycles.items() if k != "host_io")


def matvec_10000x1000():
    import tensorflow as tf

    import ipu_keras as ipu
    from ipu_keras import profiling

    _configure()
    m = np.ones((10000, 1000), np.float32)
    v = np.ones((1000, 1), np.float32)
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        ipu.ipu_compiler.compile(tf.function(lambda a, b: tf.matmul(a, b)), [m, v])
    return _device_cycles(profiling.last_report())


BLUR_ITERATIONS = 200
"""LBM's `PoplibsStencil.cpp` with `-n 100` (its `run.sh`): the timed program repeats
blur-and-copy-back 2 x 100 times."""


def gaussian_blur_mk1(height, width, dtype):
    """Device cycles per iteration of a 3x3 Gaussian blur of a 4-channel image on a Mk1
    IPU: a 'same' convolution with 4 input and 4 output channels (the kernel on the
    diagonal), its output the next iteration's input. Per iteration exactly: the cycles of
    4 iterations less those of 2, halved (what runs once, the program's I/O and its loop's
    set-up, cancels; 200 iterations would only spread it thinner, and take a minute)."""
    import tensorflow as tf

    import ipu_keras as ipu
    from ipu_keras import profiling

    _configure(version="ipu1")
    blur = np.outer([1, 2, 1], [1, 2, 1]).astype(np.float32) / 16
    kernel = np.einsum("hw,io->hwio", blur, np.eye(4, dtype=np.float32)).astype(dtype)
    image = np.ones((1, height, width, 4), dtype)

    def cycles(iterations):
        def program(x):
            k = tf.constant(kernel)
            return ipu.loops.repeat(iterations, lambda y: tf.nn.conv2d(y, k, 1, "SAME"), [x])

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            ipu.ipu_compiler.compile(tf.function(program), [image])
        return _device_cycles(profiling.last_report())

    return (cycles(4) - cycles(2)) / 2


def matmul_one_tile(rows):
    """Compute cycles of a half-precision (rows x 16) @ (16 x 16) product on a 1-tile IPU,
    as the ConvPartial1x1 vertex takes it: a 1x1 convolution of `rows` positions of 16
    input channels into 16 output channels (a `tf.matmul` would be planned with its
    operands swapped, the rows as output channels: `planner.orient_matmul`)."""
    import tensorflow as tf

    import ipu_keras as ipu
    from ipu_keras import profiling

    _configure(tiles_per_ipu=1)
    a, b = np.ones((1, rows, 1, 16), np.float16), np.ones((1, 1, 16, 16), np.float16)
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        ipu.ipu_compiler.compile(tf.function(lambda x, y: tf.nn.conv2d(x, y, 1, "VALID")),
                                 [a, b])
    return profiling.last_report().cycles["compute"]


def two_matmuls_tut4():
    """Device cycles of Poplar tutorial 4's program: m4 = m1 @ m2, m5 = m4 @ m3 (float)."""
    import tensorflow as tf

    import ipu_keras as ipu
    from ipu_keras import profiling

    _configure()
    m1, m2, m3 = (np.ones(shape, np.float32) for shape in ((900, 600), (600, 300), (300, 200)))
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        ipu.ipu_compiler.compile(tf.function(lambda a, b, c: tf.matmul(tf.matmul(a, b), c)),
                                 [m1, m2, m3])
    return _device_cycles(profiling.last_report())


def elementwise_add_one_tile(n=12000):
    import tensorflow as tf

    import ipu_keras as ipu
    from ipu_keras import profiling

    _configure(tiles_per_ipu=1)
    a = np.ones((n,), np.float32)
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        ipu.ipu_compiler.compile(tf.function(lambda x, y: x + y), [a, a])
    return profiling.last_report().cycles["compute"]


def _mnist_cnn_pipelined(keras, ipu):
    """The tutorial's pipelined model: conv-pool-conv | pool-flatten-dropout-dense."""
    inputs = keras.Input((28, 28, 1))
    with ipu.PipelineStage(0):
        x = keras.layers.Conv2D(32, 3, activation="relu")(inputs)
        x = keras.layers.MaxPooling2D(2)(x)
        x = keras.layers.Conv2D(64, 3, activation="relu")(x)
    with ipu.PipelineStage(1):
        x = keras.layers.MaxPooling2D(2)(x)
        x = keras.layers.Flatten()(x)
        x = keras.layers.Dropout(0.5)(x)
        outputs = keras.layers.Dense(10, activation="softmax")(x)
    model = keras.Model(inputs, outputs)
    model.set_pipelining_options(
        gradient_accumulation_steps_per_replica=8,
        pipeline_schedule=ipu.ops.pipelining_ops.PipelineSchedule.Grouped)
    return model


def mnist_cnn_training_step(replicas=1, steps=8, batch=64, pipelined=False):
    """Cycles per training step of the Keras tutorial's CNN (SGD, batch 64 per replica,
    `steps` steps per execution; `pipelined`: over two IPUs, gradient accumulation 8),
    host I/O of the infeed included: the published per-step times are wall time of a
    whole on-device epoch."""
    import keras

    import ipu_keras as ipu

    _configure(num_ipus=2 * replicas if pipelined else replicas)
    rng = np.random.default_rng(0)
    n = steps * batch * replicas
    x = rng.random((n, 28, 28, 1), dtype=np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, n)]
    with ipu.ipu_strategy.IPUStrategy().scope():
        keras.utils.set_random_seed(1)
        model = _mnist_cnn_pipelined(keras, ipu) if pipelined else mnist_cnn(keras)
        model.compile("sgd", "categorical_crossentropy", metrics=["accuracy"],
                      steps_per_execution=steps)
        model.fit(x, y, batch_size=batch, epochs=1, verbose=0)
        report = model.ipu_report()
    return report["device_seconds_per_step"] * MK2_CLOCK_HZ


# -- the table ---------------------------------------------------------------------------

TUT6 = EX + ":tutorials/tutorials/poplar/tut6_matrix_vector_opt/README.md"
KERAS = EX + ":tutorials/tutorials/tensorflow2/keras/README.md"
LBM = "thorbenlouw/lbm-graphcore@df670f6"
LWP = EX + ":tutorials/tutorials/popvision/lightweight_profiling/README.md"
TUT6_DEVICE_CYCLES = 3_801.8 + 8_697.4 + 0.0 + 1_134.8
"""tut6's device cycles: the summary lines that measure the device's own work. The README
says 'Total cycles' is compute + exchange + sync + host I/O, yet its IPUModel lines leave
4,581.2 of the 6,681,766 cycles in no line, and its hardware run of the same program 22.6
million, which the README puts down to `StreamCopyBegin` (the host preparing I/O). A stream
copy is a Begin/Mid/End triplet, and every run starts with two more that pick the program
(LWP, 'Example 3: I/O'); the three copies of tut6 and those two are the only steps its
device program does not itself contain. The lines are meant to partition a run: in LBM's
summaries they add up to 'Total cycles' to the cycle, IPUModel runs without host I/O
(`experiments/halo-exchange-approaches/results.txt`, e.g. 12,000.0 + 5,682.0 + 3,328.0 =
21,010) and hardware runs with it under the Poplar of 2020
(`experiments/gaussian-blur-scaling/exchange-vs-compute.txt`). So the rest of tut6's total
is host I/O, which this case leaves out, and the device part is the sum of compute,
exchange and sync."""

TUT4 = EX + ":tutorials/tutorials/poplar/tut4_profiling"
PEAK = TS + ":notebooks/IPU Peak Flops.ipynb (cell 16)"
BASICS = TS + ":notebooks/01-tessellate-ipu-tile-api-basics.ipynb"
KERAS_CLOCK = (
    " The README does not name the IPU it ran on (SDK 3.1, when Graphcore also ran Bow "
    "at 1.85 GHz): on a Bow the published cycles would be 1.39x these and the ratio "
    "1.39x lower.")


def _amp_case(rows, tflops):
    """A row of TS's AMP sweep: TFLOPS back to cycles per tile (its own conversion,
    2 x rows x 16 x 16 x 1472 flops at 1.85 GHz; the counter overhead already off)."""
    cycles = 2 * rows * 16 * 16 * 1472 / (tflops * 1e12) * 1.85e9
    return Case(
        f"AMP fp16 {rows}x16 @ 16x16, one tile (hw)", cycles, PEAK,
        f"poplin's ConvPartial1x1 vertex on every tile of an ipu2, each multiplying its own "
        f"[{rows},16] by [16,16] in half precision, timed by the tiles' cycle counters: "
        f"{tflops} TFLOPS. Ours: compute cycles of that product as a 1x1 convolution of "
        f"{rows} positions on a 1-tile IPU. The cost model's AMP figures come from poplin's "
        f"estimate of that vertex; this checks the estimate (and our use of it) against the "
        f"hardware: fixed cost and per-row slope.",
        band=CLOSE)


def _add_case(n, microseconds, independent=True):
    """TS's timed elementwise add of n floats per tile: microseconds at 1.85 GHz, counter
    overhead taken off."""
    return Case(
        f"popops add {n} fp32, one tile (hw)", microseconds * 1.85e3 - TS_COUNTER_CYCLES,
        BASICS,
        f"JAX's add mapped to popops' BinaryOp1D float vertex on each tile of an ipu2, "
        f"{n} floats per tile, timed by the tiles' cycle counters: {microseconds:.4f} us at "
        f"1.85 GHz, less {TS_COUNTER_CYCLES} counter cycles. Ours: compute cycles of x + y "
        f"on a 1-tile IPU, from popops' estimate of that vertex (the case below) plus the "
        f"82 cycles the hardware adds to its fixed cost (`cost.HARDWARE_VERTEX_CYCLES`)."
        + (" Those 82 cycles are this measurement less the estimate (285 - 203): the case "
           "is the rule's source, not a check of it; the 1024-float case is the check. "
           "It was 0.71 without the rule." if not independent else ""),
        independent=independent, band=CLOSE)


BLUR = LBM + ":experiments/effect-of-mem-on-convolution/results.csv"
MK1_CLOCK_HZ = 1.6e9


def _blur_case(image, height, width, dtype, seconds, band=CLOSE, why="", slow=False):
    """A row of LBM's hardware timing of its poplibs Gaussian blur on one Mk1 IPU."""
    precision = {"float32": "float", "float16": "half"}[dtype]
    return Case(
        f"3x3 blur {width}x{height}x4 {precision} x200, Mk1 (hw)",
        seconds * MK1_CLOCK_HZ / BLUR_ITERATIONS,
        f"{BLUR} (row {image},{precision},0.6,1); program main/GaussianBlurPoplibs.cpp",
        f"A third party's Poplar program (poplin's convolution, `INFERENCE_FWD`, 4 -> 4 "
        f"channels, 3x3 kernel, padding 1, batch 1, {precision} in and out) blurring the "
        f"{width}x{height} RGBA image '{image}' 200 times, each result copied back into the "
        f"input, on one IPU of a 16-IPU Mk1 server, timed by `poplar::cycleCount` on tile 0: "
        f"{seconds} s per 200 iterations (mean of 5 runs, divided by the tile clock, 1.6 GHz) "
        f"-> cycles per iteration. Ours: a 'same' tf.nn.conv2d in loops.repeat(200) on the "
        f"'ipu1' target, device cycles per iteration. " + why,
        band=band, slow=slow)


CONV_WINDOWS = (
    "Each iteration is the convolution, then the program's Copy of the result back into "
    "the input tensor, which ours charges as a loop's state copy "
    "(`lower.py: _loop_state_copy`), and the loop's control, a Poplar Repeat, charged "
    "nothing (`compiler/passes/repeat.py`). Two facts of the convolution brought the "
    "four cases from 0.71, 0.93, 0.58 and 0.66 into the band "
    "(`compiler/passes/conv_windows.py`): each tile's run of output positions (here a "
    "piece of one image row) reads its input window, the kernel's 3 rows and 2 more "
    "columns, about 3x its own share of the image, over the exchange (poplin's "
    "`getMaxInputRangeSize`); and the 3x3 kernel on 4 channels runs poplin's nx1 vertex, "
    "groups of 4 channels by 4 kernel rows per pass in half (3 passes) and by 2 rows in "
    "float (6 passes, where folding the kernel into the contraction made 5), with its "
    "own supervisor and weight-load cycles (`cost.nx1_vertex_cycles`).")

CASES = [
    (_amp_case(16, 55.49366766), lambda: matmul_one_tile(16)),
    (_amp_case(2048, 334.94046716), lambda: matmul_one_tile(2048)),
    (_add_case(1024, 1.0054054054054054), lambda: elementwise_add_one_tile(1024)),
    (_add_case(10, 0.1783783783783784, independent=False),
     lambda: elementwise_add_one_tile(10)),
    (Case(
        "popops add 12000 fp32, one tile", 11 + 6 * (29 + math.ceil(2000 / 2) * 3),
        PL + ":lib/popops/popopsCycleEstimators.cpp (BinaryOp1D, binaryOpInnerLoopCycles)",
        "Graphcore's cycle estimate of the BinaryOp1D ADD float vertex: supervisor 11 + 6 "
        "workers x (29 + 3 per 2-float vector x ceil(2000 / 2)). Our compute cycles of "
        "x + y on a 1-tile IPU (with the hardware's 82 cycles more per vertex). The cost "
        "model's elementwise constants come from this estimator, so this case checks the "
        "arithmetic, not independent fidelity.", independent=False),
     elementwise_add_one_tile),
    (Case(
        "tut4 two fp32 matmuls (IPUModel)", 34_655, TUT4 + "/screenshots/"
        "PopVision_GA_execution.png ('Cycles 34655'; PopVision_GA_summary.png: IPU Model, "
        "Mk2, 1472 tiles, Poplar 2.0.0)",
        "Poplar tutorial 4 (tut4_ipu_model.cpp): m4 = m1[900x600] @ m2[600x300], then "
        "m5 = m4 @ m3[300x200], poplin's matMul on variables mapped linearly, the whole "
        "Engine::run in PopVision's execution view. Ours: device cycles of the same two "
        "products (inputs streamed in, host I/O left out). About 0.85. The planner cuts each "
        "output in 2-d blocks, as poplin partitions a product's field and output channels: "
        "the first product takes 100 x 32 blocks with k split 16 ways (20.0K cycles: "
        "compute, exchange and syncs; PopVision's operations view gives m4 29,772,428 "
        "tile-summed cycles, 20.2K per tile), the second 65 x 16 blocks split 8 ways (8.6K; "
        "m5 10.5K per tile). The rest of the published total is the copies and transposes "
        "PopVision shows before each product (about 4K), which our variables, already laid "
        "out linearly, do not pay. It was 1.49 when a plan cut the output in flat chunks of "
        "whole rows, which needed every column of B and split k 46 ways.", band=CLOSE),
     two_matmuls_tut4),
    (Case(
        "tut6 matvec 10000x1000 fp32", TUT6_DEVICE_CYCLES, TUT6 + " ('Execution' summary of "
        "the IPUModel run: tile averages of compute incl. idle threads, IPU and global exchange "
        "and sync)",
        "Poplar tutorial 6 on a Mk2 IPUModel: the device part of the run, the profile's tile "
        "averages of compute (including idle threads) 3,801.8 + IPU exchange 8,697.4 + global "
        "exchange 0 + sync 1,134.8. Ours: device cycles of the planner's matmul, matrix and "
        "vector streamed in, host I/O left out. About 0.91 (compute 4.1K vs 3.8K, exchange 7.2K "
        "vs 8.7K, sync 1.1K vs 1.1K). The tutorial's vertices do 2 MACs per cycle; one output "
        "column would use 1 of the AMP's 16 output lanes, so each tile takes the vector path "
        "(it was 0.44 when the planner charged the AMP's full rate). Until this revision the "
        "case compared 'Total cycles' minus 'Tile average host exchange cycles' (18,215, ratio "
        "0.68), as the README suggests; but that difference also holds 4,581.2 cycles that are "
        "in none of the profile's lines (`TUT6_DEVICE_CYCLES` says why they are stream copies' "
        "host phases, not device work).", band=CLOSE), matvec_10000x1000),
    (Case(
        "Keras MNIST CNN train step", 166e-6 * MK2_CLOCK_HZ, KERAS,
        "Graphcore's Keras tutorial on IPU hardware, steps_per_execution = 937, batch 64, "
        "SGD: epoch 3 at 166 us/step (Keras progress bar) x 1.33 GHz. We run 8 steps per "
        "execution; host I/O of the infeed included, as in the wall time. About 0.89: the "
        "convolutions are charged poplin's AMP vertex estimates (nx1 for the 3x3 kernels), "
        "whole channel groups (the first layer has 1 input channel) with per-pass "
        "overheads and weight loads, and their tiles receive their input windows, "
        "each vector vertex the hardware's 82 cycles over popops' estimate, and each "
        "batch (203 KB) the slower stage of the IPU-M2000's host path as gc-hosttraffictest "
        "measured it: gateway buffer -> tiles at 26.4 Gbit/s, 62 us, about 40% of the step, "
        "after each stream copy's fixed 1,755 cycles (`cost.STREAM_COPY_CYCLES`). "
        "The plans cut 2-d blocks of field x channels, and the weight-update convolutions "
        "pay poplin's rearrangements of their operands and result (5K cycles). "
        "It was 0.46, outside 2x, when the convolutions were charged the AMP's full rate; "
        "0.57 when the host link was the IPU's own PCIe (64 GB/s); 0.65 with the NIC's "
        "100 Gb/s line rate; 0.68 with the vertex's 82 cycles; 0.96 when plans cut flat "
        "chunks of whole rows (the cheaper 2-d blocks took it to 0.84, the rearrangements "
        "to 0.86, the stream copies' fixed cost to 0.88, the input windows and the nx1 vertex "
        "to 0.89)." + KERAS_CLOCK, band=CLOSE),
     mnist_cnn_training_step),
    (Case(
        "Keras MNIST CNN train step, 2 replicas", 219e-6 * MK2_CLOCK_HZ, KERAS,
        "Same tutorial replicated over 2 IPUs (batch 64 per replica, 468 steps per "
        "execution): epoch 3 at 219 us/step x 1.33 GHz; per step of one replica, the "
        "gradient all-reduce over the IPU-Links included. About 0.78: the hardware pays 53 "
        "us/step more for the second replica than one IPU takes (26 to 58 us over the six "
        "runs the tutorial's history publishes), the model 24 us. IPU TensorFlow reduces "
        "each of the 6 gradients on its own (maximum_cross_replica_sum_buffer_size 0), and "
        "each all-reduce runs poplibs' collective program: per ring step the copy over the "
        "six IPU-Links joining the pair (96 GB/s each way) with an external sync, then "
        "three compute sets (slice, add or copy, index update), two more to set the ring "
        "up (`cost.COLLECTIVE_STEP_COMPUTE_SETS`). Each IPU's stage of the host path is "
        "its own; the host's link (56.5 Gbit/s) carries both replicas' batches but is not "
        "the slower stage at two. It was 0.71 when a ring step was its copy and sync only; "
        "0.78 before the planner cut 2-d blocks, which made every step cheaper; 0.64 with "
        "the NIC's line rate; 0.54 when each replica had a host link of its own."
        + KERAS_CLOCK, band=CLOSE, slow=True),
     lambda: mnist_cnn_training_step(replicas=2)),
    (Case(
        "Keras MNIST CNN train step, 2-IPU pipeline", 208e-6 * MK2_CLOCK_HZ, KERAS,
        "The tutorial's last run: the model pipelined over 2 IPUs (conv-pool-conv | "
        "pool-flatten-dropout-dense), Grouped schedule, gradient accumulation 8, batch 64, "
        "936 steps per execution: epoch 3 at 208 us/step x 1.33 GHz. Ours: 8 steps per "
        "execution (one weight update), the schedule's makespan per step with host I/O. "
        "About 0.85: the hardware takes 1.25x the one-IPU step, the model 1.21x. Stage 0 "
        "holds both convolutions, so its stage time is close to the whole step's, and each "
        "micro-batch sends 1.98 MB of activations forward and as many gradients back "
        "between the two IPUs, over the six IPU-Links that join a pair in an IPU-M2000 "
        "(96 GB/s each way; 28 us per micro-batch; the 42 us the second IPU adds could not "
        "hold both copies below 94 GB/s, though gc-iputraffictest's example run between two "
        "such IPUs shows 26.5 GB/s each way for its own traffic pattern). It was 0.71 when "
        "a copy could use all ten links of an IPU at the published 320 GB/s (their total, "
        "both ways); 0.78 before the planner's 2-d blocks made every step cheaper; 0.57 with "
        "the host NIC's line rate." + KERAS_CLOCK, band=CLOSE, slow=True),
     lambda: mnist_cnn_training_step(pipelined=True)),
    (_blur_case("bricks", 302, 499, "float16", 0.00060595, why="About 0.90. " + CONV_WINDOWS),
     lambda: gaussian_blur_mk1(302, 499, "float16")),
    (_blur_case("leaf", 1024, 768, "float16", 0.0016564, slow=True,
                why="About 1.16. " + CONV_WINDOWS),
     lambda: gaussian_blur_mk1(1024, 768, "float16")),
    (_blur_case("bricks", 302, 499, "float32", 0.0016749, why="About 0.82. " + CONV_WINDOWS),
     lambda: gaussian_blur_mk1(302, 499, "float32")),
    (_blur_case("leaf", 1024, 768, "float32", 0.0063728, slow=True,
                why="About 0.89. " + CONV_WINDOWS),
     lambda: gaussian_blur_mk1(1024, 768, "float32")),
]


def run_case(case, workload):
    """(estimate, ratio) of one case."""
    estimate = float(workload())
    return estimate, estimate / case.published


def format_row(case, estimate, ratio):
    kind = "yes" if case.independent else "no"
    return (f"{case.name:42s} {estimate:12,.0f} {case.published:12,.0f} {ratio:6.2f} "
            f"{kind:>5s}  {case.source}")


def print_table(rows):
    print(f"\n{'case':42s} {'estimate':>12s} {'published':>12s} {'ratio':>6s} "
          f"{'indep':>5s}  source")
    for case, estimate, ratio in rows:
        print(format_row(case, estimate, ratio))


@pytest.mark.parametrize("case,workload", case_params(CASES))
def test_estimate_is_within_the_case_band(case, workload, capsys):
    estimate, ratio = run_case(case, workload)
    with capsys.disabled():
        print_table([(case, estimate, ratio)])
    low, high = case.band
    assert low <= ratio <= high, (
        f"{case.name}: estimate {estimate:,.0f} cycles is {ratio:.2f}x the published "
        f"{case.published:,.0f} ({case.source}); expected a ratio in {case.band}.")
