"""Memory fidelity: whether a program fits one IPU, and how many bytes it takes, next to
what Graphcore published.

Each case is a published claim about a program ipu_keras can build (`memory_workloads.py`
rebuilds it): that it fits one Mk2 IPU or does not (a compile that succeeded, or Poplar's
out-of-memory error), or a figure Poplar's memory report gave for it (the total of
every tile's memory excluding gaps, as `assert_total_tile_memory` of Graphcore's
TensorFlow tests sums it). The simulator compiles the program for the same target and
must agree: no `OutOfTileMemoryError` for "fits", one for "does not fit", and our
`total_bytes` within the case's band of the published figure. The memory model is never
tuned to these figures; it derives from the machine and from Poplar's and poplibs'
public rules (`compiler/passes/memory.py`, `planner.py`).

`CASES` is the table the test runs; `OPEN_CASES` holds the published claims the
simulator does not yet meet, each with what it gives and why (not run by the test; the
bench prints them). `bench/memory_fit.py` prints both tables.

Sources (commit-pinned):
* EX = github.com/graphcore/examples @ 3cc8f81f13728dd8c17d0d3c8d2fc1549b159485
  (its PopART ResNeXt-101 example, removed before that commit, @
  870b08a919ae77a134b53bb9ee856657006561bd)
* TU = github.com/graphcore/tutorials @ 60f38fdb24f036e916666622f354a4493d8c9e02
  (October 2021, the last version of tut4 whose out-of-memory example prints figures)
* TF = github.com/graphcore/tensorflow @ b2127bbabc09ef32150efdf468e3edf3c90ef460
  (Graphcore's own tests of their IPU TensorFlow: the figures are what Poplar's report
  gave for those programs on an IPU Model of Mk2 tiles, 1472 of them where the test
  says so and otherwise the 8 of Graphcore's test environment, asserted to 1%, 10% or
  20%)
"""
import dataclasses
import functools

import pytest

from tests.fidelity import case_params, memory_workloads as work

EX = "graphcore/examples@3cc8f81"
TF = "graphcore/tensorflow@b2127bb"
CLOSE = (0.75, 1.25)
"""Issue 33's band, as for the cycle cases: a published figure within 25%."""
TUT4 = EX + ":tutorials/tutorials/poplar/tut4_profiling"
SIZE = TF + ":tensorflow/compiler/plugin/poplar/tests/size_speed_tests"
COMBINED = SIZE + "/combined_weights_test.py"
COMBINED_1472 = ("graphcore/tensorflow@d37867e:tensorflow/compiler/plugin/poplar/tests/"
                 "size_speed_tests/combined_weights_test.py")
AVAILABLE_MEMORY = EX + ":tutorials/tech_notes_code/available_memory"
CNNS = EX + ":vision/cnns/tensorflow2"
RESNEXT101 = "graphcore/examples@870b08a:vision/resnext_inference/popart"
TUTORIALS = "graphcore/tutorials@60f38fd"
FUNCTIONAL = TF + ":tensorflow/python/ipu/tests/functional_ops_test.py"
PRIORITY = (TF + ":tensorflow/compiler/plugin/poplar/tests/allocation_finder_priority_test.py"
            " (AllocationFinderPriorityTest.testMatmulAndEmbedding)")
OUTLINED = FUNCTIONAL + " (FunctionalOpsTest.testFunctionInferenceWithVariableScope)"
OUTLINED_WHY = (
    "An outlined function (matmul of a [64, 64] float32 input by its own weights, add, "
    "sigmoid) called twice, on the 8-tile IPU Model without code. Ours about 1.13, at "
    "the first call: the streamed input it keeps for later, the function's copies of "
    "its operands, the matmul's own function's copies of them (IPU TensorFlow outlines "
    "every dot, memory.py) and the matmul's plan, which cuts the 64-deep contraction 4 "
    "ways over 2 output chunks (14 KB of temporaries a tile); 1.05 without the dot's "
    "copies. It was 1.29 while a call's operands "
    "stayed live through its body and its results through it too: a call copies its "
    "operands into the body's own inputs, those it reads last die once copied, and its "
    "results are written when the body's outputs are copied out (memory.py, "
    "`_Liveness._control_step`). Their tolerance 10%.")

OUTLINED_TRAINING_WHY = (
    "An outlined function sigmoid(lhs @ rhs + a) called twice with [64, 64] float32 "
    "weights as its rhs (x = f(a, w0, b); x - f(x, w1, c)), the logits' mean sparse "
    "softmax cross-entropy and one GradientDescent step, on the 8-tile IPU Model without "
    "code (their tolerance 10%); the backward pass calls the functions' gradients. Ours "
    "about 1.14 for both figures (1.08 without the products' own function copies), its "
    "peak the first gradient call: the forward calls' saved activations and the "
    "incoming gradient beside the body's two products (the gradients of lhs and rhs), "
    "the copies of their operands and their plans' temporaries.")


@dataclasses.dataclass(frozen=True)
class MemoryCase:
    """One published claim: `fits` (True/False) and maybe `published` bytes, of all
    tiles together (`figure` "total") or of the busiest tile ("max_tile"); `band`
    bounds our figure / published."""

    name: str
    source: str
    why: str
    fits: bool = True
    published: float = None
    figure: str = "total"
    band: tuple = CLOSE
    slow: bool = False


def run_case(case, workload):
    """(fits, our total bytes (None if it does not fit), our busiest tile's bytes: the
    out-of-memory error's if it does not fit) of one case."""
    memory = workload()
    return not memory.get("out_of_memory"), memory["total_bytes"], memory["max_tile_bytes"]


def ours(case, total, max_tile):
    """Our figure of the kind the case publishes."""
    return max_tile if case.figure == "max_tile" else total


def agrees(case, fits, total, max_tile):
    if fits != case.fits:
        return False
    if case.published is None:
        return True
    low, high = case.band
    figure = ours(case, total, max_tile)
    return figure is not None and low <= figure / case.published <= high


def both_figures(name, source, why, total, max_tile, workload):
    """Two rows for a program whose all-tiles and busiest-tile bytes are both published
    (`name` ends with where it ran, in brackets); they share one compile."""
    workload = functools.cache(workload)
    where = name[name.rindex(" ("):]
    name = name[:-len(where)]
    return [(MemoryCase(f"{name}, all tiles{where}", source,
                        f"{why} All tiles: {total:,} bytes.", published=total), workload),
            (MemoryCase(f"{name}, busiest tile{where}", source,
                        f"{why} The busiest tile: {max_tile:,} bytes.", published=max_tile,
                        figure="max_tile"), workload)]


# -- the table -------------------------------------------------------------------------

SERIALIZED = (
    "x[30522, 768] + concat of 6 outlined y-slice @ z products, float16 (IPU TensorFlow's "
    "test asserts both figures to 1%). IPU TensorFlow's SliceOptimizer turns the add of "
    "the concatenation into six slice applies, each adding one product into its rows of x "
    "in place as soon as the product exists (driver/passes/slice_optimizer.cc; "
    "`compiler/passes/slice_apply.py`), so one product lives at a time beside x, y and z, "
    "with its call's copies and its plan's temporaries. The slices and the concatenation "
    "are views. Ours about 1.00 for both; 1.06 while a call's operands stayed live "
    "through its body (they die once copied in: memory.py, `_Liveness._control_step`), "
    "1.36x with the six products alive together until the add, 1.48x also without the "
    "add written in place, 3.3x also with the concatenation a copy.")

CASES = [
    (MemoryCase(
        "tut4 two fp32 matmuls fit (hw)", TUT4 + "/tut4_ipu_hardware.cpp and README.md",
        "Poplar tutorial 4 on IPU hardware: m4 = m1[900x600] @ m2[600x300], "
        "m5 = m4 @ m3[300x200], float variables mapped linearly; the tutorial runs it and "
        "profiles it. Ours: the same products of float32 variables, code compiled."),
     lambda: work.two_matmuls((900, 600), (600, 300), (300, 200))),
    (MemoryCase(
        "Keras MNIST CNN, batch 64, fits (hw)",
        EX + ":tutorials/tutorials/tensorflow2/keras/README.md",
        "Graphcore's Keras tutorial trains its CNN (conv 32, pool, conv 64, pool, dropout, "
        "dense 10; float32, SGD) with batch 64 on one IPU and prints the epochs. Ours: one "
        "step of the same model through ipu_keras's `fit`."),
     work.mnist_cnn_training),
    (MemoryCase(
        "ResNeXt-50 fp32 inference, batch 20, amp 0.35, fits (hw)",
        AVAILABLE_MEMORY + "/tests/pytorch/test_all.py (test_run_demo_fits) and "
        "pytorch_demo.py",
        "Graphcore's test of the availableMemoryProportion tech note runs torchvision's "
        "resnext50_32x4d for inference, float32, batch 20 (the demo's default) with "
        "availableMemoryProportion 0.35 on one IPU and expects a throughput line, i.e. it "
        "fits. Ours: the same network from Keras layers (grouped 3x3 convs, batch norm "
        "in inference), compiled with the same proportion for convs and matmuls.",
        slow=True),
     lambda: work.resnext50_inference(20, 0.35)),
    (MemoryCase(
        "ResNeXt-101 fp16 inference, batch 64, amp 0.3, fits (hw)",
        RESNEXT101 + "/test_resnext101.py and resnext101.py",
        "Graphcore's PopART bulk-inference example runs resnext101_32x4d converted to "
        "float16 (convertFloatsToHalfs), half partials, availableMemoryProportion 0.3 on "
        "every convolution, micro-batch 64 on each of 4 IPUs, one IPU per session; its "
        "test expects every process to exit 0, i.e. it fits. Ours: the same network from "
        "Keras layers in float16 on one IPU (its classifier's matmul takes 0.3 too, "
        "PopART's default 0.6: the peak is not there). A check from the other side of the "
        "ResNeXt-50 out-of-memory case below: ours is about 0.55 MB here and 0.56 MB there, "
        "so no uniform addition of memory makes both claims hold.", slow=True),
     lambda: work.resnext101_half_inference(64, 0.3)),
    (MemoryCase(
        "ResNet-50 fp16 inference, batch 32, amp 0.2, fits (hw)",
        CNNS + "/configs.yml (resnet50_infer_bs32) and benchmarks.yml "
        "(tf2_resnet50_serving_throughput)",
        "Graphcore's TensorFlow 2 ResNet-50 serving benchmark runs the config "
        "resnet50_infer_bs32 on one IPU: batch 32, precision 16.16, half partials, "
        "available-memory-proportion 20 (%), no pipeline. Ours: Keras's ResNet50 in "
        "float16 with the same options (the config's other memory savers, 8-bit "
        "transfers and exchange optimised for memory, left out: they only save memory).",
        slow=True),
     lambda: work.resnet50_half_inference(32, 0.2)),
    (MemoryCase(
        "3 fp16 dense layers, training, batch 2 (IPUModel)",
        SIZE + "/matmul_size_test.py (MatMulSizeTest.testTrainingBs2)",
        "The same network and one GradientDescent step, batch 2: 16,126,623 bytes. The "
        "kernel and its gradient are 6.4 MB of it. Ours about 0.95 (0.87 before each "
        "product's function copied its operands in: memory.py), its peak the first "
        "kernel's k = 2 weight gradient, which keeps float partials (6.4 MB): unlike the "
        "batch-1 outer product, poplin's fully-connected weight update fits a deeper "
        "contraction to the forward pass's channel grouping (lib/poplin/ConvModel.cpp, "
        "getFullyConnectedWUMethod); without those partials ours would be 0.64.",
        published=16_126_623),
     lambda: work.three_dense_layers(2, train=True)),
    (MemoryCase(
        "tut4 two fp32 matmuls, total (IPUModel)", TUT4 + "/screenshots/PopVision_GA_memory.png "
        "('Memory Excluding Gaps 59,894,241 B'; Poplar 2.0.0, Mk2 IPU Model, no code)",
        "All tiles' memory of tut4's program. Ours is about 0.85 (busiest tile 35 KB "
        "against about 41.7 kB read off the plot), 0.80 without the copies of the "
        "products' operands that IPU TensorFlow's function calls make (memory.py): "
        "this Poplar program makes none, but ours is its TensorFlow translation, whose "
        "dots IPU TensorFlow outlines. It was 1.76x when our plans cut the "
        "outputs in flat chunks of whole rows and split k up to 46 ways, each tile "
        "holding float partials of its whole chunk; the planner's 2-d blocks, as "
        "poplin's, hold far fewer.",
        published=59_894_241),
     lambda: work.two_matmuls((900, 600), (600, 300), (300, 200), code=False)),
    (MemoryCase(
        "ResNet-18 without batch norm, training (IPUModel)",
        SIZE + "/resnet_size_test.py (Resnet18_No_Batchnorm.testTraining)",
        "The same with one GradientDescent step: 39,743,117 bytes. Ours about 0.87 "
        "(1.7x when plans cut flat chunks with padded partials, as in the inference case).",
        published=39_743_117),
     lambda: work.resnet18_no_batchnorm(train=True)),
    (MemoryCase(
        "ResNet-50 fp16 training, batch 16, recomputation, fits (hw)",
        CNNS + "/configs.yml (resnet50_mlperf_bs16) and normalization/batch_norm.py",
        "Graphcore's MLPerf ResNet-50 config trains batch 16 per IPU (precision 16.16, "
        "half partials, availableMemoryProportion 0.2, SGD with momentum, their "
        "custom_batch_norm: a fused batch norm on the float16 activations) with four "
        "pipeline stages split after conv2_block1_out, conv2_block3_out and "
        "conv3_block4_out, all on IPU 0 (device-mapping [0, 0, 0, 0], Sequential, 9 "
        "micro-batches per update) and recomputation. Ours: the same pipeline of Keras's "
        "ResNet50 (its batch norms replaced by TensorFlow's fused batch norm) with "
        "`allow_recompute`: the backward passes of stages 0-2 recompute what they read "
        "from the stage inputs (the Sequential schedule's interleaved mode), about 0.55 MB "
        "on the busiest tile, out of memory without recomputation. Left out: "
        "the config's memory savers that only lower it further (8-bit transfers, exchange "
        "optimised for memory) and the batch norms' moving statistics (per channel).",
        slow=True),
     lambda: work.resnet50_half_pipelined_training(16, 0.2)),
    (MemoryCase(
        "ResNet-18 without batch norm, inference (IPUModel)",
        SIZE + "/resnet_size_test.py (Resnet18_No_Batchnorm.testInference)",
        "float16, batch 1, 224x224x4: 25,260,426 bytes (their tolerance 10%). Ours about "
        "0.83: each tile of a convolution's plan receives its input window, the kernel's "
        "reach beyond its run of output positions (`compiler/passes/conv_windows.py`); "
        "0.71 without those halos, 1.9x when the 7x7 stem conv's plan split k 7 ways over "
        "1372 tiles, each holding float partials of a 4102-output flat chunk.",
        published=25_260_426),
     lambda: work.resnet18_no_batchnorm(train=False)),
    (MemoryCase(
        "3 fp16 dense layers, training, batch 1 (IPUModel)",
        SIZE + "/matmul_size_test.py (MatMulSizeTest.testTrainingBs1)",
        "7,738,391 bytes; ours about 1.04. Its forward products are dots by a vector, "
        "which IPU TensorFlow makes multiplies and reduces, not function calls (ops/nn.py, "
        "`_matmul_is_function`), and this figure is why a call's duplicated output is not "
        "charged (memory.py). It was 1.78 when the kernel gradient, a k = 1 "
        "outer product, held a float partial per output (6.4 MB): poplin's OuterProduct "
        "vertex writes the half output itself (planner.py, `partial_bytes`); 1.32 when "
        "the SGD update received the whole gradient onto the variable's tiles (3.1 MB): "
        "the weight now lives where its gradient is computed, as IPU TensorFlow lays it "
        "out for its product and poplin's jointly planned weight update writes that "
        "layout (tile_map.py, `_lay_out_updated_variables`). The scaled gradient is "
        "written in place of the gradient (memory.py, IPU TF's InplaceFinder).",
        published=7_738_391),
     lambda: work.three_dense_layers(1, train=True)),
    (MemoryCase(
        "3 fp16 dense layers, inference, batch 2 (IPUModel)",
        SIZE + "/matmul_size_test.py (MatMulSizeTest.testInference)",
        "float16 x[2, 50176] through dense 32, 64, 64 (bias, relu) and softmax "
        "cross-entropy: 12,181,182 bytes over the tiles (IPU Model of 1472 tiles, code not "
        "compiled). Ours about 1.22, the peak the first layer, 0.96 without its "
        "function's copy of the kernel (3.2 MB, memory.py): poplin plans a matmul with "
        "its operands swapped unless the other way is faster even with its input, weights "
        "and output rearranged (planner.py, `orient_matmul`), so the batch of 2 becomes "
        "output channels, padded to the AMP's channel groups in the partials. Ours was 0.69 "
        "with the batch as the field: 3.2 MB fewer partials.",
        published=12_181_182),
     lambda: work.three_dense_layers(2, train=False)),
    *both_figures(
        "serialized fp16 matmul, 6 outlined slices (IPUModel)",
        SIZE + "/matmul_size_test.py (MatMulSizeTest.testSerializedMatmul)",
        SERIALIZED, 126_942_643, 86_813, work.serialized_matmul),
    (MemoryCase(
        "10 fp16 dense layers, inference, batch 16 (8-tile IPUModel, code)",
        COMBINED + " (CombinedWeightsTest.testMergedWeightDownload)",
        "float16 x[16, 4] through ten xw_plus_b layers of 256 units and softmax "
        "cross-entropy, code compiled: 1,559,766 bytes over the tiles (their tolerance "
        "10%). The test sets no tile count: it runs on the IPU Model of 8 tiles that "
        "Graphcore's test environment has used by default since graphcore/tensorflow@"
        "c5c734b ('Make tests use 8 tiles for IPUModel by default', the commit that set "
        "this figure). The weights are 1,186,816 of the bytes. Ours about 1.02 (0.95 "
        "without the products' function copies, memory.py).",
        published=1_559_766),
     lambda: work.ten_dense_layers(8)),
    (MemoryCase(
        "10 fp16 dense layers, inference, batch 16 (IPUModel, code)",
        COMBINED_1472 + " (CombinedWeightsTest.testMergedWeightDownload)",
        "The case above on the IPU Model's standard 1472 tiles, as the test ran until "
        "graphcore/tensorflow@c5c734b moved it to 8 tiles: 9,052,606 bytes (their "
        "tolerance 10%; 8.6-9.1 MB in every version since May 2020). Each tiny product "
        "is planned over about 1,400 tiles, so most of the bytes are what every tile "
        "holds to run them: code, vertex state, control and exchange code. Ours about "
        "1.07 (1.05 without the products' function copies) since vertex code is counted "
        "from poplibs' assembly (memory.py, `CODELET_INSTRUCTIONS`: the AMP's "
        "ConvPartial1x1Out 1,040 bytes, ReduceAdd 444, a binary op 344); 1.35 with the "
        "earlier estimates (2,000, 800 and 600), which also made the 1,464 tiles the two "
        "figures differ by cost 7.3 KB each against the published 5.1 KB.",
        published=9_052_606),
     lambda: work.ten_dense_layers(1472)),
    *both_figures(
        "outlined dense function called twice (8-tile IPUModel)", OUTLINED, OUTLINED_WHY,
        204_616, 25_647, work.outlined_dense_pair),
    *both_figures(
        "outlined function called twice, trained (8-tile IPUModel)",
        FUNCTIONAL + " (FunctionalOpsTest.testFunctionTraining)", OUTLINED_TRAINING_WHY,
        278_188, 35_069, work.outlined_pair_training),
    *both_figures(
        "outlined function of split weights, trained (8-tile IPUModel)",
        FUNCTIONAL + " (FunctionalOpsTest.testFunctionTrainingConstants)",
        "The case above with the function multiplying by the two halves of its weights' "
        "columns and concatenating the products, a view of them in ours "
        "(`compiler/passes/views.py`). Ours about 1.00 for all tiles and 0.97 for the "
        "busiest.", 290_009, 37_483,
        lambda: work.outlined_pair_training(split=True)),
    *both_figures(
        "nested outlined functions, trained (8-tile IPUModel)",
        FUNCTIONAL + " (FunctionalOpsTest.testNestedFunctionTraining)",
        "An outlined sigmoid of an outlined x @ w + bias, each of the two calls with its "
        "own [64, 64] and [64] float32 variables, and the same training step: the "
        "gradient's calls nest as the forward's do. Ours about 1.15 for all tiles and "
        "1.09 for the busiest.", 262_108, 34_774, work.nested_outlined_training),
    *both_figures(
        "broadcast input times weights, then times an input (8-tile IPUModel)",
        TF + ":tensorflow/compiler/plugin/poplar/tests/matmul_graph_caching_test.py "
        "(MatMulGraphCachingTest.testMatMulBroadcast)",
        "A float16 [1024] input broadcast to [1024, 1024] times [1024, 1024] weights, then "
        "a [1024, 1024] input times that product (their tolerance 1%). The busiest tile "
        "holds far more than a tile's 638,976 bytes, and the test runs: the IPU Model "
        "reports a tile out of memory but does not stop on it (memory.py, `check_memory`; "
        "ours stopped until then). Ours about 0.96 for both figures, the peak the second "
        "product beside the weights, its operands, their copies in its function (IPU "
        "TensorFlow outlines every dot, the test's subject: memory.py) and its plan's "
        "temporaries; 0.81 without the copies.",
        13_796_576, 1_732_922, work.broadcast_matmul_pair),
    *both_figures(
        "two convs of a broadcast image (8-tile IPUModel)",
        TF + ":tensorflow/compiler/plugin/poplar/tests/conv_graph_caching_test.py "
        "(ConvGraphCachingTest.testConvolutionsWithBroadcast)",
        "A float32 [2] input broadcast to a [2, 256, 256, 2] image and to [2, 2, 2, 2] "
        "weights, and two 'same' convolutions of the image by them (their tolerance "
        "20%). Ours about 1.08 for all tiles and 0.99 for the busiest, the peak either "
        "convolution: its 1 MB input (the first's the broadcast image, written out) and "
        "output beside its plan's temporaries.",
        2_942_155, 401_526, work.broadcast_convs),
    *both_figures(
        "serialized float16 lookup, 10 outlined slices (8-tile IPUModel)",
        FUNCTIONAL + " (FunctionalOpsTest.testFunctionSerializedLookup)",
        "A [20000, 128] float16 table streamed in and looked up at 20 indices by one "
        "outlined function per slice of 2000 rows, each shifting the indices, gathering and "
        "masking the rows outside its slice, the slices' results summed (their tolerance "
        "10%). The streamed table is most of it (5.1 MB, 640 KB a tile: more than a tile "
        "holds, which the IPU Model runs, as above). Ours about 0.88 for both figures.",
        6_415_442, 802_278, work.serialized_lookup),
    *[(MemoryCase(
        f"embedding and matmul sharing weights, {which} transposed (8-tile IPUModel)",
        PRIORITY, "Float16 weights [20000, 128] shared by an embedding lookup of 50 ids and "
        "the product of its rows by the weights (logits [50, 20000]), on the 8-tile IPU "
        "Model with code; the test runs it with the transpose on the product and on the "
        "lookup, and asserts the same 19,343,192 bytes of all tiles for both (their "
        "tolerance 10%). Ours about 0.93 for both, the peak the product: the weights "
        "(5.1 MB), their copy in the product's function (IPU TensorFlow outlines every "
        "dot and each call copies its operands in: memory.py) and the plan's 7.7 MB (no "
        "plan fits 0.6 of a tile on 8 tiles, so as poplin the bound doubles to 767 KB a "
        "tile). Both give the weights the product's layout, as IPU TensorFlow's "
        "allocation finder does (a dot's operand outranks a lookup's: "
        "allocation_finder.cc, GetFixedAllocationPriority). Without the function's copy "
        "ours was 0.66 with the product transposed, and 0.79 with the lookup transposed, "
        "in the band only by our transpose's copy of the weights, where IPU TensorFlow's "
        "transpose is a view (visitor_full.cc, HandleTranspose: a dimShuffle); that copy "
        "dies before the product and no longer counts.",
        published=19_343_192),
      functools.partial(work.shared_embedding_weights, which == "the product"))
      for which in ("the product", "the lookup")],
]


OPEN_CASES = [
    (MemoryCase(
        "tut4 with m1 9000x6000: OOM, 674,752 B on tile 1 (hw)",
        TUTORIALS + ":tutorials/poplar/tut4_profiling/README.rst ('Profiling an Out "
        "Of Memory program')",
        "The tutorial's out-of-memory example until November 2021: m1 [9000, 6000] and "
        "m2 [6000, 300] on Mk2 hardware stop Poplar with 'Out of memory on tile 1: 674752 "
        "bytes used but tiles only have 638976 bytes of memory'. Ours fits: 549,508 bytes "
        "on the busiest tile (0.81 of the figure; 0.59 before the function copies): m1's "
        "share, its copy in the product's function (memory.py), the swapped plan's "
        "temporaries and code. Ours is the program's TensorFlow translation: IPU "
        "TensorFlow's allocation finder creates m1 in the plan's layout and its function "
        "call copies it in. The Poplar program maps m1 linearly instead, and poplin copies "
        "it into the plan's layout as its tile mapping does not hold whole channel groups "
        "(lib/poplin/Convolution.cpp, rearrangeActs; mapTensorLinearly gives each tile "
        "36,684.8 elements): a copy of m1 too, in another layout, which ours cannot "
        "express. The figure is older than the SDK our model follows (poplibs 7eac0f2, "
        "SDK 3.x): the text is in the tutorials' first commit (fcd2a67, June 2021, "
        "SDK 2.1), and their update for SDK 2.3 (42bf70f, November 2021) enlarged m1 by "
        "a quarter to 9000x7500 to keep the example out of memory (the case below, which "
        "ours meets), with another error. That is evidence the later SDK fits this "
        "program, as ours does, but no source says so: the claim stays open.",
        fits=False, published=674_752, figure="max_tile"),
     lambda: work.two_matmuls((9000, 6000), (6000, 300), (300, 200))),
    (MemoryCase(
        "tut4 with m1 9000x7500 does not fit (hw)", TUT4 + "/README.md ('Profiling an out of "
        "memory program')",
        "The tutorial's example since November 2021 (SDK 2.4): m1 [9000, 7500], "
        "m2 [7500, 300] on hardware stop Poplar with 'Out of memory: Cannot fit all "
        "variable data onto one or more tiles'. Ours does not fit either: 663,736 bytes on "
        "the busiest tile (m1's share, its copy in the product's function, the plan's "
        "temporaries, code; 474 KB, fitting, before the function copies). As in the case "
        "above, the copy of m1 that the TensorFlow translation makes stands where the "
        "Poplar program makes poplin's rearranged copy, so this verdict agrees by an "
        "analogous copy, not the same one: the case stays open.", fits=False),
     lambda: work.two_matmuls((9000, 7500), (7500, 300), (300, 200))),
    (MemoryCase(
        "ResNeXt-50 fp32 inference, batch 20, amp 0.8, does not fit (hw)",
        AVAILABLE_MEMORY + "/tests/pytorch/test_all.py (test_run_demo_oom_string)",
        "The demo's defaults (batch 20, availableMemoryProportion 0.8) must fail with "
        "'Out of memory on tile'. Ours fits at 0.8: 562,296 bytes on the busiest tile "
        "(432,880 at 0.35): 68 KB of weights, 42 KB of code and 452 KB of activations, "
        "their copies in a convolution's function (memory.py) and its plan's "
        "temporaries, 77 KB short of a tile. Before the function copies it was 518,364, "
        "at the first 1x1 convolution of stage 2 (256 -> 256 channels of [20, 56, 56] "
        "float32), whose plans within 3.5% of the fastest cycles span 134-349 KB of "
        "temporaries. The 0.8 budget (511 KB of temporaries) does not bind: every "
        "convolution takes its fastest plan. The claim needs the plan poplin picks there, "
        "which no public source gives; a uniform addition of memory would break the "
        "ResNeXt-101 case "
        "above.", fits=False, slow=True),
     lambda: work.resnext50_inference(20, 0.8)),
]


def format_row(case, fits, total, max_tile, width=58):
    where = " a tile" if case.figure == "max_tile" else ""
    claim = ("fits" if case.fits else "does not fit") if case.published is None else (
        f"{case.published:,.0f} B{where}" + ("" if case.fits else ", OOM"))
    figure = ours(case, total, max_tile)
    mine = ((f"{figure:,.0f} B{where}" if figure else "") + ("" if fits else ", OOM")
            if case.published is not None else ("fits" if fits else "does not fit"))
    ratio = f"{figure / case.published:5.2f}" if case.published and figure else "  -  "
    tile = f"{max_tile:,.0f}" if max_tile else "-"
    verdict = "yes" if agrees(case, fits, total, max_tile) else "NO"
    return (f"{case.name:{width}s} {claim:>22s} {mine:>22s} {ratio} {tile:>9s} {verdict:>5s}  "
            f"{case.source}")


def print_table(rows, title="memory cases"):
    width = max([len(row[0].name) for row in rows] + [58])
    print(f"\n{title}\n{'case':{width}s} {'published':>22s} {'ours':>22s} {'ratio':5s} "
          f"{'max tile':>9s} {'agree':>5s}  source")
    for case, fits, total, max_tile in rows:
        print(format_row(case, fits, total, max_tile, width))


@pytest.mark.parametrize("case,workload", case_params(CASES))
def test_the_simulator_agrees_with_the_published_claim(case, workload, capsys):
    fits, total, max_tile = run_case(case, workload)
    with capsys.disabled():
        print_table([(case, fits, total, max_tile)])
    assert fits == case.fits, (
        f"{case.name}: published {'fits' if case.fits else 'does not fit'} one IPU "
        f"({case.source}); the simulator says it "
        f"{'fits' if fits else 'does not'} (busiest tile {max_tile} bytes).")
    assert agrees(case, fits, total, max_tile), (
        f"{case.name}: our {case.figure} bytes {ours(case, total, max_tile)} against the "
        f"published {case.published:,.0f} ({case.source}); expected a ratio in {case.band}.")

