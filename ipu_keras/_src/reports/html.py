"""`report.html`: one self-contained page per report, interactive, working offline.

`render(report, images, trace)` returns the page: the target; the execution trace as a
zoomable timeline; memory per tile by category (hover a tile for its tensors) and the
busiest kinds of tile; liveness (click a step for the values live then); cycles per
kind, per Keras layer and per op; the pipeline; the largest tensors; the whole program
tree, collapsible; the compile times; and the static PNGs (`images` maps a PNG's file
name to its bytes; missing images are left out). The interactive views are drawn by
`report.js` with plotly.js, both inlined (`interactive.py`); the tables are plain HTML.
Plain string formatting, no template engine.
"""
import base64
import html

from ipu_keras._src.device.executable import CYCLE_KINDS
from ipu_keras._src.reports.interactive import page_data, scripts
from ipu_keras._src.reports.summary import (busiest_tiles, cycle_breakdown, largest_tensors,
                                            tile_ranges)
from ipu_keras._src.reports.timeline import timeline_html

_STYLE = """body{font-family:sans-serif;margin:2em;max-width:1100px}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;
padding:2px 8px;text-align:right}th{background:#eee}td.l,th.l{text-align:left}
img{max-width:100%;display:block;margin:1em 0}
.tree{font-family:monospace;font-size:90%}.tree details{margin-left:1.2em}
.tree div{margin-left:1.2em}.side{font-size:90%}nav a{margin-right:1em}"""


def _table(headers, rows, left=()):
    head = "".join(f"<th class='{'l' if i in left else ''}'>{html.escape(h)}</th>"
                   for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(f"<td class='{'l' if i in left else ''}'>{html.escape(str(c))}</td>"
                         for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _image(name, images):
    data = images.get(name)
    if not data:
        return ""
    encoded = base64.b64encode(data).decode()
    return f"<img alt='{name}' src='data:image/png;base64,{encoded}'>"


def _memory(report):
    m = report["memory"]
    summary = _table(["total bytes", "always-live", "not-always-live peak", "busiest tile",
                      "its bytes", "bytes per tile", "tiles out of memory"],
                     [[f"{m['total_bytes']:,}", f"{m['always_live_bytes']:,}",
                       f"{m['peak_not_always_live_bytes']:,}", m["max_tile"],
                       f"{m['max_tile_bytes']:,}", f"{m['bytes_per_tile']:,}",
                       len(m.get("tiles_out_of_memory") or [])]])
    categories = _table(["category", "bytes (all tiles)"],
                        [[k, f"{v:,}"] for k, v in m["categories"].items()], left=(0,))
    tiles = _table(["tiles", "how many", "bytes each", "% of the tile", "largest categories"],
                   [[tile_ranges(t), len(t), f"{b:,}", f"{s:.1%}", ", ".join(
                       f"{k} {v:,}" for k, v in sorted(c.items(), key=lambda kv: -kv[1])[:3])]
                    for t, b, s, c in busiest_tiles(report, 10)], left=(0, 4))
    return (summary + "<div class='plot' id='memory-plot'></div><div class='side' "
            "id='tile-info'>Hover or click a tile for its tensors.</div>" + categories
            + "<h3>Busiest tiles</h3><p>Tiles holding the same bytes in every category "
            "are one row.</p>" + tiles)


def _tensors(report):
    rows = [[r["id"], r["kind"], f"{r['dtype']}[{','.join(map(str, r['shape']))}]",
             f"{r['bytes']:,}", r["start"], r["tiles"], r["per_tile"], r["op"], r["layer"]]
            for r in largest_tensors(report, 25)]
    return _table(["id", "kind", "type", "bytes", "start tile", "tiles", "per tile", "op",
                   "layer"], rows, left=(1, 2, 7, 8))


def _cycles(report):
    totals, top, what = cycle_breakdown(report)
    total = sum(totals.values()) or 1
    execution = report.get("execution")
    head = (f"<p>Last execution: {execution['steps']} steps, {execution['total_cycles']:,} "
            f"cycles, {execution['seconds'] * 1e3:.3f} ms.</p>" if execution
            else f"<p>No execution recorded yet: cycles of {what}.</p>")
    kinds = _table(list(CYCLE_KINDS) + ["total"],
                   [[f"{totals[k]:,} ({totals[k] / total:.1%})" for k in CYCLE_KINDS]
                    + [f"{sum(totals.values()):,}"]])
    ops = _table(["op", "layer"] + list(CYCLE_KINDS) + ["total", "share"],
                 [[r["op"], r["layer"]] + [f"{r['cycles'][k]:,}" for k in CYCLE_KINDS]
                  + [f"{r['total']:,}", f"{r['total'] / total:.1%}"] for r in top],
                 left=(0, 1))
    return head + kinds + ops


def _tree(report, index=0, seen=None):
    """The whole program tree: each block a collapsible `<details>`, every step listed."""
    seen = set() if seen is None else seen
    seen.add(index)
    block = report["program"][index]
    cycles = sum(block["cycles"].values())
    count = ""
    if report.get("execution"):
        count = f", ran {report['execution']['block_counts'][index]:,} times"
    items = []
    for step in block["steps"]:
        label = html.escape(step["op"] + (f" ({step['layer']})" if step["layer"] else ""))
        where = f" on IPU {step['ipu']}" if step.get("ipu") else ""
        children = "".join(_tree(report, b, seen) for b in step["blocks"] if b not in seen)
        items.append(f"<div>{label}: {sum(step['cycles'].values()):,} cycles{where}"
                     f"{children}</div>")
    opened = " open" if index == 0 else ""
    return (f"<details{opened}><summary>block {index} ({html.escape(block['role'])}): "
            f"{cycles:,} cycles per run{count}, {len(block['steps'])} steps</summary>"
            f"{''.join(items)}</details>")


def _liveness(report):
    rows = []
    for what, section in (("top level", report["liveness"]),
                          ("device loop body", report["liveness"].get("loop"))):
        if section and section["steps"]:
            peak = section["steps"][section["peak_step"]]
            rows.append([what, len(section["steps"]), section["peak_step"], peak["label"],
                         f"{section['peak_bytes']:,}"])
    table = _table(["program", "steps", "peak step", "peak op", "not-always-live bytes"], rows,
                   left=(0, 3))
    views = "".join(
        f"<div><h3>{what}</h3><div class='plot' id='liveness-{key}'></div>"
        f"<div class='side' id='live-{key}'></div></div>"
        for key, what in (("top", "Top-level program"), ("loop", "Device loop body")))
    return table + "<p>Click a step to list the values live during it.</p>" + views


_NAV = ("timeline", "memory", "liveness", "cycles", "pipeline", "tensors", "program",
        "compile", "plots")


def render(report, images, trace=None):
    """The HTML page of `report` with the PNGs in `images` (name -> bytes) and the
    execution trace `trace` (a trace document of `trace.py`, or None)."""
    t = report["target"]
    name = html.escape(report["name"] or "(unnamed)")
    target = _table(["name", "IPUs", "tiles per IPU", "bytes per tile", "clock"],
                    [[t["name"], t.get("num_ipus", 1), f"{t['tiles_per_ipu']:,}",
                      f"{t['bytes_per_tile']:,}", f"{t['clock_hz'] / 1e9:.2f} GHz"]])
    passes = (report.get("compile") or {}).get("pass_seconds") or {}
    compile_table = _table(["pass", "seconds"], [[k, f"{v:.4f}"] for k, v in passes.items()],
                           left=(0,))
    ran = ("the last execution" if report.get("execution") else
           "one pass of the program (no execution recorded yet)")
    sections = [
        f"<h1>ipu_keras report: {name}</h1><p>key {html.escape(str(report.get('key')))}</p>",
        "<nav>" + "".join(f"<a href='#{s}'>{s}</a>" for s in _NAV) + "</nav>",
        "<h2>Target</h2>", target,
        f"<h2 id='timeline'>Execution trace</h2><p>Of {ran}; drag to zoom, double-click "
        "to reset. The same trace is in trace.json.gz for Perfetto or chrome://tracing."
        "</p><div class='plot' id='timeline-plot'></div>",
        "<h2 id='memory'>Memory</h2>", _memory(report),
        "<h2 id='liveness'>Liveness</h2>", _liveness(report),
        "<h2 id='cycles'>Cycles</h2>", _cycles(report),
        "<h3>Per Keras layer (optimizer updates with their variable's layer)</h3>"
        "<div class='plot' id='layers-plot'></div>",
        "<h3>Per op</h3><div class='plot' id='ops-plot'></div>",
        "<h2 id='pipeline'>IPUs and pipeline</h2>",
        timeline_html(report, _table) or "<p>One IPU.</p>",
        "<h2 id='tensors'>Largest tensors</h2>", _tensors(report),
        "<h2 id='program'>Program</h2><div class='tree'>", _tree(report), "</div>",
        "<h2 id='compile'>Compile</h2>", compile_table,
        "<h2 id='plots'>Static plots</h2>", _image("memory.png", images),
        _image("liveness.png", images), _image("cycles.png", images),
        _image("timeline.png", images), _image("trace.png", images),
        scripts(page_data(report, trace)),
    ]
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{name}</title>"
            f"<style>{_STYLE}</style></head><body>{''.join(sections)}</body></html>")


__all__ = ["render"]
