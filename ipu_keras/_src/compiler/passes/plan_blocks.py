"""The candidate partitions of a matmul-shaped `Problem` (see `planner.py`), as arrays.

`candidates(problem, tiles)` lists every way the planner considers to cut the product's
output over at most `tiles` tiles, as one `Blocks` of numpy arrays (one entry per
candidate), which `planner._evaluate` prices all at once.
"""
import dataclasses
import math

import numpy as np

MAX_SERIAL_SPLITS = 64
"""Most serial passes a plan may split its output columns into (a search limit, not a
machine figure): each pass reuses the same temporaries, trading cycles for memory."""


# -- candidates ---------------------------------------------------------------------------
#
# The product's output is a row-major [rows, cols] matrix: [groups * m, n] for matmuls
# (groups outermost), [m, groups * n] for convolutions (groups in the channel axis). A
# candidate cuts it into blocks, each computed by `k` tiles, one per slice of the
# contracted axis, in `serial` passes over the block's columns. There are two kinds:
#
# * flat chunks: `chunk` consecutive elements in flat order (whole rows, or pieces of a
#   row). The `k` tiles of a chunk then each own `per_tile = ceil(chunk / k)` consecutive
#   elements of it: the output's linear mapping IS the partition, and a tile receives
#   `k - 1` partials per element it owns.
# * 2-d blocks of `block = (rows, cols)`, as poplin cuts a product's output over its
#   field and output channels: a tile's operands are its block's rows and columns for
#   its depth slice, so a square-ish block needs far fewer operand bytes than a flat
#   chunk of as many elements, and its AMP passes see a longer field. The output keeps
#   its linear mapping (`per_tile = ceil(size / tiles used)` each): the reduction
#   superstep gathers each owned element's `k` partials (with no k split, its one
#   result) from the block's tiles, as poplin's plan cost counts the reduction and the
#   output's transform exchange.
#
# `Blocks` holds one array per fact over all candidates of both kinds.


@dataclasses.dataclass
class Blocks:
    """Candidates as arrays: `chunk` outputs per block (its `k` tiles together), the
    rows, columns and groups of the output a block touches, the splits, the tiles
    used, the elements each tile owns in the end, and `aligned` (flat chunks: the
    tile owns part of its own block)."""

    chunk: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    groups: np.ndarray
    k: np.ndarray
    serial: np.ndarray
    used: np.ndarray
    owned: np.ndarray
    aligned: np.ndarray
    block: np.ndarray         # [candidates, 2]: (rows, cols) of a 2-d block, else (0, 0)

    @classmethod
    def concat(cls, a, b):
        return cls(*(np.concatenate([getattr(a, f.name), getattr(b, f.name)])
                     for f in dataclasses.fields(cls)))


def _split_values(size, tiles):
    """Splits of a dimension: powers of two, divisors of the tile count, and the splits
    giving power-of-two blocks; none larger than the dimension or the tiles."""
    limit = max(1, min(size, tiles))
    values = {1, limit}
    values.update(d for d in range(1, limit + 1) if tiles % d == 0 and d <= limit)
    b = 1
    while b <= size:
        values.add(min(limit, 1 << (b.bit_length() - 1)))
        values.add(max(1, min(limit, math.ceil(size / b))))
        b *= 2
    return np.array(sorted(values), np.int64)


def _layout(problem):
    """(rows, cols, rows per group, cols per group) of the product's output matrix."""
    g, m, n = problem.groups, problem.m, problem.n
    if problem.grouped_cols:
        return m, g * n, m, n
    return g * m, n, m, n


def _serial_values(cols):
    return np.array([s for s in (1 << i for i in range(MAX_SERIAL_SPLITS.bit_length()))
                     if s <= max(1, cols)], np.int64)


def _k_splits(problem, tiles, max_k):
    """Splits of the contracted axis: `_split_values`, none above `max_k`."""
    values = _split_values(problem.k, tiles)
    return values[values <= max(1, max_k)]


def _flat_candidates(problem, tiles, max_k):
    """Flat chunks: whole-row blocks and pieces of a row, by k split and serial passes."""
    rows, cols, _, _ = _layout(problem)
    chunks = np.unique(np.concatenate([ceil_div(rows, _split_values(rows, tiles)) * cols,
                                       ceil_div(cols, _split_values(cols, tiles))]))
    grids = np.meshgrid(chunks, _k_splits(problem, tiles, max_k), _serial_values(cols),
                        indexing="ij")
    chunk, sk, ss = (g.ravel() for g in grids)
    used = ceil_div(rows * cols, chunk) * sk
    keep = (used <= tiles) & (ss <= np.minimum(chunk, cols))
    chunk, sk, ss, used = chunk[keep], sk[keep], ss[keep], used[keep]
    # The k tiles of a chunk each own ceil(chunk / k) of its outputs (`Plan.per_tile`), so
    # together they cover that many times k: the chunk the operands are needed for. A
    # single chunk never holds more than the output (a k split wider than the output
    # leaves some of its tiles owning nothing, not partials of elements that don't exist).
    chunk = np.minimum(ceil_div(chunk, sk) * sk, rows * cols)
    rt, ct, gt = _touched(problem, chunk)
    zeros = np.zeros((chunk.size, 2), np.int64)
    return Blocks(chunk, rt, ct, gt, sk, ss, used, ceil_div(chunk, sk),
                   np.ones(chunk.size, bool), zeros)


def _block_candidates(problem, tiles, max_k):
    """2-d blocks narrower than a row and taller than one: for each column width, k
    split and serial split, the shortest block (and twice it) that fits the tiles."""
    rows, cols, m, n = _layout(problem)
    if rows < 2 or cols < 2:
        return None
    grids = np.meshgrid(_split_values(cols, tiles)[:-1], _k_splits(problem, tiles, max_k),
                        _serial_values(cols), np.array([1, 2], np.int64), indexing="ij")
    bc, sk, ss, stretch = (g.ravel() for g in grids)
    bc = np.minimum(bc, cols - 1)
    across = ceil_div(cols, bc)
    down = tiles // (across * sk)
    br = np.minimum(rows, ceil_div(rows, np.maximum(1, down)) * stretch)
    keep = (down >= 1) & (br >= 2) & (ss <= bc)
    br, bc, sk, ss, across = br[keep], bc[keep], sk[keep], ss[keep], across[keep]
    if not br.size:
        return None
    used = ceil_div(rows, br) * across * sk
    # A block starts at a multiple of its size: the groups it touches follow as for
    # flat chunks, along the axis that holds the groups.
    if problem.grouped_cols:
        gt = ceil_div(n - np.gcd(bc, n) + bc, n)
    else:
        gt = ceil_div(m - np.gcd(br, m) + br, m)
    gt = np.minimum(problem.groups, np.maximum(1, gt))
    return Blocks(br * bc, br, bc, gt, sk, ss, used, ceil_div(rows * cols, used),
                   np.zeros(br.size, bool), np.stack([br, bc], axis=1))


def candidates(problem, tiles, max_k=None):
    """`Blocks` of every candidate with at most `tiles` tiles used and the contracted
    axis split at most `max_k` ways (default: as many as it has elements)."""
    max_k = problem.k if max_k is None else max_k
    flat = _flat_candidates(problem, tiles, max_k)
    blocks = _block_candidates(problem, tiles, max_k)
    return flat if blocks is None else Blocks.concat(flat, blocks)


def ceil_div(a, b):
    return -(-a // b)


def _touched(problem, chunk):
    """Most (rows, cols, groups) of the output matrix one flat chunk touches. Chunks
    start at multiples of `chunk`, so their offset in a row is a multiple of
    gcd(chunk, cols)."""
    rows, cols, m, n = _layout(problem)
    offset = cols - np.gcd(chunk, cols)
    rt = np.minimum(rows, ceil_div(offset + chunk, cols))
    ct = np.minimum(chunk, cols)
    if problem.grouped_cols:
        start = n - np.gcd(chunk, n)
        gt = np.where(chunk >= cols, problem.groups, ceil_div(start + ct, n))
    else:
        gt = ceil_div(m - np.gcd(np.maximum(1, chunk // cols), m) + rt, m)
    return rt, ct, np.minimum(problem.groups, np.maximum(1, gt))
