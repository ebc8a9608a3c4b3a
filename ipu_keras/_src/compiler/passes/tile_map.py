"""Tile mapping: where the elements of every value live, and how each big op is planned.

A `Mapping` spreads a value's elements in contiguous chunks of `per_tile` over
`tiles` consecutive tiles from `start`. The rules, by the op's mapping preference
(`ops/registry.py`):

* "elementwise": the output keeps the mapping of an operand of its shape, so the op
  needs no exchange for it;
* "matmul" (matmuls, convolutions): the planner (`planner.py`) chooses a partition
  for the target and the `poplar_options`; the output is laid out as the plan
  partitions it (contiguous chunks of the plan's `per_tile`, tile by tile from its
  first tile). Gathers get a `GatherPlan` next to their table;
* "reduce": the output is mapped linearly (reductions map their outputs; the inputs
  stay where they are and are reduced in place first);
* views (ops with no work whose output has the input's bytes: `reshape`, `bitcast`)
  alias their input's mapping and memory;
* views of parts of their operands (ops with a `view` fact: a static slice, a split, a
  concatenation; Poplar returns views for them, see the ops) take no memory: their
  elements stay where the operands' are (a `ViewMapping`, `views.py`), and the memory
  plan keeps every source alive as long as the view (`TileMap.views`: the values it
  views). A value that is not a view never takes a
  `ViewMapping`: an op that would follow a view's layout gets a linear one;
* everything else is spread linearly with a minimum grain of `GRAIN_BYTES` per
  tile, each new value starting where the previous ended so that small values do
  not all land on tile 0. Variables are mapped first, then the graph inputs; a
  variable that a product's result updates then takes that result's layout
  (`_lay_out_updated_variables`).

On a device of several IPUs an IPU is a range of `tiles_per_ipu` global tiles: every
value is mapped inside the range of the IPU its equation runs on (`Equation.shard`,
filled in by the `shard` pass; a variable on the IPU of its reads and writes, a graph
input on that of its first user), one allocation cursor per IPU. A value never spans
two IPUs; moving one between IPUs is an `ipu_copy`.
"""
import dataclasses
import functools
import math

import numpy as np

from ipu_keras._src.compiler.passes import planner
from ipu_keras._src.compiler.passes.shard import input_shards, variable_shards
from ipu_keras._src.compiler.passes.stages import is_backward
from ipu_keras._src.compiler.passes.views import ViewMapping, view_groups
from ipu_keras._src.ops.registry import get_op

GRAIN_BYTES = 64
"""Minimum bytes of one value on a tile: one 64-byte chunk, 8 loads of the 64-bit
datapath, so a tile never gets a sliver smaller than a few vector instructions."""

@dataclasses.dataclass(frozen=True)
class Mapping:
    start: int
    tiles: int
    per_tile: int

    # Cached (read-only arrays): the passes ask for the same mappings' bounds thousands
    # of times (40,811 calls compiling ResNet-50's training step).
    @functools.lru_cache(maxsize=1 << 14)
    def elements(self, size, num_tiles):
        """Elements per tile as a read-only vector of length `num_tiles`."""
        lo, hi = self.bounds(size, num_tiles)
        elements = hi - lo
        elements.flags.writeable = False
        return elements

    @functools.lru_cache(maxsize=1 << 14)
    def bounds(self, size, num_tiles):
        """Per tile, the flat index range [lo, hi) of the elements it holds (read-only)."""
        lo = np.zeros(num_tiles, dtype=np.int64)
        hi = np.zeros(num_tiles, dtype=np.int64)
        if size:
            chunks = np.arange(math.ceil(size / self.per_tile))
            tiles = (self.start + chunks) % num_tiles
            lo[tiles] = chunks * self.per_tile
            hi[tiles] = np.minimum(size, (chunks + 1) * self.per_tile)
        lo.flags.writeable = hi.flags.writeable = False
        return lo, hi

    def tile_range(self, num_tiles):
        """The tiles this mapping uses (sorted)."""
        return np.sort((self.start + np.arange(self.tiles)) % num_tiles)


@dataclasses.dataclass(frozen=True)
class TileMap:
    values: dict          # value id -> Mapping
    variables: list       # variable index -> Mapping
    num_tiles: int
    plans: dict = dataclasses.field(default_factory=dict)    # output value id -> plan
    aliases: dict = dataclasses.field(default_factory=dict)  # view value id -> source id
    # a view of parts of its operands (`ViewMapping`) -> the ids of the values it views
    views: dict = dataclasses.field(default_factory=dict)
    tiles_per_ipu: int = 0
    target: object = None     # the `Target` mapped onto (its rates choose reduction trees)
    # equation -> its received bytes per tile (`traffic.received_bytes`, asked by the
    # memory plan and the lowering alike), filled as they ask
    received: dict = dataclasses.field(default_factory=dict, init=False, compare=False,
                                       repr=False)

    def plan_of(self, eqn):
        return self.plans.get(eqn.outputs[0].id) if eqn.outputs else None

    def roots(self, value_id):
        """The ids of the values whose memory `value_id` lives in (itself if it owns any)."""
        return _roots(self.views, self.aliases, value_id)

    def is_view(self, value_id):
        """Whether the value takes no memory of its own (a view of other values)."""
        return value_id in self.aliases or value_id in self.views


def _roots(views, aliases, value_id):
    return views.get(value_id) or (aliases.get(value_id, value_id),)


def is_view(eqn):
    """Whether `eqn`'s output is a view of its whole first input (no work, same bytes)."""
    if len(eqn.inputs) < 1 or len(eqn.outputs) != 1 or get_op(eqn.op).engine:
        return False
    out, src = eqn.outputs[0].type, eqn.inputs[0].type
    if out.nbytes != src.nbytes:
        return False
    opdef = get_op(eqn.op)
    work = opdef.cost([v.type for v in eqn.inputs], [out], **eqn.params)
    return work.kind == "none" and opdef.mapping != "engine"


class _Planner:
    def __init__(self, target, matmul_options, conv_options):
        self.target = target
        self.num_tiles = target.num_tiles
        self.per_ipu = target.tiles_per_ipu
        self.options = (matmul_options, conv_options)
        self.cursors = [0] * target.num_ipus   # next free tile offset within each IPU
        self.ipu = 0                            # the IPU being mapped onto
        self.stage_options = {}                 # (stage, direction) -> options of a stage
        self.values = {}
        self.plans = {}
        self.aliases = {}
        self.views = {}
        # Values IPU TensorFlow's allocation finder lays out for the product reading them:
        # the outputs of its allocating instructions (parameters, infeeds, constants), through
        # views and into loop bodies (graphcore/tensorflow@b2127bb, custom_ops/hlo_extensions.cc).
        self.allocated = set()

    def linear(self, type_, tiles=None):
        grain = max(1, GRAIN_BYTES // type_.itemsize)
        if tiles is None:
            tiles = math.ceil(type_.size / grain)
        tiles = max(1, min(self.per_ipu, tiles))
        return Mapping(self._take(tiles), tiles, max(1, math.ceil(type_.size / tiles)))

    def _take(self, tiles):
        """The first global tile of `tiles` consecutive tiles on the current IPU."""
        offset = self.cursors[self.ipu]
        if len(self.cursors) > 1 and offset + tiles > self.per_ipu:
            offset = 0    # stay on this IPU (one IPU wraps around onto itself)
        self.cursors[self.ipu] = (offset + tiles) % self.per_ipu
        return self.ipu * self.per_ipu + offset

    def graph(self, graph, variables):
        for eqn in graph.equations:
            self.equation(eqn, variables)

    def equation(self, eqn, variables):
        opdef = get_op(eqn.op)
        self.ipu = min(eqn.shard or 0, len(self.cursors) - 1)
        if opdef.role == "variable_read":
            self.values[eqn.outputs[0].id] = variables[eqn.params["var"]]
            self.allocated.add(eqn.outputs[0].id)
            return
        for sub in eqn.subgraphs():
            # A body's inputs are the trailing operands (an `if` also takes a predicate).
            operands = eqn.inputs[len(eqn.inputs) - len(sub.inputs):]
            for inner, outer in zip(sub.inputs, operands):
                self.values[inner.id] = self._own(self.values.get(outer.id), outer.type)
                kept = self.values[inner.id] is self.values.get(outer.id)
                if outer.id in self.allocated and kept:
                    self.allocated.add(inner.id)
            self.graph(sub, variables)
            self.ipu = min(eqn.shard or 0, len(self.cursors) - 1)
        for i, out in enumerate(eqn.outputs):
            self.values[out.id] = self._choose(opdef, eqn, i, out)
        if opdef.role == "constant":
            self.allocated.update(v.id for v in eqn.outputs)

    def _own(self, mapping, type_):
        """`mapping` for a value with memory of its own: a view's layout is no tensor's,
        such a value is laid out linearly (as are values without one)."""
        if mapping is None or isinstance(mapping, ViewMapping):
            return self.linear(type_)
        return mapping

    def _choose(self, opdef, eqn, i, out):
        if opdef.role == "loop":
            return self._own(self.values.get(eqn.inputs[i].id), out.type)
        if i == 0 and opdef.mapping == "matmul" and len(eqn.inputs) >= 2:
            return self._matmul(eqn, out)
        if i == 0 and opdef.plan == "gather" and eqn.inputs[0].id in self.values:
            return self._gather(eqn, out)
        if is_view(eqn) and eqn.inputs[0].id in self.values:
            source = eqn.inputs[0].id
            if source in self.views:
                self.views[out.id] = self.views[source]
            else:
                self.aliases[out.id] = self.aliases.get(source, source)
            if source in self.allocated:
                self.allocated.add(out.id)
            return self.values[source]
        groups = view_groups(eqn)
        if groups is not None and all(v.id in self.values for v in eqn.inputs):
            return self._view(eqn, out, groups[i])
        if opdef.mapping == "elementwise":
            for v in eqn.inputs:
                if (v.type.shape == out.type.shape and v.id in self.values
                        and not isinstance(self.values[v.id], ViewMapping)):
                    return self.values[v.id]
        return self.linear(out.type)

    def _view(self, eqn, out, groups):
        """A view of parts of its operands (`views.py`): their layouts, their sources
        kept alive."""
        layout, sources = [], {}
        for k, *runs in groups:
            value = eqn.inputs[k]
            layout.append((value.id, self.values[value.id], value.type.size, *runs))
            sources.update(dict.fromkeys(_roots(self.views, self.aliases, value.id)))
        self.views[out.id] = tuple(sources)
        return ViewMapping(tuple(layout), out.type.size, self.num_tiles)

    def _matmul(self, eqn, out):
        problem = planner.problem_of(eqn)
        # A variable or program input read by the product is created in its layout (IPU
        # TensorFlow's allocation finder), so poplin need not copy it into the plan's.
        problem = dataclasses.replace(problem, allocated=tuple(
            role for role, v in zip(problem.inputs, eqn.inputs) if v.id in self.allocated))
        if problem.macs == 0:
            # An empty product, or a zero-length contraction (a fill of zeros): there is
            # nothing to plan, and the op's own cost rule prices it.
            return self.linear(out.type)
        direction = "backward" if is_backward(eqn) else "forward"
        opdef = get_op(eqn.op)
        kind = opdef.plan
        options = planner.options_for(
            kind, *self.stage_options.get((eqn.stage, direction), self.options))
        if opdef.plan == "matmul" and direction == "forward":
            # A forward product is planned as poplin orients it (the backward passes keep
            # theirs: poplin derives them from a training forward pass's joint plan).
            problem = planner.orient_matmul(problem, options, self.target)
        plan = planner.choose_plan(problem, options, self.target, kind,
                                   where=f"{eqn.op} {out.type} from {eqn.source}")
        start = self._take(plan.tiles)
        # The output follows the plan: tile i owns product elements [i*q, (i+1)*q).
        chunks = math.ceil(problem.out_size / plan.per_tile)
        mapping = Mapping(start, min(chunks, self.per_ipu),
                          max(1, math.ceil(out.type.size / chunks)))
        self.plans[out.id] = dataclasses.replace(plan, start=start)
        return mapping

    def _gather(self, eqn, out):
        table = self.values[eqn.inputs[0].id]
        mapping = self.linear(out.type)
        indices = eqn.inputs[1].type.nbytes if len(eqn.inputs) > 1 else 0
        plan = planner.plan_gather(table.tiles, table.per_tile, indices, out.type,
                                   mapping.per_tile, out.type.dtype, self.target)
        self.plans[out.id] = dataclasses.replace(plan, start=table.start)
        return mapping


def _stage_options(graph, matmul_options, conv_options):
    """(stage, "forward"/"backward") -> (matmul, conv) PlanOptions of pipeline stages
    given `PipelineStageOptions`; each overrides the config's options it names."""
    table = {}
    for eqn in graph.walk():
        for direction, stages in ((eqn.pipeline or {}).get("stage_options") or {}).items():
            for stage, options in enumerate(stages):
                table[(stage, direction)] = tuple(
                    _override(base, options[kind], f"{direction} stage {stage} {kind} options")
                    for base, kind in ((matmul_options, "matmul"), (conv_options, "conv")))
    return table


def _override(base, options, where):
    text = {"availableMemoryProportion": str(base.available_memory_proportion),
            "partialsType": base.partials_type}
    return planner.PlanOptions.from_poplar_options({**text, **options}, where)


def plan_tile_mapping(graph, target, matmul_options=None, conv_options=None):
    """Map every value of `graph` onto `target`'s tiles; plan matmuls, convs and gathers.

    `matmul_options`/`conv_options` are `planner.PlanOptions` (defaults if None).
    """
    matmul_options = matmul_options or planner.PlanOptions()
    conv_options = conv_options or planner.PlanOptions()
    planner_ = _Planner(target, matmul_options, conv_options)
    planner_.stage_options = _stage_options(graph, matmul_options, conv_options)
    variables = []
    for spec, ipu in zip(graph.variables, variable_shards(graph)):
        planner_.ipu = min(ipu, target.num_ipus - 1)
        variables.append(planner_.linear(spec.type))
    for value, ipu in zip(graph.inputs, input_shards(graph)):
        planner_.ipu = min(ipu, target.num_ipus - 1)
        planner_.values[value.id] = planner_.linear(value.type)
        planner_.allocated.add(value.id)
    planner_.graph(graph, variables)
    _lay_out_updated_variables(graph, planner_, variables)
    return TileMap(planner_.values, variables, target.num_tiles, planner_.plans,
                   planner_.aliases, planner_.views, target.tiles_per_ipu, target)


def _lay_out_updated_variables(graph, planner_, variables):
    """Give each variable that a product's result updates (through elementwise steps: a
    weight gradient scaled by the learning rate, an optimizer's slot mixed with it) that
    result's layout, and so every value that took the variable's layout from reading it
    (and every view of such a value, `views.py`).

    IPU TensorFlow lays a weight out for the product that reads it (the allocation
    finder), and poplin computes its gradient in that same layout: a fully-connected
    weight update is planned jointly with the forward pass, each gradient block on the
    tiles of the forward's weight block (graphcore/poplibs@7eac0f2,
    lib/poplin/Convolution.cpp, `linearizeTileIndices` for FC_TRAINING_WU), and a
    convolution's weight update rearranges its result into the weights' layout
    (`Problem.rearranged`). So the update reads its gradient where the variable lives;
    a variable mapped apart from it would receive the whole gradient each step.
    """
    equations = list(graph.walk())
    producer = {v.id: eqn for eqn in equations for v in eqn.outputs}
    moved = {}    # id of a variable's old mapping -> its new mapping
    for eqn in equations:
        if get_op(eqn.op).role != "variable_write":
            continue
        index = eqn.params["var"]
        product = _product_behind(eqn.inputs[0], producer)
        if product is None or product not in planner_.values:
            continue
        old, new = variables[index], planner_.values[product]
        if old is not new and id(old) not in moved:
            moved[id(old)] = variables[index] = new
    if moved:
        retired = []    # the views replaced, kept alive so that their ids stay theirs
        for key, mapping in planner_.values.items():   # sources before their views
            if isinstance(mapping, ViewMapping) and id(mapping) not in moved and any(
                    id(layout) in moved for _, layout, *_ in mapping.groups):
                retired.append(mapping)
                moved[id(mapping)] = ViewMapping(tuple(
                    (source, moved.get(id(layout), layout), *runs)
                    for source, layout, *runs in mapping.groups), mapping.size,
                    mapping.num_tiles)
            if id(mapping) in moved:
                planner_.values[key] = moved[id(mapping)]


def _product_behind(value, producer, depth=8):
    """The id of the planned product (mapping "matmul") whose result `value` is, through
    elementwise steps and views of its size; None if there is none within `depth`."""
    frontier = [value]
    for _ in range(depth):
        following = []
        for v in frontier:
            eqn = producer.get(v.id)
            if eqn is None:
                continue
            opdef = get_op(eqn.op)
            if opdef.mapping == "matmul" and eqn.outputs[0].id == v.id:
                return v.id
            if opdef.mapping == "elementwise" or is_view(eqn):
                following.extend(u for u in eqn.inputs if u.type.size == v.type.size)
        frontier = following
    return None
