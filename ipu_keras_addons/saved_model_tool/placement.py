"""Placement of a signature graph's nodes: manual sharding and pipeline stages.

A placement is data: node name -> (shard, stage), either None. `manual_sharding` puts
the nodes matching IPU i's regexes on shard i (others on shard 0). `pipeline_cfg` gives
each node a stage, and `device_mapping` a shard per stage: `manual` from regexes per
stage, `load` from a solution file, `auto` by searching stage splits with the cost model
(per-node cycles from the compiler's own cost rules, then a balanced contiguous split of
the nodes in program order). `auto` and `manual` write the solution file `load` reads:
`{"pipeline_mapping": {node: stage, ...}, "device_mapping": [ipu per stage]}` (in a
loaded file, a node of stage -1 or left out joins its latest input's stage; a missing
`device_mapping` is stage i on IPU i). `run` makes each node under `ipu_shard` /
`pipeline_stage` scopes from this mapping (`model.importing_body`).
"""
import collections
import json
import os

from ipu_keras._src.compiler.passes.lower import equation_cycles
from ipu_keras._src.compiler.passes.planner import PlanOptions
from ipu_keras._src.compiler.passes.tile_map import plan_tile_mapping
from ipu_keras._src.compiler.pipeline import GRAPH_PASSES
from ipu_keras.errors import ConversionConfigError
from ipu_keras_addons.saved_model_tool import rewrite
from ipu_keras_addons.saved_model_tool.params import read_json_file

AUTO_SOLUTION = "greedy_search_solutions.pipeconfig"
MANUAL_SOLUTION = "manual.pipeconfig"


def placeable_nodes(sig):
    """The nodes that run on the IPU: all but the signature's input placeholders."""
    inputs = {t.split(":")[0] for t, _ in sig.inputs.values()}
    return [n.name for n in sig.graph_def.node if n.name not in inputs]


def manual_sharding(sig, regex_lists):
    """Node -> (shard, None): shard i for the nodes matching list i, 0 for the others."""
    names = placeable_nodes(sig)
    placement = {n: (0, None) for n in names}
    for shard, regexes in enumerate(regex_lists):
        for name in rewrite.match_nodes(names, regexes, f"manual_sharding[{shard}]"):
            placement[name] = (shard, None)
    return placement


def manual_pipeline(sig, stage_regexes):
    """Node -> stage from regex lists per stage; an unmatched node joins its latest input's
    stage (0 without inputs), so that no stage reads a later one."""
    names = placeable_nodes(sig)
    stages = {}
    for stage, regexes in enumerate(stage_regexes):
        for name in rewrite.match_nodes(names, regexes,
                                        f"pipeline_cfg manual_pipeline_config[{stage}]"):
            stages.setdefault(name, stage)
    return _complete_stages(sig, stages)


def _complete_stages(sig, stages):
    result = {}
    for node in sig.graph_def.node:
        inputs = [result[i.lstrip("^").split(":")[0]] for i in node.input
                  if i.lstrip("^").split(":")[0] in result]
        latest = max(inputs, default=0)
        stage = stages.get(node.name, latest)
        if stage < latest:
            raise ConversionConfigError(
                f"pipeline_cfg expected every node's stage to be at least its inputs' stages. "
                f"Received: node '{node.name}' in stage {stage} reads a node of stage {latest}.")
        result[node.name] = stage
    names = set(placeable_nodes(sig))
    return {n: s for n, s in result.items() if n in names}


def placement_from_stages(stages, device_mapping):
    return {n: (device_mapping[s], s) for n, s in stages.items() if s >= 0}


def write_solution(path, stages, device_mapping):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"pipeline_mapping": stages, "device_mapping": device_mapping}, f, indent=2)
    return path


def load_solution(path, sig):
    """(stages, device_mapping) from a solution file, checked against the graph."""
    solution = read_json_file(path, "pipeline_cfg 'solution_path'")
    mapping = solution.get("pipeline_mapping") if isinstance(solution, dict) else None
    if not isinstance(mapping, dict):
        raise ConversionConfigError(
            f"The pipeline solution file expected a 'pipeline_mapping' object. Received: "
            f"{path!r} without one.")
    unknown = sorted(set(mapping) - set(placeable_nodes(sig)))
    if unknown:
        raise ConversionConfigError(
            f"The pipeline solution file expected nodes of this graph. Received: unknown "
            f"nodes {unknown[:5]} in {path!r}.")
    count = max(mapping.values(), default=0) + 1
    devices = solution.get("device_mapping") or list(range(count))
    stages = _complete_stages(sig, {n: s for n, s in mapping.items() if s >= 0})
    return stages, devices


# -- auto: search stage splits with the cost model ----------------------------------------


def node_costs(traced_graph, target, options):
    """Node name -> cycles of one run, from the compiler's cost rules, and -> bytes it makes."""
    graph = traced_graph
    for _, graph_pass in GRAPH_PASSES:
        graph = graph_pass(graph)
    tile_map = plan_tile_mapping(
        graph, target, PlanOptions.from_poplar_options(options.config().matmuls.poplar_options),
        PlanOptions.from_poplar_options(options.config().convolutions.poplar_options,
                                        "convolutions.poplar_options"))
    cycles, nbytes = collections.Counter(), collections.Counter()
    for eqn, row in zip(graph.equations, equation_cycles(graph, tile_map, target)):
        cycles[eqn.source.node] += sum(row)
        nbytes[eqn.source.node] += sum(v.type.nbytes for v in eqn.outputs)
    return cycles, nbytes


def balanced_split(weights, parts):
    """Start indices of `parts` contiguous groups of `weights` minimising the largest sum."""
    lo, hi = max(weights, default=0), sum(weights)
    while lo < hi:
        mid = (lo + hi) // 2
        if len(_greedy(weights, mid)) <= parts:
            hi = mid
        else:
            lo = mid + 1
    starts = _greedy(weights, lo)
    while len(starts) < parts:  # fewer groups than parts: split off single trailing nodes
        starts.append(max(set(range(1, len(weights))) - set(starts), default=len(weights)))
        starts.sort()
    return starts


def _greedy(weights, limit):
    starts, total = [0], 0
    for i, w in enumerate(weights):
        if total + w > limit and total > 0:
            starts.append(i)
            total = 0
        total += w
    return starts


def auto_pipeline(sig, cycles, nbytes, cfg, bytes_per_ipu):
    """(stages, device_mapping, report) of the `auto` converter.

    Tries 2, 4, 8 ... stages within [min_ipu_quantity, max_ipu_quantity] and keeps the
    first whose largest stage (by the bytes its nodes make) fits one IPU; each try splits
    the nodes in program order by `priority` ("cycle": cycles, "memory": bytes).
    """
    names = placeable_nodes(sig)
    key = nbytes if cfg.get("priority", "cycle") == "memory" else cycles
    weights = [int(key.get(n, 0)) for n in names]
    low, high = max(2, int(cfg.get("min_ipu_quantity", 1))), int(cfg.get("max_ipu_quantity", 64))
    parts, tried = low, []
    while True:
        parts = min(parts, max(len(names), 1))
        starts = balanced_split(weights, parts) + [len(names)]
        stage_of = {n: s for s in range(parts) for n in names[starts[s]:starts[s + 1]]}
        stage_bytes = [sum(nbytes.get(n, 0) for n in names[starts[s]:starts[s + 1]])
                       for s in range(parts)]
        stage_cycles = [sum(weights[starts[s]:starts[s + 1]]) for s in range(parts)]
        tried.append({"stages": parts, "stage_cycles": stage_cycles,
                      "stage_bytes": stage_bytes})
        if max(stage_bytes) <= bytes_per_ipu or parts * 2 > high or parts >= len(names):
            break
        parts *= 2
    return stage_of, list(range(parts)), tried
