"""Lowering: a mapped, planned graph -> the `Executable`'s blocks of steps.

Every IR value gets a slot; constants become preset slots; each graph level becomes a
block. Each step's cycles are computed here, once, from the tile map (and the plans of
matmuls, convolutions and gathers) and the target, and summed per block: compute on the
slowest tile (`device/cost.py`), the exchange that brings the operands there
(`traffic.py`, busiest receiving tile), one sync per superstep (external when the step
spans IPUs or talks to the host), host I/O for stream copies and calls to the host (host
embeddings) and, in the main block, for the program's arguments and results (a compiled
function's inputs stream in from the host, its outputs back: profile row
"host_transfer"); a loop's body, the copy of its results into the loop's state
(`_loop_state_copy`). Reductions take one superstep to reduce in place and one per stage
of their reduction tree (`reduction.py`); planned ops take their plan's supersteps. A
counted loop's condition and dead counters cost nothing, as it runs as a Poplar Repeat
(`repeat.py`). An outlined function's calls share one body block (`Call` steps,
`outline.py`), each call charged its overhead and argument and result copies
(`cost.call_cycles`). Each block (a `device/steps.Block` of typed steps) also keeps a
`profile` for reports: a `ProfileRow` per costed or control-flow step (op, Keras layer,
its cycles, its sub-blocks); the engine does not read it. `sources` gives each step's
`Source` (TensorFlow node, Keras layer), for errors raised while it runs (floating-point
traps). And it keeps `tiles`, the `TileFacts` the strict tile mode
(`simulator/strict.py`) checks: `slots`, a `TileMapping` for every value the block
defines; `views`, a `TileView` for every value that is a view of parts of others (a
static slice, a concatenation: where its elements are); `steps`, per step a
`StepTraffic`: the bytes the busiest tile receives as the cost model charges it, its
source and, for a matmul plan that splits k or cuts 2-d blocks, `k_split`,
`partial_bytes` and the blocks' shape (the strict mode measures such a step as the plan
runs it); block 0 adds `variables`, a `TileMapping` per variable. A view computes and
moves nothing (no cycles); its readers receive its elements from its sources' tiles."""
import dataclasses
import math

import numpy as np

from ipu_keras._src.compiler.passes import traffic
from ipu_keras._src.compiler.passes.outline import body_key, is_outlined
from ipu_keras._src.compiler.passes.repeat import repeat_free
from ipu_keras.errors import ReplicationError
from ipu_keras._src.ops.registry import get_op
from ipu_keras._src.device import cost as cost_model
from ipu_keras._src.device.steps import (
    Block, Call, Collective, Exec, If, Infeed, Outfeed, ProfileRow, Read, Source, StepTraffic,
    TileFacts, TileMapping, TileView, While, Write, cycles_of)
from ipu_keras._src.compiler.passes.views import ViewMapping, region_groups

_CONTROL = ("loop", "branch")
"""Roles (`ops/registry.py`) of the control-flow ops: their sub-blocks do the work."""
_COLLECTIVE = ("replica_reduce", "replica_index")
_HOST = ("stream_in", "stream_out", "host_call")
"""Roles whose steps talk to the host: stream copies and calls to the host (host
embeddings' lookups and updates)."""
_FREE = ("constant", "variable_read", "loop", "branch", "subgraph_call", "replica_index")
"""Roles whose own step costs no cycles."""


class _Lowering:
    def __init__(self, tile_map, target, pipelines=None, replicas=1):
        self.map = tile_map
        self.target = target
        self.pipelines = pipelines or {}
        self.replicas = replicas
        self.slots = {}
        self.blocks = []
        self.constants = []
        self.bodies = {}   # an outlined body's key -> its Call step's body fields
        self.producer = {}   # value id -> the equation making it, in the graphs lowered
        self.free = set()    # ids of counted loops' control equations (`repeat.py`)

    def slot(self, value):
        if value.id not in self.slots:
            self.slots[value.id] = len(self.slots)
        return self.slots[value.id]

    def slots_of(self, values):
        return tuple(self.slot(v) for v in values)

    def block(self, graph, loop_state=None):
        """Lower one graph level; returns its block index (parents before children).
        A loop's body also copies its results into the loop's state (`loop_state`, the
        loop equation), at the end of each iteration (`_loop_state_copy`)."""
        index = len(self.blocks)
        self.blocks.append(None)
        self.slots_of(graph.inputs)
        self.producer.update((v.id, e) for e in graph.equations for v in e.outputs)
        steps, cycles, profile, sources = [], [0, 0, 0, 0], [], []
        for eqn in graph.equations:
            step = self.step(eqn)
            if step is not None:
                steps.append(step)
                sources.append(Source(eqn.source.node, eqn.source.layer))
            eqn_cycles = self.cycles(eqn)
            for k, c in enumerate(eqn_cycles):
                cycles[k] += c
            if any(eqn_cycles) or isinstance(step, (While, If, Call)):
                profile.append(_profile_row(eqn, eqn_cycles, step))
        if loop_state is not None:
            copy = self._loop_state_copy(loop_state, graph)
            if any(copy):
                cycles = [a + b for a, b in zip(cycles, copy)]
                profile.append(ProfileRow("loop_state_copy", "", cycles_of(copy), (),
                                          loop_state.shard or 0))
        self.blocks[index] = Block(tuple(steps), cycles_of(cycles), tuple(profile),
                                   tuple(sources), self.tile_facts(graph))
        return index

    def tile_facts(self, graph):
        """What the strict tile mode checks a block against (see `lower`)."""
        values, steps = list(graph.inputs), []
        for eqn in graph.equations:
            values.extend(eqn.outputs)
            role = get_op(eqn.op).role
            if role != "constant":
                plan = self.map.plan_of(eqn)
                received = plan.receive_bytes if plan is not None else (
                    0 if role in _CONTROL else
                    traffic.received_bytes(eqn, self.map).max(initial=0))
                if getattr(plan, "kind", "") == "matmul" and (plan.k_split > 1 or plan.block):
                    steps.append(StepTraffic(int(received), str(eqn.source), plan.k_split,
                                             plan.partial_bytes, *(plan.block or (0, 0))))
                else:
                    steps.append(StepTraffic(int(received), str(eqn.source)))
        mapped = [(v, self.map.values.get(v.id)) for v in values]
        views = tuple(TileView(self.slot(v), tuple(
            (self.slots[source], size, *runs) for source, _, size, *runs in m.groups))
            for v, m in mapped if isinstance(m, ViewMapping))
        return TileFacts(tuple(TileMapping(self.slot(v), m.start, m.tiles, m.per_tile)
                               for v, m in mapped if m and not isinstance(m, ViewMapping)),
                         tuple(steps), (), views)

    def step(self, eqn):
        p, ins, outs = eqn.params, self.slots_of(eqn.inputs), self.slots_of(eqn.outputs)
        role = get_op(eqn.op).role
        if role == "constant":
            self.constants.append([outs[0], p["value"]])
            return None
        if role == "variable_read":
            return Read(p["var"], outs[0])
        if role == "variable_write":
            return Write(p["var"], p["mode"], ins[0])
        if role == "stream_in":
            return Infeed(p["infeed"], outs)
        if role == "stream_out":
            return Outfeed(p["outfeed"], ins)
        if role in _COLLECTIVE:
            size = p.get("group_size")
            if size and self.replicas % size:
                raise ReplicationError(
                    f"A cross-replica reduction over groups of {size} replicas expected the "
                    f"group size to divide the replication factor. Received: "
                    f"replica_group_size={size}, replication factor {self.replicas} (from "
                    f"{eqn.source}). Use a divisor of {self.replicas}, or None for all.")
            return Collective(eqn.op, ins, outs, p)
        if role == "loop":
            cond, body = p["cond"], p["body"]
            self.free |= repeat_free(eqn, self.producer)
            step = While(ins, self.block(cond), self.slots_of(cond.inputs),
                         self.slot(cond.outputs[0]), self.block(body, eqn),
                         self.slots_of(body.inputs),
                         self.slots_of(body.outputs), outs)
            if id(eqn) in self.pipelines:
                self.blocks[step.body_block] = _pipelined(self.blocks[step.body_block],
                                                          self.pipelines[id(eqn)])
            return step
        if role == "branch":
            then, other = p["then"], p["else"]
            return If(ins[0], ins[1:], self.block(then), self.slots_of(then.inputs),
                      self.slots_of(then.outputs), self.block(other), self.slots_of(other.inputs),
                      self.slots_of(other.outputs), outs)
        if is_outlined(eqn):
            return self.call(eqn, ins, outs)
        assert not get_op(eqn.op).engine, f"no lowering for engine op {eqn.op}"
        return Exec(eqn.op, ins, outs, p)

    def call(self, eqn, ins, outs):
        """An outlined call: the first call of a body lowers it, the others run that block
        (`passes/outline.py`)."""
        key = body_key(eqn)
        if key not in self.bodies:
            fn = eqn.params["fn"]
            self.bodies[key] = (self.block(fn), self.slots_of(fn.inputs),
                                self.slots_of(fn.outputs))
        block, body_in, body_out = self.bodies[key]
        return Call(ins, block, body_in, body_out, outs, eqn.params["outlined"])

    # -- cost ----------------------------------------------------------------------
    def cycles(self, eqn):
        """[compute, exchange, sync, host_io] cycles of one execution of `eqn`."""
        target, opdef = self.target, get_op(eqn.op)
        if opdef.role == "subgraph_call" and is_outlined(eqn):
            compute, sync = cost_model.call_cycles(
                [self._busiest_bytes(eqn.inputs), self._busiest_bytes(eqn.outputs)], target)
            return [compute, 0, sync, 0]
        if opdef.role in _FREE or id(eqn) in self.free or self._is_view(eqn):
            return [0, 0, 0, 0]
        if opdef.role == "replica_reduce":   # over the IPU-Links, replica to replica
            group = eqn.params["group_size"] or self.replicas
            return [*cost_model.all_reduce_cycles(
                eqn.inputs[0].type.nbytes, group, target, self._busiest_bytes(eqn.inputs)), 0]
        if opdef.role in _HOST:
            # A stream copy (or a call to the host) synchronises with the host (an external
            # sync); what it consumes leaves for the host, what it produces arrives from
            # it, every replica's bytes (`device/cost.py`).
            return [0, 0, cost_model.sync_cycles(target, external=True),
                    _host_io(eqn.outputs, eqn.inputs, target, self.replicas)]
        plan = self.map.plan_of(eqn)
        if plan is not None:
            external = self._spans_ipus(plan.start, plan.tiles)
            return [plan.compute, plan.exchange,
                    plan.supersteps * cost_model.sync_cycles(target, external), 0]
        if opdef.exchange == "tree":
            return self._reduction(eqn)
        received = traffic.received_bytes(eqn, self.map)
        exchange = cost_model.exchange_cycles(int(received.max(initial=0)), target)
        compute, mapping, work = self._compute(eqn)
        supersteps = 1 if compute or exchange else 0
        if work.steps > 1:   # a recurrence: each step receives the carried state, then syncs
            exchange += work.steps * cost_model.exchange_cycles(work.carried, target)
            supersteps = max(supersteps, work.steps)
        external = self._spans_ipus(mapping.start, mapping.tiles) if mapping else False
        if opdef.role == "link_copy":   # over the IPU-Links, then onto the destination tiles
            exchange += cost_model.ipu_link_cycles(
                eqn.inputs[0].type.nbytes, target, eqn.params["source_ipu"],
                eqn.params["destination_ipu"])
            external = True
        return [compute, exchange, supersteps * cost_model.sync_cycles(target, external), 0]

    def _is_view(self, eqn):
        """A view (a reshape, a static slice, a split, a concatenation: `tile_map.py`)
        moves and computes nothing: its readers receive its elements from where its
        sources are."""
        return bool(eqn.outputs) and all(self.map.is_view(v.id) for v in eqn.outputs)

    def _loop_state_copy(self, loop, body):
        """[compute, exchange, sync, 0] of copying a loop body's results into the loop's
        state, once per iteration. IPU TensorFlow runs a while loop as a Poplar loop over
        fixed tensors and, after the body, copies each result that is not the very tensor
        it replaces into that state tensor (graphcore/tensorflow@b2127bb,
        `driver/visitors/deferred_visitor.cc`, `AddLoopInputOutputAliasingCopies`): one
        superstep in which every tile copies the state it holds and receives the part of
        it that the result left on other tiles. A result passed through unchanged, and a
        counter a Poplar `Repeat` does not keep (`repeat.py`), copy nothing."""
        n = self.map.num_tiles
        held, missing = np.zeros(n, np.int64), np.zeros(n, np.int64)
        for state, result in zip(body.inputs, body.outputs):
            if state.id == result.id or id(self.producer.get(result.id)) in self.free:
                continue
            mapping = self.map.values.get(state.id)
            if mapping is None:
                continue
            lo, hi = mapping.bounds(state.type.size, n)
            held += (hi - lo) * state.type.itemsize
            missing += traffic.missing_bytes(result, lo, hi, self.map)
        if not held.any():
            return [0, 0, 0, 0]
        target = self.target
        compute = cost_model.compute_cycles("copy", int(held.max()), "uint8", target)
        exchange = cost_model.exchange_cycles(int(missing.max()), target)
        external = self._spans_ipus(0, n) if loop.shard is None else False
        return [compute, exchange, cost_model.sync_cycles(target, external), 0]

    def _reduction(self, eqn):
        """Reduce where the input lies (one superstep), then one superstep per stage of
        the reduction tree (`reduction.py`)."""
        target = self.target
        opdef = get_op(eqn.op)
        work = opdef.cost([v.type for v in eqn.inputs], [v.type for v in eqn.outputs],
                          **eqn.params)
        if work.kind == "none":
            return [0, 0, 0, 0]
        local = int(traffic.input_elements(eqn.inputs[0], self.map).max(initial=0))
        compute = cost_model.vector_cycles(local, eqn.inputs[0].type.dtype, target)
        stages, _ = traffic.reduction_tree(eqn, self.map)
        dtype = traffic.partial_dtype(eqn)
        exchange = 0
        for stage in stages:
            exchange += cost_model.exchange_cycles(stage.received, target)
            if stage.fan_in > 1:
                compute += cost_model.vector_cycles(stage.adds, dtype, target)
        mapping = self.map.values.get(eqn.outputs[0].id)
        source = self.map.values.get(eqn.inputs[0].id) or mapping
        external = self._spans_ipus(source.start, source.tiles) if source else False
        supersteps = (1 if compute else 0) + len(stages)
        return [compute, exchange, supersteps * cost_model.sync_cycles(target, external), 0]

    def _compute(self, eqn):
        """(compute cycles on the slowest tile, mapping of the work, the op's `Work`)."""
        target, n = self.target, self.map.num_tiles
        opdef = get_op(eqn.op)
        work = opdef.cost([v.type for v in eqn.inputs], [v.type for v in eqn.outputs],
                          **eqn.params)
        dtype = (eqn.inputs or eqn.outputs)[0].type.dtype
        if opdef.role == "variable_write":
            anchors = [(eqn.inputs[0], self.map.variables[eqn.params["var"]])]
        else:
            anchors = [(v, self.map.values.get(v.id)) for v in eqn.outputs]
        anchors = [(v, m) for v, m in anchors if m is not None and v.type.size]
        if not anchors:
            return 0, None, work
        # Work in proportion to the elements a tile owns of the op's largest output: the
        # one its work produces. A small side output (batch norm's statistics, a CTC loss
        # per example, an RNN's final state) lives on few tiles and must not make them
        # look as if they did all the work.
        v, m = max(anchors, key=lambda a: a[0].type.size)
        groups = region_groups(eqn)
        if groups is not None:
            # Only the tiles holding the region compute, each its part of it.
            region = traffic.region_elements(eqn, groups, self.map)
            units = math.ceil(int(region.max(initial=0)) * work.amount
                              / max(1, int(region.sum())))
            return cost_model.compute_cycles(work.kind, units, dtype, target), m, work
        if work.steps == 1:
            units = math.ceil(int(m.elements(v.type.size, n).max(initial=0)) * work.amount
                              / v.type.size)
            return cost_model.compute_cycles(work.kind, units, dtype, target), m, work
        # A recurrence: each step's share of the output, spread evenly over the output's
        # tiles, one step after the other.
        per_step = math.ceil(v.type.size / work.steps)
        units = math.ceil(work.amount / work.steps / min(m.tiles, per_step))
        return (work.steps * cost_model.compute_cycles(work.kind, units, dtype, target),
                m, work)

    def _busiest_bytes(self, values):
        """Bytes of `values` on the tile holding most of them."""
        n = self.map.num_tiles
        total = 0
        for v in values:
            m = self.map.values.get(v.id)
            if m is not None:
                total = total + m.elements(v.type.size, n) * v.type.itemsize
        return int(total.max()) if hasattr(total, "max") else 0

    def _spans_ipus(self, start, tiles):
        per_ipu = self.map.tiles_per_ipu or self.map.num_tiles
        if tiles > per_ipu:
            return True
        return start // per_ipu != ((start + tiles - 1) % self.map.num_tiles) // per_ipu


def step_cycles(eqn, tile_map, target):
    """[compute, exchange, sync, host_io] cycles of one execution of `eqn` (at any depth;
    not of its bodies), as the lowering charges them."""
    return _Lowering(tile_map, target).cycles(eqn)


def _pipelined(block, pipeline):
    """A pipeline's body runs `depth` times per run; together they take the schedule's
    makespan, not `depth` serial iterations: scale its cycles (`passes/pipeline.py`)."""
    serial = sum(block.cycles.values()) * pipeline["depth"]
    factor = pipeline["makespan_cycles"] / serial if serial else 1.0
    return dataclasses.replace(
        block, cycles={k: round(v * factor) for k, v in block.cycles.items()},
        pipeline=pipeline)


def _profile_row(eqn, cycles, step):
    """For reports: a step's op, layer, cycles per kind, sub-blocks and IPU."""
    subs = step.blocks if step is not None else ()
    return ProfileRow(eqn.op, eqn.source.layer, cycles_of(cycles), subs, eqn.shard or 0)


def _host_io(arriving, leaving, target, replicas):
    """Host I/O cycles of values arriving from the host and values leaving for it."""
    return sum(cost_model.host_io_cycles(sum(v.type.nbytes for v in values), target,
                                         replicas, out)
               for values, out in ((arriving, False), (leaving, True)))


def _add_host_transfer(main, graph, target, replicas):
    """Charges the main block for streaming the program's arguments in and its results
    out, as the hardware does for a compiled function's inputs and outputs: every
    replica's bytes through the host path (`_host_io`) and a sync with the host each way
    (profile row "host_transfer")."""
    transfer = {"compute": 0, "exchange": 0, "sync": 0, "host_io": 0}
    for values, out in ((graph.inputs, False), (graph.outputs, True)):
        if sum(v.type.nbytes for v in values):
            transfer["sync"] += cost_model.sync_cycles(target, external=True)
            transfer["host_io"] += _host_io(() if out else values, values if out else (),
                                            target, replicas)
    if not any(transfer.values()):
        return main
    return dataclasses.replace(
        main, cycles={kind: main.cycles[kind] + transfer[kind] for kind in main.cycles},
        profile=(ProfileRow("host_transfer", "", transfer),) + main.profile)


def lower(graph, tile_map, target, pipelines=None, replicas=1):
    """Returns (blocks, constants, input slots, output slots, number of slots).

    `pipelines` (from `passes/pipeline.py`) gives the schedule of each pipeline loop;
    `replicas` is the replication factor an all-reduce spans."""
    lowering = _Lowering(tile_map, target, pipelines, replicas)
    lowering.block(graph)
    main = _add_host_transfer(lowering.blocks[0], graph, target, replicas)
    variables = tuple(TileMapping(i, m.start, m.tiles, m.per_tile)
                      for i, m in enumerate(tile_map.variables))
    lowering.blocks[0] = dataclasses.replace(
        main, tiles=dataclasses.replace(main.tiles, variables=variables))
    return (lowering.blocks, lowering.constants, list(lowering.slots_of(graph.inputs)),
            list(lowering.slots_of(graph.outputs)), len(lowering.slots))


def equation_cycles(graph, tile_map, target):
    """[compute, exchange, sync, host_io] cycles of each top-level equation of `graph`.

    The same cost rules as `lower`, one row per equation in order, for tools that split a
    graph by cost (the pipeline-stage search of `ipu_saved_model_cli convert`).
    """
    lowering = _Lowering(tile_map, target)
    return [lowering.cycles(eqn) for eqn in graph.equations]
