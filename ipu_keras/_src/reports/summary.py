"""Text summaries of reports: what `ipu-keras report DIR` prints.

`busiest_tiles`, `largest_tensors` and `cycle_breakdown` pick the rows from a report
dict (they are shared with `html.py`); `summarise(report)` formats them as text:
the target, the busiest tiles (bytes and share of the tile), the largest tensors
(with the Keras layer that made them) and where the cycles go (per kind, per block
and per op). `find_reports(directory)` finds the report files under a directory.
"""
import json
import os

from ipu_keras._src.device.executable import CYCLE_KINDS
from ipu_keras._src.reports.document import cycle_breakdown
from ipu_keras._src.reports.timeline import ipu_lines


def find_reports(directory):
    """Paths of the `report.json` files in `directory` or its sub-directories."""
    own = os.path.join(directory, "report.json")
    if os.path.isfile(own):
        return [own]
    found = []
    for entry in sorted(os.listdir(directory)):
        path = os.path.join(directory, entry, "report.json")
        if os.path.isfile(path):
            found.append(path)
    return found


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def busiest_tiles(report, n=5):
    """[(tiles, bytes, fraction of the tile, {category: bytes})] of the `n` fullest kinds
    of tile, fullest first. Tiles holding the same bytes in every category are one row
    (`tiles`, a sorted list): a tensor spread evenly over hundreds of tiles and the code
    every tile holds make long runs of identical tiles, which as one row per tile were
    ten identical rows."""
    memory = report["memory"]
    per_tile = memory["tile_memory"]
    categories = memory["tile_categories"]
    groups = {}
    for t, used in enumerate(per_tile):
        key = (used,) + tuple(v[t] for v in categories.values())
        groups.setdefault(key, []).append(t)
    order = sorted(groups.items(), key=lambda item: (-item[0][0], item[1][0]))[:n]
    capacity = memory["bytes_per_tile"]
    return [(tiles, key[0], key[0] / capacity,
             {k: v for k, v in zip(categories, key[1:]) if v}) for key, tiles in order]


def tile_ranges(tiles, limit=4):
    """`tiles` (sorted) as text: runs as `a-b`, at most `limit` runs, then how many more."""
    runs = []
    for t in tiles:
        if runs and runs[-1][1] == t - 1:
            runs[-1][1] = t
        else:
            runs.append([t, t])
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:limit])
    if len(runs) > limit:
        text += f" and {len(runs) - limit} more runs"
    return text


def largest_tensors(report, n=10):
    """The `n` largest tensors of the tensor map (views left out: they share memory)."""
    rows = [r for r in report["tensor_map"] if r["kind"] != "view"]
    return sorted(rows, key=lambda r: (-r["bytes"], r["id"]))[:n]


def _target_line(target):
    ipus = target.get("num_ipus", 1)
    return (f"target: {target['name']}, {ipus} IPU{'s' if ipus > 1 else ''} x "
            f"{target['tiles_per_ipu']:,} tiles, {target['bytes_per_tile']:,} bytes per tile, "
            f"{target['clock_hz'] / 1e9:.2f} GHz")


def _memory_lines(report):
    memory = report["memory"]
    lines = [f"memory: {memory['total_bytes']:,} bytes on all tiles (always-live "
             f"{memory['always_live_bytes']:,}, not-always-live peak "
             f"{memory['peak_not_always_live_bytes']:,})"]
    if memory.get("tiles_out_of_memory"):
        lines.append(f"  OUT OF MEMORY on {len(memory['tiles_out_of_memory'])} tiles")
    liveness = report["liveness"].get("loop") or report["liveness"]
    if liveness["steps"]:
        where = "of the loop body" if report["liveness"].get("loop") else ""
        peak = liveness["steps"][liveness["peak_step"]]
        lines.append(f"liveness peak: {liveness['peak_bytes']:,} bytes not-always-live at step "
                     f"{liveness['peak_step']} {where} ({peak['label']})".replace("  ", " "))
    lines.append("busiest tiles:")
    for tiles, used, share, categories in busiest_tiles(report):
        top = sorted(categories.items(), key=lambda kv: -kv[1])[:3]
        parts = ", ".join(f"{k} {v:,}" for k, v in top)
        where = (f"tile {tiles[0]}" if len(tiles) == 1
                 else f"{len(tiles):,} tiles ({tile_ranges(tiles, 3)})")
        lines.append(f"  {used:>10,} bytes ({share:6.1%} of the tile) on {where}  [{parts}]")
    return lines


def _tensor_lines(report):
    lines = ["largest tensors:"]
    for row in largest_tensors(report):
        shape = f"{row['dtype']}[{','.join(map(str, row['shape']))}]"
        where = f"layer '{row['layer']}'" if row["layer"] else f"({row['kind']})"
        name = row["op"] if row["kind"] != "variable" else f"variable {row['op']}"
        lines.append(f"  {row['bytes']:>12,} bytes  {shape:<26} on {row['tiles']:>5,} tiles  "
                     f"{name:<28} {where}")
    return lines


def _cycle_lines(report):
    totals, top, what = cycle_breakdown(report)
    total = sum(totals.values()) or 1
    execution = report.get("execution")
    if execution:
        head = (f"cycles (last execution, {execution['steps']} steps): "
                f"{execution['total_cycles']:,} = {execution['seconds'] * 1e3:.3f} ms "
                f"on the device, {execution['total_cycles'] / max(1, execution['steps']):,.0f}"
                f" per step")
    else:
        head = f"cycles (no execution recorded; {what}): {sum(totals.values()):,}"
    lines = [head, "  " + ", ".join(f"{k} {totals[k]:,} ({totals[k] / total:.1%})"
                                    for k in CYCLE_KINDS)]
    if execution:
        roles = {b["index"]: b["role"] for b in report["program"]}
        blocks = sorted(execution["blocks"], key=lambda b: -sum(b["cycles"].values()))[:3]
        lines.append("top blocks:")
        for b in blocks:
            cycles = sum(b["cycles"].values())
            times = "time" if b["count"] == 1 else "times"
            lines.append(f"  block {b['index']} ({roles.get(b['index'], '')}) ran {b['count']:,}"
                         f" {times}: {cycles:,} cycles ({cycles / total:.1%})")
    lines.append("top ops:")
    for row in top[:10]:
        share = row["total"] / total
        layer = f" (layer '{row['layer']}')" if row["layer"] else ""
        lines.append(f"  {row['total']:>12,} cycles ({share:5.1%})  {row['op']}{layer}")
    return lines


def summarise(report):
    """The text summary of one report dict."""
    compile_info = report.get("compile") or {}
    cache = (compile_info.get("cache") or {}).get("status", "off")
    lines = [f"report: {report['name'] or '(unnamed)'}  key {str(report.get('key'))[:16]}",
             _target_line(report["target"]),
             f"compile: {compile_info.get('compile_seconds') or 0:.2f} s, "
             f"{compile_info.get('equations')} equations, cache {cache}"]
    lines += (_memory_lines(report) + ipu_lines(report) + _tensor_lines(report)
              + _cycle_lines(report))
    return "\n".join(lines)


__all__ = ["busiest_tiles", "cycle_breakdown", "find_reports", "largest_tensors", "load",
           "summarise", "tile_ranges"]
