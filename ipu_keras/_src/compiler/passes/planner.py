"""The matmul, convolution and gather planners: how one op is spread over tiles.

A matmul-shaped op (`matmul`, `conv`, `conv_input_grad`, `conv_filter_grad`, or any op
registered with mapping "matmul") is described as a `Problem`: `groups` independent
products of an `m x k` by a `k x n` matrix (batch for matmuls, conv groups for
convolutions; for a convolution `m` is the field, batch x output positions, `k` is
kernel volume x input channels and `n` the output channels). A candidate `Plan` cuts
the product's output into blocks, flat chunks of consecutive elements or 2-d blocks of
rows x columns (`plan_blocks.py`), and splits k: each tile receives the operand rows
and columns of its block for its slice of k (the operand copies), multiplies them
on the AMP into partials, and when k is split (or the blocks are 2-d) the partials are
exchanged and reduced in a second superstep, after which each tile owns a contiguous
`per_tile` range of the output: the output's linear mapping is what the plan leaves,
so what a tile is charged is what its output range needs. A plan may also split a
block's columns into serial passes that reuse the same temporaries (Poplar's
serial splits): less memory, more cycles. For every candidate we
compute, from the target only:

* temporary memory per tile: operand copies + partials (+ received partials when k
  is split; the two phases do not overlap, so it is the larger of the two), plus the
  copies of operands that poplin rearranges (`_copied`: always those
  `Problem.rearranged` names, and an operand the plan broadcasts to more than
  `MAX_BROADCAST_DESTINATIONS` tiles unless it was created in the plan's layout,
  `Problem.allocated`); only the tiles
  that own output elements receive partials, so the others are charged less
  (`Plan.tile_temp_bytes`);
* cycles: exchange of the operand blocks at `exchange_bytes_per_cycle`; per serial
  pass, the busiest tile's AMP vertex (`cost.amp_vertex_cycles`, poplin's estimate: its
  block's depth and channels rounded up to whole input x output channel groups at the
  target's rate for the input dtype and partials type, per-pass supervisor overheads,
  weight loads and the workers' pipeline fill; the vector path when that is cheaper);
  reduction exchange and vector adds; the rearrangement copies and their exchange
  (`_rearrangements`, poplin's transform estimate); one sync per superstep
  (`device/cost.py`).
  So a plan whose blocks fill the AMP's channel groups can beat one that moves fewer
  bytes: the planner minimises cycles, not traffic.

The contraction is split as poplin splits it (`k_grains`): input channels in whole
grains of the AMP's input channel group, times the kernel's outer rows, never finer.

A forward matmul is first oriented as poplin would plan it (`orient_matmul`): with its
operands swapped, its rows as output channels, unless the unswapped product is faster
even when charged the rearrangement of its input, weights and output.

`choose_plan` keeps the fastest plan whose temporaries fit in `availableMemoryProportion`
x `bytes_per_tile` (ties: less memory); if none fits it warns, as Poplar does, and
doubles the bound as poplin does until a plan fits, past twice a tile's memory taking
the fastest plan of all (`memory_bounds`). `partialsType="half"` stores partials
in 2 bytes instead of 4 (it applies to float16 inputs; float32 inputs accumulate in
float32 whatever the option says, as in poplin). An outer product (k = 1) accumulates
nothing: its vertex writes the output's type, with no partials of its own
(`partial_bytes`).

A forward convolution's tile reads the input window of its run of output positions,
halos included, and a kernel larger than 1x1 runs poplin's nx1 vertex, a pass per group
of kernel rows and position (`conv_windows.py`, `Problem.window` and `kernel`). The
gradient convolutions' inputs are still their share of the distinct elements
(`a_scale`, input elements per im2col element), without halos.

Gathers from a table (embeddings) get a `GatherPlan`: the table stays where it is;
the indices are broadcast to the table's tiles, each table tile copies the rows it
holds (on average its share of the output), and the rows are exchanged to the
output's tiles: two supersteps. Batched matmuls are plans over the `groups` axis.
"""
import dataclasses
import functools
import math
import warnings

import numpy as np

from ipu_keras.errors import ConfigurationError
from ipu_keras._src.compiler.passes import conv_windows
from ipu_keras._src.compiler.passes.plan_blocks import candidates, ceil_div as _ceil
from ipu_keras._src.device import cost as cost_model
from ipu_keras._src.ops.registry import get_op

DEFAULT_AVAILABLE_MEMORY_PROPORTION = 0.6
"""Poplar's default `availableMemoryProportion`."""


@dataclasses.dataclass(frozen=True)
class PlanOptions:
    """The planner options of one op family (Poplar's `poplar_options`)."""

    available_memory_proportion: float = DEFAULT_AVAILABLE_MEMORY_PROPORTION
    partials_type: str = "float"

    @classmethod
    def from_poplar_options(cls, options, where="matmuls.poplar_options"):
        """Parses `{"availableMemoryProportion": "0.3", "partialsType": "half"}`.

        Unknown option names are ignored (Poplar has many this simulator does not model).

        Raises:
            ConfigurationError: if a known option has an invalid value.
        """
        options = dict(options or {})
        text = options.get("availableMemoryProportion", DEFAULT_AVAILABLE_MEMORY_PROPORTION)
        try:
            proportion = float(text)
        except (TypeError, ValueError):
            proportion = -1.0
        if not 0.0 < proportion <= 1.0:
            raise ConfigurationError(
                f"'{where}' expected availableMemoryProportion to be a number in (0, 1]. "
                f"Received: availableMemoryProportion={text!r}")
        partials = str(options.get("partialsType", "float")).lower()
        if partials not in ("float", "half"):
            raise ConfigurationError(
                f"'{where}' expected partialsType to be 'float' or 'half'. "
                f"Received: partialsType={options.get('partialsType')!r}")
        return cls(proportion, partials)


@dataclasses.dataclass(frozen=True)
class Problem:
    """`groups` products of (m x k) @ (k x n); scales are distinct operand elements
    per element of the operand matrix (1 for matmuls, < 1 for conv im2col inputs)."""

    groups: int
    m: int
    k: int
    n: int
    dtype: str
    out_itemsize: int
    a_scale: float = 1.0
    b_scale: float = 1.0
    a_grouped: bool = True
    b_grouped: bool = True
    grouped_cols: bool = False    # convolutions: groups lie in the output's channel axis
    rearranged: tuple = ()        # of "a", "b", "out": always copied into the plan's layout
    inputs: tuple = ("a", "b")    # the operand each of the op's inputs is
    allocated: tuple = ()         # of "a", "b": created in the plan's layout (no copy)
    window: tuple = ()            # forward convolutions: their input window (halos)
    kernel: tuple = ()            # forward convolutions: (*kernel shape, input channels)

    @property
    def out_size(self):
        """Elements of the product's output matrix."""
        return self.groups * self.m * self.n

    @property
    def macs(self):
        return self.groups * self.m * self.k * self.n

    def distinct_elements(self, operand):
        """Elements of operand "a", "b" or "out" as tensors (not im2col matrices)."""
        g, m, k, n = self.groups, self.m, self.k, self.n
        if operand == "a":
            return math.ceil((g if self.a_grouped else 1) * m * k * self.a_scale)
        if operand == "b":
            return math.ceil((g if self.b_grouped else 1) * k * n * self.b_scale)
        return self.out_size


@dataclasses.dataclass(frozen=True)
class Plan:
    """One partition of a `Problem` over tiles, with its per-tile cost."""

    kind: str                 # "matmul" or "conv"
    splits: tuple             # (output elements per chunk, k split, serial passes)
    tiles: int                # tiles used
    temp_bytes: int           # temporary bytes per used tile
    receive_bytes: int        # bytes each used tile receives (all phases)
    compute: int              # cycles on the busiest tile
    exchange: int
    supersteps: int
    cycles: int               # compute + exchange + syncs (single-IPU scope)
    fits: bool
    vertex_types: tuple = ("ConvPartial1x1Out",)   # poplibs codelets (`codelets`)
    start: int = 0            # first tile, set when the plan is placed
    per_tile: int = 0         # product output elements each tile owns in the end
    partial_bytes: int = 4    # bytes of one partial sum
    block: tuple = ()         # (rows, cols) of a 2-d block plan's blocks; () for flat chunks
    owners: int = 0           # its first tiles, which own the output (0: all of them)
    idle_temp_bytes: int = 0  # temporary bytes of its other tiles (no partials received)

    @property
    def k_split(self):
        return self.splits[1]

    def tile_temp_bytes(self):
        """Temporary bytes on each of the plan's tiles, from `start`: `temp_bytes` on the
        tiles that own output elements and receive their partials, `idle_temp_bytes` on
        the others, which only send theirs."""
        temp = np.full(self.tiles, self.temp_bytes, np.int64)
        if 0 < self.owners < self.tiles:
            temp[self.owners:] = self.idle_temp_bytes
        return temp

    def to_dict(self):
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class GatherPlan:
    """A table lookup: indices broadcast to the table's tiles, rows sent to the output."""

    kind: str
    tiles: int                # table tiles
    temp_bytes: int
    receive_bytes: int
    compute: int
    exchange: int
    supersteps: int
    cycles: int
    fits: bool = True
    vertex_types: tuple = ("MultiSlice",)
    start: int = 0

    def tile_temp_bytes(self):
        """Temporary bytes on each of the table's tiles, from `start`."""
        return np.full(self.tiles, self.temp_bytes, np.int64)

    def to_dict(self):
        return dataclasses.asdict(self)


# -- problems -----------------------------------------------------------------------------


def problem_of(eqn):
    """The `Problem` of a matmul-mapped equation: the op's own `problem` fact, else one
    from its cost rule (its output's last axis is n, its work per output element k)."""
    ins, out = [v.type for v in eqn.inputs], eqn.outputs[0].type
    problem = get_op(eqn.op).problem
    if problem is not None:
        return Problem(**problem(ins, out, eqn.params))
    n = out.shape[-1] if out.shape else 1
    m = max(1, out.size // max(1, n))
    k = max(1, _work_amount(eqn) // max(1, out.size))
    sizes = [t.size for t in ins] + [1, 1]
    return Problem(1, m, k, n, ins[0].dtype, out.itemsize,
                   min(1.0, sizes[0] / (m * k)), min(1.0, sizes[1] / (k * n)))


def _work_amount(eqn):
    work = get_op(eqn.op).cost([v.type for v in eqn.inputs], [v.type for v in eqn.outputs],
                               **eqn.params)
    return int(work.amount)


def _operand_elements(problem, c, depth):
    """Elements of A (once) and of B (per serial pass) one tile of candidates `c` needs."""
    rt, ct, gt, ss = c.rows, c.cols, c.groups, c.serial
    if problem.grouped_cols:
        a = rt * gt * depth                                  # field rows x their groups
        b = _ceil(ct, ss) * depth
    else:
        a = (rt if problem.a_grouped else np.minimum(rt, problem.m)) * depth
        b = (gt if problem.b_grouped else 1) * depth * _ceil(ct, ss)
    b = np.ceil(b * problem.b_scale).astype(np.int64)
    if problem.window:
        # A convolution's rows read their input windows, halos included: `depth /
        # kernel volume` channels of each group touched per input position.
        positions = conv_windows.input_positions(problem.window, rt)
        a = positions * gt * depth / math.prod(problem.kernel[:-1])
        return np.minimum(problem.distinct_elements("a"), np.ceil(a).astype(np.int64)), b
    return np.ceil(a * problem.a_scale).astype(np.int64), b


def partial_bytes(problem, options):
    """Bytes of one partial sum: for an outer product (k = 1) the input's own size,
    else 2 for half partials of float16 inputs and 4 otherwise.

    A product that contracts one element (k = 1: a matmul's outer product, such as the
    weight gradient of a batch-1 dense layer; a 1x1 convolution of one input channel
    per group) accumulates nothing, and poplin lets its vertex write the input type
    (graphcore/poplibs @ 7eac0f2, lib/poplin/ConvVertexType.cpp: the OuterProduct
    candidate's partials are its input type, narrower than `partialsType` only when
    the input channels per group and the kernel are all 1; the AMP candidates whose
    partials are the output type need the contraction to fit one AMP pass). With no
    reduction and partials of the result type, Convolution.cpp makes no partials
    tensor of its own (`getCreatePartialsLevel` creates them at the top level: they
    are the output) and no cast follows. A deeper contraction keeps `partialsType`
    even when it fits one AMP pass: IPU TensorFlow's matmuls are fully-connected
    passes, and the weight update's vertex follows the jointly planned forward pass
    (ConvModel.cpp, `getFullyConnectedWUMethod` and
    `getFullyConnectedWuConvVertexType`: the OuterProduct only when the contraction
    and the forward output grouping are 1, else an AMP constrained to the forward's
    channel grouping), as Graphcore's published sizes of a dense layer's k = 1 and
    k = 2 weight gradients bear out (tests/fidelity/test_memory_fit.py)."""
    if problem.k == 1:
        return min(np.dtype(problem.dtype).itemsize, 4)
    half = options.partials_type == "half" and problem.dtype == "float16"
    return 2 if half else 4


def codelets(problem, k_split):
    """The poplibs codelets a plan of `problem` runs: the OuterProduct for a contraction
    of one element (`partial_bytes`), else the AMP's ConvPartialnx1 for a kernel larger
    than 1x1 and ConvPartial1x1Out otherwise; and ReduceAdd when the contraction is
    split over tiles (graphcore/poplibs@7eac0f2, lib/poplin/ConvVertexType.cpp and
    ConvReduce.cpp)."""
    if problem.k == 1:
        product = "OuterProduct"
    elif _runs_nx1(problem):
        product = "ConvPartialnx1"
    else:
        product = "ConvPartial1x1Out"
    return (product, "ReduceAdd") if k_split > 1 else (product,)


def _runs_nx1(problem):
    """Whether the AMP runs `problem` with poplin's ConvPartialnx1 vertex: a kernel with
    more than one position outside its innermost dimension (else ConvPartial1x1Out)."""
    return math.prod(problem.kernel[:-1]) > 1


def _evaluate(problem, options, target, tiles):
    """(candidates, temporaries, receive, compute, exchange, supersteps, cycles, idle
    temporaries), arrays over the candidates: temporaries and receive on the busiest
    tile; idle temporaries on a tile that owns no output element, so receives no
    partials (the plan's tiles past the output's `ceil(out_size / owned)`)."""
    c = candidates(problem, tiles, k_grains(problem, options, target))
    sk, ss = c.k, c.serial
    depth, item = _ceil(problem.k, sk), np.dtype(problem.dtype).itemsize
    pbytes = partial_bytes(problem, options)
    a_el, b_el = _operand_elements(problem, c, depth)
    a_bytes, b_bytes = a_el * item, b_el * item
    reduce = sk > 1
    gather = reduce | ~c.aligned
    per_pass = _ceil(c.chunk, ss)
    partials = np.where(gather | (pbytes != problem.out_itemsize), per_pass * pbytes, 0)
    # An owner receives its elements' partials from the block's k tiles: all of them for
    # a 2-d block, all but its own for a flat chunk.
    recv_partials = np.where(gather, c.owned * (sk - c.aligned) * pbytes, 0)
    idle = a_bytes + b_bytes + partials
    temp = np.maximum(idle, partials + _ceil(recv_partials, ss))
    pass_cycles = _amp_pass_cycles(problem, options, c, per_pass, depth, target)
    pass_cycles = pass_cycles + np.where(reduce, cost_model.vector_cycles(
        _ceil(c.owned, ss) * (sk - 1), "float16" if pbytes == 2 else "float32", target), 0)
    exchange = plan_exchange_cycles(a_bytes + ss * b_bytes, recv_partials, ss, target)
    supersteps = ss * np.where(gather, 2, 1)
    compute = ss * pass_cycles
    moved, copy, steps = _rearrangements(problem, c, target)
    temp = temp + moved
    compute, exchange, supersteps = compute + copy[0], exchange + copy[1], supersteps + steps
    cycles = compute + exchange + supersteps * cost_model.sync_cycles(target)
    return c, temp, a_bytes + ss * b_bytes + recv_partials + moved, compute, exchange, \
        supersteps, cycles, idle + moved


REARRANGE_COPY_FACTOR = {True: (5, 4), False: (5, 3)}
"""Published (poplin `ConvModel.cpp`, `getScaleFactorForTransform`): Graphcore's
correction of a rearrangement copy's bytes-per-cycle estimate (bytes x 5 / 4 when the
channels divide the type's copy granularity, 2 float or 4 half, else x 5 / 3)."""


MAX_BROADCAST_DESTINATIONS = 7
"""Published (PL `lib/poplin/Convolution.cpp`, `inViewMaxBroadcastDests` and
`weightViewMaxBroadcastDests`): an operand the plan sends to more tiles than this is
first copied once into the plan's layout, then broadcast, unless it already has that
layout."""


def k_grains(problem, options, target):
    """Most ways poplin splits a product's contraction: its input channels in whole
    grains of the vertex's input channel group, times the kernel's outer rows (poplin
    never splits the innermost kernel dimension). graphcore/poplibs@7eac0f2,
    lib/poplin/ConvModel.cpp: `totalInChanSplit` at most `numInChanGrains`, a kernel
    split at most its kernel dimension, none of the innermost. A product without a
    kernel (a matmul, a gradient convolution) counts its whole contraction as channels."""
    in_group = _in_group(problem, options, target)
    if not problem.kernel:
        return _ceil(problem.k, in_group)
    *outer, _, channels = problem.kernel
    return math.prod(outer) * _ceil(channels, in_group)


def _in_group(problem, options, target):
    """Input channels of one AMP pass for `problem`'s dtype (`cost.amp_groups`)."""
    return cost_model.amp_groups(problem.dtype, target, options.partials_type)[0]


def _copied(problem, c):
    """Per operand "a", "b", "out": per candidate, whether poplin copies it into (out of)
    the plan's layout. Always for those `problem.rearranged` names (a weight-update
    convolution's); else an input operand sent to more than `MAX_BROADCAST_DESTINATIONS`
    tiles, A to each block of output columns, B to each block of output rows, unless it
    was created in the plan's layout (`problem.allocated`: IPU TensorFlow's allocation
    finder lays out a variable or a program input read by the product for it)."""
    copied = {x: np.full(c.used.shape, x in problem.rearranged) for x in ("a", "b", "out")}
    rows = problem.m if problem.grouped_cols or problem.b_grouped else (
        problem.groups * problem.m)
    sent = {"a": _ceil(problem.n, np.minimum(c.cols, problem.n)),
            "b": _ceil(rows, np.minimum(c.rows, rows))}
    for x, dests in sent.items():
        if x not in problem.allocated:
            copied[x] = copied[x] | (dests > MAX_BROADCAST_DESTINATIONS)
    return copied


def _rearrangements(problem, c, target):
    """(bytes each tile receives, [copy cycles, exchange cycles], supersteps) of copying
    the operands and output `_copied` names into or out of the plan's layout, over the
    plan's `used` tiles: poplin's transform estimate (`addTransformCycleEstimate` in
    `ConvModel.cpp`: each tile copies its share at the lesser of the memcpy rate and one
    element per cycle, corrected by `REARRANGE_COPY_FACTOR`, and receives it over the
    exchange). The operands' copies share one superstep before the products, the output's
    one after; each pays a vertex's launch and an exchange's latency, as every step does."""
    used = c.used
    zeros = np.zeros_like(used)
    copied = _copied(problem, c)
    item = np.dtype(problem.dtype).itemsize
    granule = 2 if item == 4 else 4
    num, den = REARRANGE_COPY_FACTOR[problem.n % granule == 0]
    rate = min(target.memcpy_bytes_per_cycle, item)
    moved, copy, exchange, steps = zeros, zeros, zeros, zeros
    for phase in (("a", "b"), ("out",)):
        nbytes = sum(np.where(copied[x], _ceil(problem.distinct_elements(x) * item, used), 0)
                     for x in phase)
        if not np.any(nbytes):
            continue
        moved = moved + nbytes
        copy = copy + np.where(nbytes > 0, cost_model.VERTEX_OVERHEAD_CYCLES
                               + _ceil(nbytes * num, rate * den), 0)
        exchange = exchange + cost_model.exchange_cycles(nbytes, target)
        steps = steps + (nbytes > 0)
    return moved, [copy, exchange], steps


def _amp_pass_cycles(problem, options, c, per_pass, depth, target):
    """Cycles of one serial pass's AMP vertex on a tile: its output block as (conv
    groups, positions, channels per group), contracting `depth` (`cost.amp_vertex_cycles`
    rounds channels up to the AMP's groups)."""
    cols = np.maximum(1, _ceil(c.cols, c.serial))
    if problem.grouped_cols or problem.b_grouped:
        groups = np.where(problem.grouped_cols, _ceil(cols, problem.n), c.groups)
        groups = np.minimum(groups, problem.groups)
    else:
        groups = np.ones_like(cols)
    per_group = np.minimum(cols, problem.n) if problem.grouped_cols else cols
    field = _ceil(per_pass, np.maximum(1, groups * per_group))
    nx1 = None
    if _runs_nx1(problem):
        nx1 = conv_windows.split_nx1(conv_windows.nx1_passes(
            problem.kernel[:-1], problem.kernel[-1], problem.dtype,
            _in_group(problem, options, target)), c.k)
    return cost_model.amp_vertex_cycles(field, depth, per_group, problem.dtype, target,
                                        conv_groups=groups,
                                        partials_type=options.partials_type, nx1=nx1)


def plan_exchange_cycles(operand_bytes, partial_bytes_, serial, target):
    """Exchange cycles of a plan whose busiest tile receives `operand_bytes` over
    `serial` passes (one exchange phase each) and `partial_bytes_` of partials (one
    more phase per pass when k is split)."""
    rate = target.exchange_bytes_per_cycle
    latency = cost_model.EXCHANGE_LATENCY_CYCLES
    operands = np.where(operand_bytes > 0, serial * latency + _ceil(operand_bytes, rate), 0)
    partials = np.where(partial_bytes_ > 0, serial * latency + _ceil(partial_bytes_, rate), 0)
    return operands + partials


def swapped(problem):
    """`problem` with its operands swapped: the transposed product, (n x k) @ (k x m)."""
    names = {"a": "b", "b": "a", "out": "out"}
    return dataclasses.replace(
        problem, m=problem.n, n=problem.m, a_scale=problem.b_scale, b_scale=problem.a_scale,
        a_grouped=problem.b_grouped, b_grouped=problem.a_grouped,
        rearranged=tuple(names[x] for x in problem.rearranged),
        inputs=tuple(names[x] for x in problem.inputs),
        allocated=tuple(names[x] for x in problem.allocated))


def orient_matmul(problem, options, target):
    """The orientation poplin plans a forward matmul in: `problem` or `swapped(problem)`.

    poplin plans a matmul as a convolution whose output channels are the columns (n)
    and its field the rows (m), or, with its operands swapped, the other way round; a
    fully-connected or plain matmul tries the swapped one first, and charges the other
    the transform estimate of rearranging its input, its weights and its output
    (graphcore/poplibs@7eac0f2, lib/poplin/ConvPlan.cpp, `getSwapOperandCandidates`;
    ConvModel.cpp, `addTransformCycleEstimate`: `rearrangeInput`, `rearrangeWeights` and
    `rearrangeOutput` when `swapOperands != isMatmulOrFullyConnectedLayer`). It keeps the
    faster, the swapped one on a tie. Our `Problem` is the unswapped convolution (its n
    the output channels, rounded up to the AMP's channel groups), so the swapped one
    rounds m: two rows of a batch become output channels padded to a whole group."""
    turned = swapped(problem)
    charged = dataclasses.replace(problem, rearranged=("a", "b", "out"), allocated=())
    if _choose_cached(turned, options, target, "matmul")[0].cycles <= _choose_cached(
            charged, options, target, "matmul")[0].cycles:
        return turned
    return problem


def choose_plan(problem, options, target, kind="matmul", where="matmul"):
    """The plan for `problem` on `target` under `options` (see the module docstring)."""
    plan, warning = _choose_cached(problem, options, target, kind)
    if warning:
        warnings.warn(f"{warning} Op: {where}.", stacklevel=2)
    return plan


def memory_bounds(proportion, bytes_per_tile):
    """The temporary-memory bounds per tile poplin's planner tries in turn: the
    `availableMemoryProportion` budget (in (0, 1], `PlanOptions` checks it), then, when
    no plan fits it, twice that bound, again and again until the bound reaches twice the
    tile's memory; after the last, none (graphcore/poplibs@7eac0f2,
    lib/poplin/ConvPlan.cpp, `createPlan`: `minimizeCycles` under the bound, then
    `minimizeMemory`'s doubling loop and its last resort, the fastest plan without a
    bound)."""
    bounds = [proportion * bytes_per_tile]
    while 0 < bounds[-1] < 2 * bytes_per_tile:
        bounds.append(2 * bounds[-1])
    return bounds


@functools.lru_cache(maxsize=512)
def _choose_cached(problem, options, target, kind):
    tiles = target.tiles_per_ipu
    c, temp, receive, compute, exchange, steps, cycles, idle = _evaluate(
        problem, options, target, tiles)
    bounds = memory_bounds(options.available_memory_proportion, target.bytes_per_tile)
    budget = bounds[0]
    fits = temp <= budget
    warning = None
    for bound in bounds:
        within = temp <= bound
        if within.any():
            # The fastest plan within the bound; ties: less memory.
            index = np.lexsort((temp, np.where(within, cycles, np.iinfo(np.int64).max)))[0]
            break
    else:
        bound, index = None, np.lexsort((temp, cycles))[0]   # the fastest plan of all
    if not fits[index]:
        taken = (f"the fastest plan within {int(bound)} bytes per tile, the bound doubled "
                 "until a plan fit" if bound else "the fastest plan, none fitting twice a "
                 "tile's memory")
        warning = (
            f"The {kind} planner found no plan whose temporary memory fits in "
            f"availableMemoryProportion={options.available_memory_proportion} "
            f"({int(budget)} bytes per tile); as poplin does, it took {taken} "
            f"({int(temp[index])} bytes per tile). Received: {problem.groups} x "
            f"({problem.m} x {problem.k}) @ ({problem.k} x {problem.n}) {problem.dtype}, "
            f"{tiles} tiles of {target.bytes_per_tile} bytes.")
    plan = Plan(kind, (int(c.chunk[index]), int(c.k[index]), int(c.serial[index])),
                int(c.used[index]), int(temp[index]), int(receive[index]),
                int(compute[index]), int(exchange[index]), int(steps[index]),
                int(cycles[index]), bool(fits[index]),
                codelets(problem, int(c.k[index])),
                per_tile=int(c.owned[index]), partial_bytes=partial_bytes(problem, options),
                block=tuple(int(b) for b in c.block[index]) if not c.aligned[index] else (),
                owners=_ceil(problem.out_size, int(c.owned[index])),
                idle_temp_bytes=int(idle[index]))
    return plan, warning


def plan_gather(table_tiles, table_per_tile, indices_nbytes, out_type, out_per_tile, dtype,
                target):
    """A `GatherPlan` for gathering `out_type` rows from a table on `table_tiles` tiles."""
    item = out_type.itemsize
    looked_up = min(_ceil(out_type.size, table_tiles), max(table_per_tile, 1))
    copy = cost_model.compute_cycles("copy", looked_up, dtype, target)
    exchange = (cost_model.exchange_cycles(indices_nbytes, target)
                + cost_model.exchange_cycles(out_per_tile * item, target))
    temp = indices_nbytes + looked_up * item
    cycles = copy + exchange + 2 * cost_model.sync_cycles(target)
    return GatherPlan("gather", table_tiles, temp, indices_nbytes + out_per_tile * item,
                      copy, exchange, 2, cycles)


def options_for(plan, matmul_options, conv_options):
    """The options of a plan kind (an op's `plan` fact): a convolution's or a matmul's."""
    return conv_options if plan == "conv" else matmul_options
