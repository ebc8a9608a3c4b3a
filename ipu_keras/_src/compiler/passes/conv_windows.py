"""What a convolution's tile reads and how many AMP passes its kernel takes.

Two facts of a forward convolution that its `Problem` as a plain product (field x
kernel volume * input channels by output channels) leaves out, both priced per
candidate plan by `planner.py`:

* **Halos.** A tile computing a run of consecutive output positions reads the input
  window of every one of them: `input_positions` counts the distinct input positions
  (the kernel's extent beyond the run included, as poplin's plan cost counts a tile's
  input: per field dimension, its output range times the stride plus the dilated
  kernel, clipped to the input, PL `lib/poplin/ConvModel.cpp`, `getMaxInputRangeSize`).
  The window is `Problem.window`, (output dims, input dims, kernel extents, strides)
  over (batch, *spatial), from the op's `problem` fact. A run shorter than an output row reads the kernel's height of
  input rows; a longer one reads its rows plus the kernel's extra rows, each input row
  whole.
* **Kernel positions.** poplin's AMP vertex for a kernel larger than 1x1
  (`ConvPartialnx1`) contracts `inChansPerGroup` input channels of `filterHeight`
  kernel rows per pass, `filterHeight` = the weights one conv unit holds / the input
  channel group, and walks the other kernel positions as further passes
  (PL `lib/poplin/PerformanceEstimation.hpp`, `getConvPartialnx1InnerLoopCycleEstimate`;
  the channel groups a pass may take, `ConvVertexType.cpp`,
  `getConvVertexAMPCandidates`: multiples of one 64-bit load that divide the conv
  unit's weights). So 4 input channels of a 3x3 kernel take 3 passes in half (groups of
  4 channels x 4 rows) and 6 in float (4 channels x 2 rows), where folding the whole
  kernel into the contraction would take 3 and 5. `nx1_passes` gives the fewest passes
  over the channel groups poplin may choose, `split_nx1` a tile's share when the
  contraction is split over tiles; `cost.nx1_vertex_cycles` prices them.

PL = github.com/graphcore/poplibs @ 7eac0f26.
"""
import math

import numpy as np

LOAD_ELEMENTS = {"float16": 4, "float32": 2}
"""Published (`ConvVertexType.cpp`): elements of one 64-bit load into the conv units, the
grain of an AMP input channel group (4 half, 2 float)."""


def input_positions(window, run):
    """Distinct input positions (batch x spatial) that `run` consecutive output positions
    read, for an int or array `run`, assuming a run starts at the start of a row when it
    spans rows (see the module docstring)."""
    out_dims, in_dims, extent, strides = window
    run = np.maximum(1, np.asarray(run, np.int64))
    return _positions(run, out_dims, in_dims, extent, strides)


def _positions(run, out_dims, in_dims, extent, strides):
    first, size, reach, step = out_dims[0], in_dims[0], extent[0], strides[0]
    if len(out_dims) == 1:
        return np.minimum(size, (np.minimum(run, first) - 1) * step + reach)
    inner = math.prod(out_dims[1:])
    rows = -(-run // inner)
    within = np.minimum(size, reach) * _positions(np.minimum(run, inner), out_dims[1:],
                                                  in_dims[1:], extent[1:], strides[1:])
    across = np.minimum(size, (np.minimum(rows, first) - 1) * step + reach) * math.prod(
        in_dims[1:])
    return np.where(run <= inner, within, across)


def nx1_passes(kernel_shape, in_channels, dtype, in_group):
    """(input channel groups, kernel row passes, kernel positions per row, filter height)
    of poplin's nx1 vertex over a kernel of `kernel_shape` and `in_channels` input
    channels (per conv group), for conv units holding `in_group` weights: the channel
    group with the fewest passes in all (see the module docstring)."""
    load = LOAD_ELEMENTS["float16" if np.dtype(dtype) == np.float16 else "float32"]
    height, others = kernel_shape[0], math.prod(kernel_shape[1:])
    best = None
    for chans in range(load, in_group + 1, load):
        if in_group % chans:
            continue
        rows = in_group // chans
        plan = (-(-in_channels // chans), -(-height // rows), others, rows)
        if best is None or math.prod(plan[:3]) < math.prod(best[:3]):
            best = plan
    return best


def split_nx1(nx1, k_split):
    """The nx1 passes one tile of a `k_split`-way split of the contraction makes: the
    input channel groups divided first, then the kernel's row passes (arrays)."""
    groups, rows, cols, height = nx1
    k_split = np.asarray(k_split, np.int64)
    tile_groups = -(-groups // k_split)
    tile_rows = np.where(k_split > groups, -(-rows // -(-k_split // groups)), rows)
    return tile_groups, tile_rows, cols, height
