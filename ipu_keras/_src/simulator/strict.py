"""Strict tile mode: every compute set also runs tile by tile, and must agree exactly.

The vectorised engine runs each op once on whole tensors. `StrictEngine` runs it that
way too (so its results are the engine's, bit for bit) and then, for every exec step,
replays it per tile from the executable's tile map (`blocks[i].tiles`, written by
the lowering):

1. each output's mapping gives every tile a contiguous flat range it owns; the ranges
   must cover the output exactly once;
2. the op's dependency rule (`tile_rules.py`) says which operand elements the tile
   needs for those outputs; those it does not hold by the operands' mappings are the
   bytes it receives in the exchange;
3. the tile computes with the op's own kernel on operands that hold only what it has
   (its elements and the received ones), everything else poison: first NaN (0, False
   for integers and booleans), then the operand's values shifted by one element (or
   negated booleans). Its owned range must equal the vectorised output bit for bit
   under both poisons, so an output element that needs data the tile lacks cannot
   come out right; the assembled tile slices must equal the vectorised output.

A view (a static slice, a split, a concatenation: the executable's `TileView`s) runs on
no tile: its elements must be those of its groups of runs, and its readers hold what its
sources' tiles hold. A disagreement raises `StrictModeMismatch` naming the op, its source
and the tile. The received bytes are compared with what the cost model charged the step (busiest
tile): `report()` lists both per step, and which steps ran a rule that is not
tile-local ("fallback": every tile needs every operand element). Two steps may also
receive partial results instead of operand elements: a reduction (each tile holding
inputs of an owned element reduces them first) and a matmul whose plan splits the
contracted axis over `k` tiles or cuts 2-d blocks (the executable says so): a tile then
receives its block's operand rows and columns for its depth slice only (a flat chunk's
block is the `k` tiles' owned ranges together), and the partials of the elements it
owns from the tiles of their block that are not itself. `StepReport.measured` is the
least of these ways.

Kernels run over whole-shaped buffers (only the kept slice is trusted), so numpy takes
the same code paths as in the vectorised run. The mode costs two kernel runs per tile
per op and is meant for targets of at most `MAX_STRICT_TILES` tiles.
"""
import dataclasses
import itertools

import numpy as np

from ipu_keras.errors import ConfigurationError, StrictModeMismatch
from ipu_keras._src.ops.registry import get_op
from ipu_keras._src.simulator import tile_rules
from ipu_keras._src.simulator.engine import Engine

MAX_STRICT_TILES = 64
"""Most tiles a target may have in strict mode (each op runs twice per tile)."""

PARTIAL_BYTES = 4
"""Bytes of one reduction partial (as in the compiler's traffic model)."""


@dataclasses.dataclass
class StepReport:
    """What strict mode saw of one exec step, over all its runs."""

    block: int
    step: int
    op: str
    source: str
    rule: str = ""
    runs: int = 0
    tiles: int = 0                # tiles that own output elements
    received: int = 0             # most bytes a tile had to receive (largest run)
    modelled: int = 0             # bytes the cost model charged the busiest tile
    partials: int = -1            # reductions: most partial-result bytes a tile receives
    k_split: int = -1             # matmuls splitting k: most bytes a tile receives so

    @property
    def tile_local(self):
        return self.rule not in ("fallback", "skipped", "")

    @property
    def measured(self):
        """Most bytes a tile had to receive, the cheapest way (see the module docstring)."""
        ways = [w for w in (self.received, self.partials, self.k_split) if w >= 0]
        return min(ways)

    @property
    def excess(self):
        """Bytes received beyond the cost model's charge (0 if within it)."""
        return max(0, self.measured - self.modelled)


def mapping_bounds(mapping, size, num_tiles):
    """Per tile, the flat range [lo, hi) of a `[start, tiles, per_tile]` mapping."""
    start, _, per_tile = mapping
    lo = np.zeros(num_tiles, np.int64)
    hi = np.zeros(num_tiles, np.int64)
    if size:
        chunks = np.arange(-(-size // per_tile))
        tiles = (start + chunks) % num_tiles
        lo[tiles] = chunks * per_tile
        hi[tiles] = np.minimum(size, (chunks + 1) * per_tile)
    return lo, hi


class StrictEngine(Engine):
    """An `Engine` that checks every exec step tile by tile (see the module docstring)."""

    fuses = False   # every exec step is checked tile by tile on its own

    def __init__(self, executable, floating_point=None):
        target = executable.target
        self.num_tiles = int(target["tiles_per_ipu"]) * int(target.get("num_ipus", 1))
        if self.num_tiles > MAX_STRICT_TILES:
            raise ConfigurationError(
                f"Strict tile mode runs every op once per tile and expected a target of at "
                f"most {MAX_STRICT_TILES} tiles. Received: num_tiles={self.num_tiles}. Set "
                "IPUConfig.ipu_model.tiles_per_ipu to a small number.")
        if any(b.tiles is None for b in executable.blocks):
            raise ConfigurationError(
                "Strict tile mode expected an executable with a tile map per block. "
                "Received: an executable without one; recompile it with this version.")
        self.mappings = {}
        for block in executable.blocks:
            for row in block.tiles.slots:
                self.mappings[row.index] = row.mapping
        self.views = {}
        for block in executable.blocks:
            for view in block.tiles.views:
                self.views[view.index] = view.groups
                self.mappings[view.index] = ViewGroups(
                    (self.mappings.get(slot), size, *runs)
                    for slot, size, *runs in view.groups)
        self.steps = []
        self._facts = None
        super().__init__(executable, floating_point)

    def report(self):
        """One `StepReport` per exec step, in program order."""
        return sorted(self.steps, key=lambda r: (r.block, r.step))

    def format_report(self):
        """The report as a text table."""
        lines = [f"{'block':>5} {'step':>4}  {'op':<20} {'rule':<11} {'runs':>5} "
                 f"{'tiles':>5} {'received':>9} {'partials':>9} {'k_split':>9} "
                 f"{'measured':>9} {'modelled':>9}  source"]
        for r in self.report():
            partials = r.partials if r.partials >= 0 else "-"
            k_split = r.k_split if r.k_split >= 0 else "-"
            lines.append(f"{r.block:>5} {r.step:>4}  {r.op:<20} {r.rule:<11} {r.runs:>5} "
                         f"{r.tiles:>5} {r.received:>9} {partials:>9} {k_split:>9} "
                         f"{r.measured:>9} {r.modelled:>9}  {r.source}")
        return "\n".join(lines)

    def _build_block(self, index):
        facts = self.executable.blocks[index].tiles.steps
        self._facts = iter(zip(itertools.count(), facts))
        self._block = index
        return super()._build_block(index)

    def _build_step(self, step):
        position, traffic = next(self._facts)
        self._position = (self._block, position, traffic)
        return super()._build_step(step)

    def _step_exec(self, step):
        vectorised = super()._step_exec(step)
        block, position, traffic = self._position
        ins, outs = step.ins, step.outs
        report = StepReport(block, position, step.op, traffic.source,
                            modelled=int(traffic.received))
        self.steps.append(report)
        if outs and all(o in self.views for o in outs):
            return self._view_step(vectorised, report, outs)
        check = _TileCheck(step.op, step.params, report, [self.mappings.get(s) for s in ins],
                           [self.mappings.get(s) for s in outs], self.num_tiles, traffic)

        def run(env):
            vectorised(env)
            check([env[i] for i in ins], [env[o] for o in outs])
        return run


    def _view_step(self, vectorised, report, outs):
        """A view computes and moves nothing on the tiles: its elements must be, bit for
        bit, those of its runs where its sources hold them."""

        def run(env):
            vectorised(env)
            for out in outs:
                flat = np.asarray(env[out]).reshape(-1)
                whole = np.empty_like(flat)
                for slot, _, *runs in self.views[out]:
                    source, target = tile_rules.run_indices(*runs)
                    whole[target] = np.asarray(env[slot]).reshape(-1)[source]
                if not _same_bits(whole, flat):
                    raise StrictModeMismatch(
                        f"Strict tile mode: the view {report.op} (from {report.source}) is "
                        f"not the elements of its runs: expected {flat[:8]!r}... Received: "
                        f"{whole[:8]!r}... The op's `view` fact is wrong.")
            report.rule, report.runs = "view", report.runs + 1
        return run


class ViewGroups(tuple):
    """The strict mode's mapping of a view slot: its groups, each `(source mapping, size,
    first, pitch, length, count, at, step)` (`TileView`)."""


def holders(mapping, size, num_tiles):
    """The tile holding each flat element of a value laid out by `mapping` (-1: none)."""
    holder = np.full(size, -1, np.int64)
    if isinstance(mapping, ViewGroups):
        for source, source_size, *runs in mapping:
            if source is not None:
                index, target = tile_rules.run_indices(*runs)
                holder[target] = holders(source, source_size, num_tiles)[index]
    elif mapping is not None:
        lo, hi = mapping_bounds(mapping, size, num_tiles)
        for tile in np.flatnonzero(hi > lo):
            holder[lo[tile]:hi[tile]] = tile
    return holder


class _TileCheck:
    """Replays one exec step tile by tile and compares (see the module docstring)."""

    def __init__(self, op, params, report, in_maps, out_maps, num_tiles, traffic=None):
        self.kernel = get_op(op).kernel
        self.traffic = traffic
        self.k_split = traffic.k_split if traffic is not None else 1
        self.partial_bytes = traffic.partial_bytes if traffic is not None else PARTIAL_BYTES
        self.reduces = get_op(op).mapping == "reduce"
        # A call to the host (a host embedding's lookup or update) reads or changes host
        # memory: replaying it per tile would apply an update again. It is not tile work.
        self.replays = get_op(op).role != "host_call"
        self.op, self.params, self.report = op, params, report
        self.in_maps, self.out_maps, self.num_tiles = in_maps, out_maps, num_tiles

    def __call__(self, args, results):
        if not self.replays or not all(_checkable(x)
                                       for x in itertools.chain(args, results)):
            self.report.rule, self.report.runs = "skipped", self.report.runs + 1
            return
        args = [np.asarray(a) for a in args]
        results = [np.asarray(r) for r in results]
        self.holders = [holders(m, a.size, self.num_tiles)
                        for a, m in zip(args, self.in_maps)]
        out_shapes = [r.shape for r in results]
        if not self.report.rule or self.report.rule == "skipped":
            self.report.rule = tile_rules.kind_of(self.op, [a.shape for a in args], out_shapes,
                                                  self.params)
        owned = [self._owned(j, r.size) for j, r in enumerate(results)]
        numbers = (tile_rules.probe(self.op, args, self.params)
                   if self.report.rule == "probe" else None)
        flat = [r.reshape(-1) for r in results]
        assembled = [np.empty_like(f) for f in flat]
        received, busy = np.zeros(self.num_tiles, np.int64), 0
        partials = np.zeros(self.num_tiles, np.int64) if self.reduces else None
        k_split = np.zeros(self.num_tiles, np.int64) if self._planned() else None
        for t in range(self.num_tiles):
            ranges = [(int(lo[t]), int(hi[t])) for lo, hi in owned]
            if all(lo == hi for lo, hi in ranges):
                continue
            busy += 1
            masks = self._needed(args, out_shapes, ranges, numbers)
            received[t] = self._received(args, masks, t)
            if partials is not None:
                partials[t] = self._partials(args, out_shapes, ranges, t)
            if k_split is not None:
                k_split[t] = self._k_split(args, out_shapes, t)
            self._compute(t, args, masks, ranges, flat, assembled)
        for j, (a, f) in enumerate(zip(assembled, flat)):
            if not _same_bits(a, f):
                self._fail(None, j, 0, f.size, a, f)
        report = self.report
        report.runs += 1
        report.tiles = max(report.tiles, busy)
        report.received = max(report.received, int(received.max(initial=0)))
        if partials is not None:
            report.partials = max(report.partials, int(partials.max(initial=0)))
        if k_split is not None:
            report.k_split = max(report.k_split, int(k_split.max(initial=0)))

    def _owned(self, j, size):
        """Per tile, the flat range of output `j` it owns; checks they tile the output."""
        mapping = self.out_maps[j]
        if mapping is None:
            raise StrictModeMismatch(
                f"Strict tile mode expected a tile mapping for output {j} of {self.op} "
                f"(from {self.report.source}). Received: none in the executable.")
        lo, hi = mapping_bounds(mapping, size, self.num_tiles)
        count = np.zeros(size + 1, np.int64)
        np.add.at(count, lo[hi > lo], 1)
        np.add.at(count, hi[hi > lo], -1)
        count = np.cumsum(count)[:size]
        if size and (count != 1).any():
            bad = int(np.flatnonzero(count != 1)[0])
            raise StrictModeMismatch(
                f"Strict tile mode: the mapping {list(mapping)} of output {j} of {self.op} "
                f"(from {self.report.source}) gives element {bad} of {size} to "
                f"{int(count[bad])} tiles; every element must live on exactly one tile.")
        return lo, hi

    def _needed(self, args, out_shapes, ranges, numbers):
        masks = [np.zeros(a.shape, bool) for a in args]
        for j, (lo, hi) in enumerate(ranges):
            if lo == hi:
                continue
            coords = (np.unravel_index(np.arange(lo, hi), out_shapes[j])
                      if out_shapes[j] else ())
            owned_numbers = None if numbers is None else numbers[j].reshape(-1)[lo:hi]
            for mask, need in zip(masks, tile_rules.needed_masks(
                    self.report.rule, self.op, args, out_shapes, self.params, j, coords,
                    owned_numbers)):
                mask |= need
        return masks

    def _received(self, args, masks, t):
        """Bytes of the needed elements that tile `t` does not hold."""
        total = 0
        for a, mask, holder in zip(args, masks, self.holders):
            flat = mask.reshape(-1)
            total += (int(flat.sum()) - int(flat[holder == t].sum())) * a.itemsize
        return total

    def _partials(self, args, out_shapes, ranges, t):
        """Bytes of partial results tile `t` receives if every tile holding inputs of an
        output element it owns reduces them first (`PARTIAL_BYTES` per partial)."""
        total = 0
        for j, (lo, hi) in enumerate(ranges):
            for e in range(lo, hi):
                coords = tuple(np.array([c]) for c in np.unravel_index(e, out_shapes[j]))
                masks = tile_rules.needed_masks(self.report.rule, self.op, args, out_shapes,
                                                self.params, j, coords)
                tiles = set()
                for holder, mask in zip(self.holders, masks):
                    tiles.update(np.unique(holder[mask.reshape(-1)]).tolist())
                total += len(tiles - {t}) * PARTIAL_BYTES
        return total

    def _planned(self):
        return (self.report.rule == "matmul" and self.traffic is not None
                and self.traffic.planned and self.out_maps[0] is not None)

    def _k_split(self, args, out_shapes, t):
        """Bytes tile `t` receives as the plan runs the product (`_planned`): the operand
        rows and columns of its block for its depth slice, less what it holds, then the
        partials of the elements it owns from the other tiles of their blocks."""
        k, start, _, per_tile = self.k_split, *self.out_maps[0]
        size = int(np.prod(out_shapes[0], dtype=np.int64))
        i = (t - start) % self.num_tiles
        block = self._block_elements(i // k, size, out_shapes[0], per_tile)
        axes = tile_rules.contracted_axes(self.params, [a.ndim for a in args])
        depth = args[0].shape[axes[0]]
        step = -(-depth // k)
        slices = -(-depth // step)
        operands = 0
        if block.size and i % k < slices:
            coords = np.unravel_index(block, out_shapes[0])
            masks = tile_rules.needed_masks("matmul", self.op, args, out_shapes, self.params,
                                            0, coords)
            for mask, axis in zip(masks, axes):
                keep = np.zeros(mask.shape[axis], bool)
                keep[(i % k) * step:(i % k + 1) * step] = True
                mask &= keep.reshape([-1 if a == axis else 1 for a in range(mask.ndim)])
            operands = self._received(args, masks, t)
        owned = np.arange(i * per_tile, min(size, (i + 1) * per_tile))
        blocks = self._block_of(owned, size, out_shapes[0], per_tile)
        mine = (blocks == i // k) & (i % k < slices)
        return operands + int(np.sum(slices - mine)) * self.partial_bytes

    def _grid(self, shape):
        """(rows, cols, block rows, block cols, blocks across) of a 2-d block plan."""
        cols = int(shape[-1]) if shape else 1
        rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
        br, bc = self.traffic.block_rows, self.traffic.block_cols
        return rows, cols, br, bc, -(-cols // bc)

    def _block_elements(self, b, size, shape, per_tile):
        """Flat output elements of block `b`: a flat chunk's `k` owned ranges together, or
        a 2-d block's rows and columns."""
        if not self.traffic.block_rows:
            chunk = self.k_split * per_tile
            return np.arange(b * chunk, min(size, (b + 1) * chunk))
        rows, cols, br, bc, across = self._grid(shape)
        r = np.arange(b // across * br, min(rows, (b // across + 1) * br))
        c = np.arange(b % across * bc, min(cols, (b % across + 1) * bc))
        return (r[:, None] * cols + c[None, :]).reshape(-1)

    def _block_of(self, elements, size, shape, per_tile):
        """The block each flat output element belongs to."""
        if not self.traffic.block_rows:
            return elements // (self.k_split * per_tile)
        rows, cols, br, bc, across = self._grid(shape)
        return elements // cols // br * across + elements % cols // bc

    def _compute(self, t, args, masks, ranges, flat, assembled):
        """Tile `t` runs the kernel on what it holds, under both poisons."""
        for variant in (0, 1):
            held = [_poisoned(a, m, variant) for a, m in zip(args, masks)]
            with np.errstate(all="ignore"):
                out = self.kernel(*held, **self.params)
            out = out if isinstance(out, (tuple, list)) else (out,)
            for j, (lo, hi) in enumerate(ranges):
                mine = np.asarray(out[j]).reshape(-1)[lo:hi]
                if not _same_bits(mine, flat[j][lo:hi]):
                    self._fail(t, j, lo, hi, mine, flat[j][lo:hi])
                if variant == 0:
                    assembled[j][lo:hi] = mine

    def _fail(self, t, j, lo, hi, got, want):
        differ = _first_difference(got, want)
        who = f"tile {t}" if t is not None else "the tiles together"
        raise StrictModeMismatch(
            f"Strict tile mode: {who} computed {self.op} (from {self.report.source}, rule "
            f"'{self.report.rule}') differently from the vectorised run: output {j}, "
            f"flat element {lo + differ} of its range [{lo}, {hi}): expected "
            f"{want[differ]!r}. Received: {got[differ]!r}. The tile lacked data its slice "
            "needs, or the tile mapping or the op's dependency rule is wrong.")


def _checkable(x):
    return isinstance(x, (np.ndarray, np.generic)) and np.asarray(x).dtype.kind in "biufc"


def _poisoned(x, mask, variant):
    """`x` where `mask`, poison elsewhere; same shape, dtype and memory order as `x`."""
    buf = np.empty_like(x)
    if variant == 0:
        buf[...] = np.nan if x.dtype.kind in "fc" else 0
    elif x.dtype.kind == "b":
        buf[...] = ~x
    else:
        buf[...] = np.roll(x, 1)
    np.copyto(buf, x, where=mask)
    return buf


def _bits(x):
    x = np.ascontiguousarray(x)
    return x.view(np.uint8).reshape(x.size, x.itemsize) if x.size else x.reshape(0, 1)


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(_bits(a), _bits(b))


def _first_difference(a, b):
    a, b = np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)
    if a.shape != b.shape or a.dtype != b.dtype:
        return 0
    rows = (_bits(a) != _bits(b)).any(axis=1)
    return int(np.flatnonzero(rows)[0]) if rows.any() else 0
