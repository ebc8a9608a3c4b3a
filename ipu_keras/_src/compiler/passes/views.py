"""Where the elements of a view live: a value that is a view of parts of other values.

Poplar's `Tensor::slice` and `poplar::concat` return views of their tensors, not copies,
and IPU TensorFlow lowers static slices, splits and concatenations to them (the ops'
`view` facts cite where). Such a value owns no memory: each of its elements stays on
the tile of the source element it is. An op says which elements with its `view` fact:
per output, groups of `count` runs of `length` elements, run `j` taking the operand's
flat elements from `first + j * pitch` to the output's from `at + j * step`.

A `ViewMapping` holds those groups with their sources' layouts (a `Mapping`, or the
`ViewMapping` of a source that is itself a view) and answers what the memory plan and
the exchange ask of any layout: the elements each tile holds, and how many of a given
flat range per tile each tile holds. Both come from its piece table, the view cut into
contiguous pieces each on one tile, built with numpy from the sources' tables (a
`Mapping`'s pieces are its chunks), so a view of many runs (a concatenation along the
channels of an image batch) costs arrays, not loops.
"""
import dataclasses
import functools

import numpy as np

from ipu_keras._src.ops.registry import get_op


def view_groups(eqn):
    """Per output of `eqn`, the groups of operand runs it views (the op's `view` fact),
    or None if its outputs are no such views."""
    return _groups(eqn, get_op(eqn.op).view)


def region_groups(eqn):
    """The groups of operand runs that make the part of its output `eqn` computes (the
    op's `region` fact), or None if it computes the whole output."""
    return _groups(eqn, get_op(eqn.op).region)


def _groups(eqn, rule):
    if rule is None or get_op(eqn.op).engine:
        return None
    return rule([v.type for v in eqn.inputs], [v.type for v in eqn.outputs], **eqn.params)


def placements(groups, out_id, out_layout, out_size, num_tiles):
    """Per operand `k` that `groups` name (`region_groups`), where its elements must be:
    a `ViewMapping` of operand `k`'s elements, each on the tile that holds its output
    position in `out_layout` (the groups' runs turned around)."""
    by_operand = {}
    for k, first, pitch, length, count, at, step in groups:
        by_operand.setdefault(k, []).append(
            (out_id, out_layout, out_size, at, step, length, count, first, pitch))
    return {k: ViewMapping(tuple(runs), sum(r[5] * r[6] for r in runs), num_tiles)
            for k, runs in by_operand.items()}


def chunk_table(mapping, size, num_tiles):
    """The pieces of a `Mapping` of `size` elements: (starts, ends, tiles), its chunks."""
    chunks = np.arange(-(-size // mapping.per_tile)) if size else np.zeros(0, np.int64)
    starts = chunks * mapping.per_tile
    ends = np.minimum(size, starts + mapping.per_tile)
    return starts, ends, (mapping.start + chunks) % num_tiles


def table_of(mapping, size, num_tiles):
    """The piece table of any layout (a `Mapping` of `size` elements, or a `ViewMapping`)."""
    if isinstance(mapping, ViewMapping):
        return mapping.table
    return chunk_table(mapping, size, num_tiles)


def _pieces(source, first, pitch, length, count, at, step):
    """The pieces of one group's runs, in view coordinates, cut where `source`'s
    pieces (sorted, contiguous) are."""
    starts, ends, tiles = source
    s = first + pitch * np.arange(count, dtype=np.int64)
    v = at + step * np.arange(count, dtype=np.int64)
    i0 = np.searchsorted(starts, s, "right") - 1
    spans = np.searchsorted(starts, s + length - 1, "right") - i0
    run = np.repeat(np.arange(count), spans)
    index = i0[run] + np.arange(run.size) - np.repeat(np.cumsum(spans) - spans, spans)
    lo = np.maximum(s[run], starts[index])
    hi = np.minimum(s[run] + length, ends[index])
    begin = v[run] + lo - s[run]
    return begin, begin + (hi - lo), tiles[index]


@dataclasses.dataclass(frozen=True, eq=False)
class ViewMapping:
    """Where a view's elements live: `groups`, each `(source id, source layout, source
    size, first, pitch, length, count, at, step)` (the module docstring), covering the
    view's `size` elements once, on a device of `num_tiles` tiles. Compared by identity:
    each view has its own."""

    groups: tuple
    size: int
    num_tiles: int

    @functools.cached_property
    def table(self):
        """The view's pieces: (starts, ends, tiles), sorted by start."""
        parts = [_pieces(table_of(layout, size, self.num_tiles), *runs)
                 for _, layout, size, *runs in self.groups if runs[2] and runs[3]]
        if not parts:
            return (np.zeros(0, np.int64),) * 3
        starts, ends, tiles = (np.concatenate(p) for p in zip(*parts))
        order = np.argsort(starts, kind="stable")
        return starts[order], ends[order], tiles[order]

    @functools.cached_property
    def _elements(self):
        starts, ends, tiles = self.table
        out = np.bincount(tiles, weights=ends - starts, minlength=self.num_tiles)
        out = out.astype(np.int64)
        out.flags.writeable = False
        return out

    def elements(self, size=None, num_tiles=None):
        """Elements per tile (read-only); `size` and `num_tiles` are the view's own."""
        return self._elements

    def held(self, lo, hi):
        """Per tile, how many elements of the view's flat range [lo, hi) (per tile) the
        tile holds."""
        starts, ends, tiles = self.table
        overlap = np.maximum(0, np.minimum(ends, hi[tiles]) - np.maximum(starts, lo[tiles]))
        return np.bincount(tiles, weights=overlap, minlength=self.num_tiles).astype(np.int64)

    # For reports and the rules that size a spread by its tiles (reductions, gathers):
    # the tiles holding elements, the first of them, and the most one holds.
    @property
    def tiles(self):
        return int(np.count_nonzero(self._elements))

    @property
    def start(self):
        held = np.flatnonzero(self._elements)
        return int(held[0]) if held.size else 0

    @property
    def per_tile(self):
        return max(1, int(self._elements.max(initial=0)))

    def tile_range(self, num_tiles):
        return np.flatnonzero(self._elements)


def held_elements(mapping, size, lo, hi, num_tiles):
    """Per tile, how many elements of the flat ranges [lo, hi) (per tile) of a value of
    `size` elements laid out by `mapping` (a `Mapping` or `ViewMapping`) the tile holds."""
    if isinstance(mapping, ViewMapping):
        return mapping.held(lo, hi)
    slo, shi = mapping.bounds(size, num_tiles)
    return np.maximum(0, np.minimum(hi, shi) - np.maximum(lo, slo))
