"""The content of `report.json`: plain data about one executable and its last run.

`build(executable, name, key, counts)` gathers what the compiler left in the
executable (target, memory summary, liveness, the blocks with their per-step
`profile`, the outlined functions' shared bodies, the `tensor_map`, the plans, pass
times) into the report's sections, and,
when `counts` (block execution counts of the last run) is given, the execution
trace: block counts, cycles per block split by kind, the totals, and the ops where
the cycles went. No TensorFlow, no plotting: see `plots.py` and `html.py`.
"""
import math

from ipu_keras._src.device.executable import CYCLE_KINDS
from ipu_keras._src.device.steps import Call, If, While
from ipu_keras._src.reports.timeline import ipus_section
from ipu_keras.version import __version__

REPORT_FORMAT = 1
TOP_OPS = 25


def build(executable, name, key, counts=None):
    """The report dict of `executable` (see the module docstring)."""
    info = executable.info
    return {
        "format": REPORT_FORMAT,
        "name": name,
        "key": key,
        "ipu_keras_version": __version__,
        "target": dict(executable.target),
        "compile": {k: info.get(k) for k in ("compile_seconds", "trace_seconds",
                                             "pass_seconds", "equations", "cache")},
        "memory": memory_section(executable),
        "liveness": liveness_section(executable),
        "program": program_tree(executable),
        "outlined_functions": outlined_section(executable, counts),
        "plans": list(info.get("plans", [])),
        "tensor_map": tensor_rows(executable),
        "execution": None if counts is None else execution_section(executable, counts),
        "ipus": ipus_section(executable),
    }


def memory_section(executable):
    m = executable.memory
    keys = ("max_tile", "max_tile_bytes", "total_bytes", "always_live_bytes",
            "peak_not_always_live_bytes", "categories", "tile_categories",
            "tiles_out_of_memory", "out_of_memory")
    section = {k: m.get(k) for k in keys}
    section["bytes_per_tile"] = executable.target["bytes_per_tile"]
    section["tile_memory"] = list(m["tile_memory"])
    return section


def _liveness(values, labels):
    steps = [{"step": i, "label": labels[i] if i < len(labels) else "", "bytes": b}
             for i, b in enumerate(values)]
    peak = max(range(len(steps)), key=lambda i: steps[i]["bytes"], default=0)
    return {"steps": steps, "peak_step": peak,
            "peak_bytes": steps[peak]["bytes"] if steps else 0}


def liveness_section(executable):
    """Not-always-live bytes per top-level step and, under `loop`, per step of the loop
    body; each with `ranges`, [tensor id, first step, last step] of the values live then
    (ids of the tensor map)."""
    m, info = executable.memory, executable.info
    section = _liveness(m.get("liveness", []), info.get("liveness_steps") or [])
    section["ranges"] = list(info.get("live_ranges") or [])
    loop = m.get("loop_liveness") or []
    section["loop"] = _liveness(loop, info.get("loop_liveness_steps") or []) if loop else None
    if section["loop"]:
        section["loop"]["ranges"] = list(info.get("loop_live_ranges") or [])
    return section


def _roles(executable):
    """Block index -> (parent block, role) from the control-flow steps."""
    roles = {0: (None, "main")}
    for index, block in enumerate(executable.blocks):
        for step in block.steps:
            if isinstance(step, While):
                roles[step.cond_block] = (index, "while condition")
                roles[step.body_block] = (index, "while body")
            elif isinstance(step, If):
                roles[step.then_block] = (index, "if then")
                roles[step.else_block] = (index, "if else")
            elif isinstance(step, Call):   # a shared body: under its first caller
                roles.setdefault(step.body_block, (index, f"outlined function {step.name}"))
    return roles


def outlined_section(executable, counts=None):
    """Each outlined function's body block: its name, call sites in the program and,
    after a run, how many times it was called (its block's count)."""
    bodies = {}
    for block in executable.blocks:
        for step in block.steps:
            if isinstance(step, Call):
                entry = bodies.setdefault(step.body_block, {
                    "name": step.name, "block": step.body_block, "call_sites": 0,
                    "cycles_per_call": dict(executable.blocks[step.body_block].cycles)})
                entry["call_sites"] += 1
    for entry in bodies.values():
        entry["calls"] = None if counts is None else int(counts[entry["block"]])
    return sorted(bodies.values(), key=lambda e: e["block"])


def program_tree(executable):
    """Each block: its parent, role, cycles of one run of it, its costed steps (each with
    its IPU) and, for a pipeline's body, the index of its schedule in `ipus.pipelines`."""
    roles = _roles(executable)
    pipelines = list(executable.info.get("pipelines") or [])
    tree = []
    for index, block in enumerate(executable.blocks):
        parent, role = roles.get(index, (None, "block"))
        steps = [{"op": row.op, "layer": row.layer, "cycles": dict(row.cycles),
                  "blocks": list(row.blocks), "ipu": row.ipu} for row in block.profile]
        pipeline = pipelines.index(block.pipeline) if block.pipeline in pipelines else None
        tree.append({"index": index, "parent": parent, "role": role,
                     "cycles": dict(block.cycles), "steps": steps, "pipeline": pipeline})
    return tree


def tensor_rows(executable):
    """The tensor map as dicts with the bytes of each tensor."""
    rows = []
    for row in executable.info.get("tensor_map", []):
        id_, kind, shape, dtype, start, tiles, per_tile, layer, op = row
        size = math.prod(shape)
        itemsize = _ITEMSIZE.get(dtype, 4)
        rows.append({"id": id_, "kind": kind, "shape": shape, "dtype": dtype,
                     "bytes": size * itemsize, "start": start,
                     "tiles": min(tiles, max(1, math.ceil(size / max(1, per_tile)))),
                     "per_tile": per_tile, "layer": layer, "op": op})
    return rows


_ITEMSIZE = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2,
             "int32": 4, "uint32": 4, "float32": 4, "int64": 8, "uint64": 8, "float64": 8}


def execution_section(executable, counts):
    """The execution trace of a run whose blocks ran `counts` times."""
    blocks, totals, ops = [], dict.fromkeys(CYCLE_KINDS, 0), {}
    for index, (block, count) in enumerate(zip(executable.blocks, counts)):
        cycles = {k: int(block.cycles[k]) * int(count) for k in CYCLE_KINDS}
        blocks.append({"index": index, "count": int(count), "cycles": cycles})
        for k in CYCLE_KINDS:
            totals[k] += cycles[k]
        for row in block.profile:
            entry = ops.setdefault((row.op, row.layer), dict.fromkeys(CYCLE_KINDS, 0))
            for k in CYCLE_KINDS:
                entry[k] += int(row.cycles[k]) * int(count)
    total = sum(totals.values())
    top = sorted(ops.items(), key=lambda item: -sum(item[1].values()))[:TOP_OPS]
    return {
        "steps": _steps(executable, counts),
        "block_counts": [int(c) for c in counts],
        "cycles": totals,
        "total_cycles": total,
        "seconds": total / executable.target["clock_hz"],
        "blocks": blocks,
        "top_ops": [{"op": op, "layer": layer, "cycles": c, "total": sum(c.values())}
                    for (op, layer), c in top if sum(c.values())],
    }


def _steps(executable, counts):
    bodies = [step.body_block for step in executable.blocks[0].steps
              if isinstance(step, While)]
    return int(max(counts[b] for b in bodies)) if bodies else 1


def cycle_breakdown(report):
    """(cycles per kind, top ops, what was counted): the last run's, else one pass per block."""
    execution = report.get("execution")
    if execution:
        return execution["cycles"], execution["top_ops"], "last execution"
    totals, ops = dict.fromkeys(CYCLE_KINDS, 0), {}
    for block in report["program"]:
        for step in block["steps"]:
            entry = ops.setdefault((step["op"], step["layer"]), dict.fromkeys(CYCLE_KINDS, 0))
            for k in CYCLE_KINDS:
                entry[k] += step["cycles"][k]
                totals[k] += step["cycles"][k]
    top = sorted(ops.items(), key=lambda i: -sum(i[1].values()))[:TOP_OPS]
    rows = [{"op": op, "layer": layer, "cycles": c, "total": sum(c.values())}
            for (op, layer), c in top if sum(c.values())]
    return totals, rows, "each block once"


def cycles_by(report, key):
    """{name: {kind: cycles}} per op (`key` "op") or per Keras layer (`key` "layer", ""
    for steps of no layer) over the last execution (each block times it ran), else each
    block once."""
    execution = report.get("execution")
    counts = execution["block_counts"] if execution else [1] * len(report["program"])
    out = {}
    for block, count in zip(report["program"], counts):
        for step in block["steps"]:
            entry = out.setdefault(step[key], dict.fromkeys(CYCLE_KINDS, 0))
            for k in CYCLE_KINDS:
                entry[k] += step["cycles"][k] * count
    return out


__all__ = ["REPORT_FORMAT", "build", "cycle_breakdown", "cycles_by", "execution_section",
           "program_tree", "tensor_rows"]
