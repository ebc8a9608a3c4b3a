"""A convolution's input windows (halos) and its nx1 vertex passes (`conv_windows.py`),
against the convolution's own index arithmetic and poplin's channel groups."""
import itertools
import math

import numpy as np
import pytest

from ipu_keras._src.compiler.passes import conv_windows, planner
from ipu_keras._src.device import cost
from ipu_keras._src.device.targets import get_target
from ipu_keras._src.ops.conv import out_spatial
from ipu_keras._src.ops.registry import get_op
from ipu_keras._src.ir.types import TensorType

# (input NHW, kernel, strides, dilations, padding)
CONVS = [
    ((1, 6, 7), (3, 3), (1, 1), (1, 1), ((1, 1), (1, 1))),
    ((2, 9, 5), (3, 3), (2, 2), (1, 1), ((1, 1), (1, 1))),
    ((1, 12, 8), (5, 3), (1, 1), (2, 1), ((0, 0), (0, 0))),
    ((3, 4, 10), (1, 1), (1, 1), (1, 1), ((0, 0), (0, 0))),
]


def _read_positions(x_shape, kernel, strides, dilations, padding):
    """Per output position (row-major over batch x spatial): the set of real input
    positions its window reads, from the convolution's definition."""
    batch, *spatial = x_shape
    out = out_spatial(spatial, kernel, strides, dilations, padding)
    reads = []
    for b, *o in itertools.product(range(batch), *(range(n) for n in out)):
        window = set()
        for k in itertools.product(*(range(n) for n in kernel)):
            i = [oi * s + ki * d - lo for oi, ki, s, d, (lo, _) in
                 zip(o, k, strides, dilations, padding)]
            if all(0 <= a < n for a, n in zip(i, spatial)):
                window.add((b, *i))
        reads.append(window)
    return out, reads


def _window(x_shape, kernel, strides, dilations, padding):
    problem = get_op("conv").problem(
        [TensorType(x_shape + (4,), "float32"), TensorType(kernel + (4, 8), "float32")],
        TensorType((x_shape[0],) + out_spatial(x_shape[1:], kernel, strides, dilations,
                                               padding) + (8,), "float32"),
        {"strides": strides, "dilations": dilations, "padding": padding})
    return problem["window"]


@pytest.mark.parametrize("conv", CONVS, ids=lambda c: f"{c[0]}k{c[1]}s{c[2]}d{c[3]}")
def test_a_run_of_outputs_reads_its_input_window(conv):
    """A run inside one output row, or of whole rows inside one image, reads at most the
    counted window (a range per dimension, as poplin counts it: a dilated kernel's holes
    included); a run anywhere (a plan's chunk starts at a multiple of its length) at most
    one more band of input rows. One position reads its kernel's extent, all of them the
    whole input."""
    out, reads = _read_positions(*conv)
    window = _window(*conv)
    row, image = out[-1], math.prod(out)
    band = conv[0][-1] * ((conv[1][0] - 1) * conv[3][0] + 1)
    for run in range(1, len(reads) + 1):
        counted = int(conv_windows.input_positions(window, run))
        for start in range(0, len(reads) - run + 1):
            real = len(set().union(*reads[start:start + run]))
            inside_row = start % row + run <= row
            whole_rows = start % row == 0 and run % row == 0 and start % image + run <= image
            if inside_row or whole_rows:
                assert real <= counted, (run, start, real, counted)
            if start % run == 0:
                assert real <= counted + band, (run, start, real, counted)
    whole = math.prod(conv[0])
    assert int(conv_windows.input_positions(window, len(reads))) == whole
    extents = [(k - 1) * d + 1 for k, d in zip(conv[1], conv[3])]
    assert int(conv_windows.input_positions(window, 1)) == min(
        math.prod(extents), math.prod(conv[0][1:]))


def test_the_window_of_a_3x3_conv_is_three_rows_of_a_run():
    window = _window((1, 100, 50), (3, 3), (1, 1), (1, 1), ((1, 1), (1, 1)))
    runs = np.array([1, 10, 48, 50, 100, 5000])
    np.testing.assert_array_equal(conv_windows.input_positions(window, runs),
                                  [3 * 3, 3 * 12, 3 * 50, 3 * 50, 4 * 50, 100 * 50])


@pytest.mark.parametrize("kernel, chans, dtype, passes", [
    ((3, 3), 4, "float16", 3),      # 4 channels x 4 rows a pass: 1 x 1 x 3
    ((3, 3), 4, "float32", 6),      # 4 channels x 2 rows: 1 x 2 x 3
    ((1, 1), 64, "float16", 4),     # a 1x1 kernel: whole groups of 16 channels
    ((7, 7), 4, "float16", 14),     # 4 x 4 rows: 2 row passes x 7
    ((3, 3), 1, "float32", 3),      # 2 channels (1 padded) x 4 rows
])
def test_nx1_passes_take_poplins_channel_groups(kernel, chans, dtype, passes):
    in_group = cost.AMP_IN_GROUP[dtype]
    groups, rows, cols, height = conv_windows.nx1_passes(kernel, chans, dtype, in_group)
    assert groups * rows * cols == passes
    assert height * -(-chans // groups) <= in_group * max(1, -(-chans // in_group))
    # never fewer than folding the whole kernel into the contraction would take
    assert passes >= -(-math.prod(kernel) * chans // in_group)


def test_a_k_split_divides_channel_groups_before_kernel_rows():
    nx1 = (2, 3, 3, 1)
    groups, rows, _, _ = conv_windows.split_nx1(nx1, np.array([1, 2, 4, 6]))
    np.testing.assert_array_equal(groups, [2, 1, 1, 1])
    np.testing.assert_array_equal(rows, [3, 3, 2, 1])


def test_the_blur_plan_pays_its_halos_and_a_sixth_float_pass():
    """The 4-channel 3x3 blur of the fidelity cases: each tile receives about 3x its own
    share of the image, and float costs more per pass than folding 36 into 5 passes."""
    target = get_target("ipu1")
    args = ([TensorType((1, 302, 499, 4), "float32"), TensorType((3, 3, 4, 4), "float32")],
            TensorType((1, 302, 499, 4), "float32"),
            {"strides": (1, 1), "dilations": (1, 1), "padding": ((1, 1), (1, 1))})
    problem = planner.Problem(**get_op("conv").problem(*args))
    plan = planner.choose_plan(problem, planner.PlanOptions(), target, "conv")
    share = 302 * 499 * 4 * 4 / plan.tiles
    assert 2.5 * share < plan.receive_bytes < 3.5 * share + 36 * 4 * 4
    folded = planner.Problem(**{**get_op("conv").problem(*args), "window": (), "kernel": ()})
    assert plan.compute > planner.choose_plan(folded, planner.PlanOptions(), target,
                                              "conv").compute
