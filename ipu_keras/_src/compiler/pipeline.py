"""The compiler: IR graph -> `Executable`, as a readable list of named passes.

Graph -> Graph passes run in `GRAPH_PASSES` order (`shard` places every equation on an
IPU); the executable is then built for the IPUs one replica uses (`replica_target`:
the shards, not the whole device, whose remaining IPUs are for replicas); then the
analyses (tile map with
the matmul/conv/gather planner, memory plan) and the lowering (with the cycle tables)
produce the executable. The pipeline owns the order of the passes and the options
they get (`poplar_options` of matmuls and convolutions, `debug.allowOutOfMemory` from
`POPLAR_ENGINE_OPTIONS` and `--use_ipu_model` from `TF_POPLAR_FLAGS`, `allow_recompute`
of the `recompute` pass); the passes own
what they compute. Each pass is timed and the
times are kept in `executable.info["pass_seconds"]`. The compiler knows nothing of
TensorFlow or Keras: its input is IR, its output plain data.
"""
import dataclasses
import functools
import time

from ipu_keras._src.device.executable import Executable
from ipu_keras._src.compiler.passes.dce import eliminate_dead_code
from ipu_keras._src.compiler.passes.fold import fold_constants
from ipu_keras._src.compiler.passes.inline import inline_calls
from ipu_keras._src.compiler.passes.lower import lower
from ipu_keras._src.compiler.passes.memory import (allow_out_of_memory, check_memory, live_ranges,
                                                    plan_memory)
from ipu_keras._src.compiler.passes.pipeline import plan_pipelines
from ipu_keras._src.compiler.passes.planner import PlanOptions
from ipu_keras._src.compiler.passes.recompute import recompute
from ipu_keras._src.compiler.passes.shard import check_device, num_shards, shard
from ipu_keras._src.compiler.passes.slice_apply import apply_slices
from ipu_keras._src.compiler.passes.tile_map import plan_tile_mapping
from ipu_keras._src.flags import use_ipu_model
from ipu_keras._src.ir.verify import verify as _verify_ir
from ipu_keras._src.ops.registry import get_op

verify = functools.partial(_verify_ir, get_op=get_op)
"""The IR verifier, given the op registry."""

GRAPH_PASSES = (
    ("verify", verify),
    ("inline", inline_calls),
    ("constant-fold", fold_constants),
    ("slice-apply", apply_slices),
    ("dead-code", eliminate_dead_code),
    ("shard", shard),
    ("recompute", recompute),
    ("verify-optimised", verify),
)


PASS_NAMES = tuple(name for name, _ in GRAPH_PASSES) + (
    "tile-map", "memory-plan", "pipeline", "lower")
"""Every pass `compile_graph` runs, in order (the names of `on_pass` and `pass_seconds`)."""


def compile_graph(graph, target, compile_ipu_code=True, matmul_options=None,
                  conv_options=None, allow_oom=None, on_pass=None, allow_recompute=False,
                  ipu_model=None):
    """Compile a verified-or-not IR graph for `target` (a `simulator.targets.Target`).

    Args:
        graph: The IR graph.
        target: The simulated device.
        compile_ipu_code: Count code (vertex, control, exchange) in tile memory; vertex
            state counts either way, as in Poplar.
        matmul_options: `IPUConfig.matmuls.poplar_options` (dict of strings) or None.
        conv_options: `IPUConfig.convolutions.poplar_options` or None.
        allow_oom: Defer an out-of-memory error to run time; None reads
            `POPLAR_ENGINE_OPTIONS='{"debug.allowOutOfMemory": "true"}'`.
        on_pass: Called as `on_pass(name, seconds)` after each pass of `PASS_NAMES`
            (progress bars); None for no calls.
        allow_recompute: `IPUConfig.allow_recompute`: the `recompute` pass recomputes
            forward values in the backward pass instead of keeping them.
        ipu_model: Compile for Graphcore's IPU Model, which lists the tiles out of
            memory in the memory summary but does not stop on them; None reads
            `TF_POPLAR_FLAGS=--use_ipu_model`.

    Raises:
        OutOfTileMemoryError: if a tile overflows (unless out-of-memory is allowed or
            the target is the IPU Model).
        ShardingError: if the graph's shards do not divide `target.num_ipus`.
    """
    clock = _PassClock(on_pass)
    pass_options = {"recompute": {"allow_recompute": allow_recompute}}
    for name, graph_pass in GRAPH_PASSES:
        graph = graph_pass(graph, **pass_options.get(name, {}))
        clock.done(name)
    device_ipus, target = target.num_ipus, replica_target(graph, target)
    tile_map = plan_tile_mapping(
        graph, target, PlanOptions.from_poplar_options(matmul_options),
        PlanOptions.from_poplar_options(conv_options, "convolutions.poplar_options"))
    clock.done("tile-map")
    memory = plan_memory(graph, tile_map, compile_ipu_code)
    allow = allow_out_of_memory() if allow_oom is None else allow_oom
    ipu_model = use_ipu_model() if ipu_model is None else ipu_model
    out_of_memory = check_memory(memory, graph, tile_map, target, allow=allow,
                                 ipu_model=ipu_model)
    summary = memory.summary(target.bytes_per_tile, target.tiles_per_ipu)
    summary["out_of_memory"] = out_of_memory
    clock.done("memory-plan")
    pipelines = plan_pipelines(graph, tile_map, target)
    clock.done("pipeline")
    lowered = lower(graph, tile_map, target, pipelines, device_ipus // target.num_ipus)
    clock.done("lower")
    executable = _assemble(graph, tile_map, target, lowered, summary, clock)
    executable.info["pipelines"] = list(pipelines.values())
    executable.info["device_ipus"] = device_ipus    # the target holds one replica's IPUs
    return executable


def replica_target(graph, target):
    """The part of `target` one replica of `graph` runs on: `num_shards(graph)` IPUs.

    Raises:
        ShardingError: if the shards do not divide the device's IPUs.
    """
    shards = num_shards(graph)
    check_device(shards, target.num_ipus)
    return dataclasses.replace(target, num_ipus=shards)


class _PassClock:
    """Times each pass and reports it to `on_pass`."""

    def __init__(self, on_pass):
        self.on_pass = on_pass
        self.seconds = {}
        self.start = self.last = time.perf_counter()

    def done(self, name):
        now = time.perf_counter()
        self.seconds[name], self.last = now - self.last, now
        if self.on_pass is not None:
            self.on_pass(name, self.seconds[name])


def _assemble(graph, tile_map, target, lowered, memory, clock):
    """The `Executable`: the lowered programs plus what reports and the runtime read."""
    blocks, constants, inputs, outputs, num_slots = lowered
    written = {eqn.params["var"] for eqn in graph.walk()
               if get_op(eqn.op).role == "variable_write"}
    return Executable(
        target=target.to_dict(),
        num_slots=num_slots,
        inputs=inputs,
        outputs=outputs,
        input_types=[_type(v.type) for v in graph.inputs],
        output_types=[_type(v.type) for v in graph.outputs],
        variables=[dict(name=s.name, **_type(s.type), written=i in written)
                   for i, s in enumerate(graph.variables)],
        infeeds=[dict(name=f.name, types=[_type(t) for t in f.types]) for f in graph.infeeds],
        outfeeds=[dict(name=f.name, types=[_type(t) for t in f.types]) for f in graph.outfeeds],
        blocks=blocks,
        constants=constants,
        memory=memory,
        info={"pass_seconds": clock.seconds,
              "compile_seconds": time.perf_counter() - clock.start,
              "equations": sum(1 for _ in graph.walk()), "plans": _plans(graph, tile_map),
              "tensor_map": tensor_map(graph, tile_map),
              "liveness_steps": [_label(eqn) for eqn in graph.equations],
              "loop_liveness_steps": _loop_labels(graph),
              "live_ranges": live_ranges(graph, tile_map),
              "loop_live_ranges": _loop_live_ranges(graph, tile_map)},
    )


def _type(t):
    return {"shape": list(t.shape), "dtype": t.dtype}


def _plans(graph, tile_map):
    """The chosen plan of every planned op, for reports."""
    plans = []
    for eqn in graph.walk():
        plan = tile_map.plan_of(eqn)
        if plan is not None:
            plans.append(dict(plan.to_dict(), op=eqn.op, layer=eqn.source.layer,
                              node=eqn.source.node, shape=list(eqn.outputs[0].type.shape)))
    return plans


def _label(eqn):
    return f"{eqn.op} ({eqn.source.layer})" if eqn.source.layer else eqn.op


def _loop_labels(graph):
    """Labels of the steps of the first top-level loop's body (memory `loop_liveness`)."""
    loop = next((eqn for eqn in graph.equations if get_op(eqn.op).role == "loop"), None)
    return [] if loop is None else [_label(eqn) for eqn in loop.params["body"].equations]


def _loop_live_ranges(graph, tile_map):
    """`live_ranges` of the first top-level loop's body (the steps of `loop_liveness`)."""
    loop = next((eqn for eqn in graph.equations if get_op(eqn.op).role == "loop"), None)
    return [] if loop is None else live_ranges(loop.params["body"], tile_map)


def tensor_map(graph, tile_map):
    """Where each value and variable lives, for reports: a compact list of rows.

    Each row: `[id, kind, shape, dtype, start, tiles, per_tile, layer, op]` with kind
    "variable" (id is the variable's index, op its name), "input" (of the graph, or of a
    control-flow body: op names the control-flow op) or "value" (ids of the optimised
    graph); a view (a reshape, a static slice, a concatenation) row has kind "view" and
    shares its sources' memory (a view of parts of several values gives the first tile
    holding its elements, how many tiles do and the most one holds). Values without a
    mapping (unused) are left out.
    """
    rows = []
    for index, (spec, m) in enumerate(zip(graph.variables, tile_map.variables)):
        rows.append([index, "variable", list(spec.type.shape), spec.type.dtype,
                     m.start, m.tiles, m.per_tile, "", spec.name])

    def add(value, kind, layer, op):
        m = tile_map.values.get(value.id)
        if m is not None:
            kind = "view" if tile_map.is_view(value.id) else kind
            rows.append([value.id, kind, list(value.type.shape), value.type.dtype,
                         m.start, m.tiles, m.per_tile, layer, op])

    for value in graph.inputs:
        add(value, "input", "", "input")
    for eqn in graph.walk():
        if get_op(eqn.op).role != "variable_read":
            for value in eqn.outputs:
                add(value, "value", eqn.source.layer, eqn.op)
        for sub in eqn.subgraphs():   # a body's parameters: the values it carries
            for value in sub.inputs:
                add(value, "input", eqn.source.layer, f"{eqn.op} input")
    return rows
