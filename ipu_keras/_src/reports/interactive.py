"""The data and the script of `report.html`'s interactive views.

`page_data(report, trace)` gathers, as plain JSON data, what the page's script
(`report.js`) draws with plotly.js: the execution trace's slices as timeline rows (per
IPU: program steps, their phases, Keras layers, pipeline boxes; the program's blocks and
loops; inter-IPU copies and collectives), the memory per tile by category, the tensors
(for a tile's hover and a liveness step's list), the liveness curves with each value's
live range, and the cycles per op and per layer. `scripts()` returns the `<script>`
elements: plotly.js inlined from the `plotly` package (no network: the page works
offline) and our script; without the package the page says so and keeps its tables.
"""
import importlib.util
import json
import os

from ipu_keras._src.device.executable import CYCLE_KINDS
from ipu_keras._src.reports.document import cycles_by

_PHASES = ("compute", "exchange", "sync", "host_io")
_JS = os.path.join(os.path.dirname(__file__), "report.js")


def _timeline(trace):
    """Rows and columnar bars of the trace's complete events, grouped by what they are."""
    if trace is None:
        return None
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    processes = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
                 if e["ph"] == "M" and e["name"] == "process_name"}
    rows, groups, open_ends = [], {}, {}
    for e in trace["traceEvents"]:   # in time order on each row (trace.py sorts them)
        if e["ph"] != "X":
            continue
        cat = e["cat"]
        thread = "phases" if cat in _PHASES else names.get((e["pid"], e["tid"]), "")
        process = str(processes.get(e["pid"], e["pid"])).split(" (")[0]
        row = f"{process} · {thread}"
        if cat == "pipeline":   # forward, backward and other boxes in their own colours
            cat = f"pipeline {e['args'].get('pass')}"
        if cat == "program":   # nested slices (blocks in loops in blocks): a row per depth
            stack = open_ends.setdefault(row, [])
            while stack and stack[-1] <= e["args"]["start_cycle"]:
                stack.pop()
            stack.append(e["args"]["end_cycle"])
            row = f"{row} {len(stack)}"
        if row not in rows:
            rows.append(row)
        args = e["args"]
        group = groups.setdefault(cat, {"y": [], "base": [], "x": [], "text": []})
        group["y"].append(row)
        group["base"].append(args["start_cycle"])
        group["x"].append(args["end_cycle"] - args["start_cycle"])
        layer = args.get("layer")
        group["text"].append(f"{e['name']} ({layer})" if layer else e["name"])
    return {"rows": rows, "groups": groups,
            "total": trace["metadata"]["total_cycles"]}


def _tensors(report):
    """[id, kind, name, layer, bytes, start tile, tiles, bytes per tile] per tensor."""
    out = []
    for r in report["tensor_map"]:
        if r["kind"] == "view":
            continue
        per_tile = -(-r["bytes"] // max(1, r["tiles"]))
        out.append([r["id"], r["kind"], r["op"], r["layer"], r["bytes"], r["start"],
                    r["tiles"], per_tile])
    return out


def _liveness(section):
    if not section or not section["steps"]:
        return None
    return {"labels": [s["label"] for s in section["steps"]],
            "bytes": [s["bytes"] for s in section["steps"]],
            "ranges": section.get("ranges") or [], "peak": section["peak_step"]}


def _cycles(report, key):
    rows = sorted(cycles_by(report, key).items(), key=lambda kv: -sum(kv[1].values()))
    rows = [(name, c) for name, c in rows if sum(c.values())]
    return {"names": [name or "(no layer)" for name, _ in rows],
            "kinds": {k: [c[k] for _, c in rows] for k in CYCLE_KINDS}}


def page_data(report, trace):
    """The JSON data of the interactive views (module docstring)."""
    memory = report["memory"]
    categories = {k: v for k, v in memory["tile_categories"].items() if any(v)}
    liveness = report["liveness"]
    return {
        "timeline": _timeline(trace),
        "memory": {"categories": categories, "capacity": memory["bytes_per_tile"],
                   "max": max(memory["tile_memory"], default=0),
                   "tiles": len(memory["tile_memory"])},
        "tensors": _tensors(report),
        "liveness": {"top": _liveness(liveness), "loop": _liveness(liveness.get("loop"))},
        "ops": _cycles(report, "op"),
        "layers": _cycles(report, "layer"),
    }


def plotly_js():
    """The text of plotly.min.js from the `plotly` package, or None without it."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "package_data",
                        "plotly.min.js")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return f.read()


def scripts(data):
    """The page's `<script>` elements: the data, plotly.js (inlined) and report.js."""
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    library = plotly_js()
    with open(_JS, encoding="utf-8") as f:
        ours = f.read()
    parts = [f"<script type='application/json' id='ipu-data'>{payload}</script>"]
    if library is None:
        parts.append("<script>window.IPU_NO_PLOTLY = true;</script>")
    else:
        library = library.replace("</script", "<\\/script")
        parts.append(f"<script>{library}</script>")
    parts.append(f"<script>{ours}</script>")
    return "".join(parts)


__all__ = ["page_data", "plotly_js", "scripts"]
