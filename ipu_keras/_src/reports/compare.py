"""Two reports side by side: what `ipu-keras report A --compare B` prints.

`pair_reports(a_paths, b_paths)` pairs the reports of two directories by executable name
(one report each: the pair whatever their names). `compare(a, b)` returns the rows:
totals (cycles per kind of the last execution, else of each block once; cycles per step;
memory: total, always-live, not-always-live peak, fullest tile, per category), then
cycles per Keras layer and per op, each with A, B, B - A and the change in percent;
`compare_text(a, b)` formats them. No TensorFlow.
"""
from ipu_keras._src.device.executable import CYCLE_KINDS
from ipu_keras._src.reports.document import cycles_by

TOP = 25
"""Rows per table of the text, the largest differences first."""


def pair_reports(a_reports, b_reports):
    """[(a, b)] of two lists of report dicts, paired by executable name."""
    if len(a_reports) == 1 and len(b_reports) == 1:
        return [(a_reports[0], b_reports[0])]
    by_name = {r["name"]: r for r in b_reports}
    return [(a, by_name[a["name"]]) for a in a_reports if a["name"] in by_name]


def _row(name, a, b):
    diff = b - a
    return {"name": name, "a": a, "b": b, "diff": diff,
            "percent": None if not a else 100.0 * diff / a}


def _cycles(report):
    execution = report.get("execution")
    if execution:
        return execution["cycles"], max(1, execution["steps"])
    totals = dict.fromkeys(CYCLE_KINDS, 0)
    for per_kind in cycles_by(report, "op").values():
        for k in CYCLE_KINDS:
            totals[k] += per_kind[k]
    return totals, 1


def _totals(a, b):
    (ca, sa), (cb, sb) = _cycles(a), _cycles(b)
    rows = [_row(f"cycles: {k}", ca[k], cb[k]) for k in CYCLE_KINDS]
    rows.append(_row("cycles: total", sum(ca.values()), sum(cb.values())))
    rows.append(_row("cycles per step", round(sum(ca.values()) / sa),
                     round(sum(cb.values()) / sb)))
    ma, mb = a["memory"], b["memory"]
    for key in ("total_bytes", "always_live_bytes", "peak_not_always_live_bytes",
                "max_tile_bytes"):
        rows.append(_row(f"memory: {key}", ma[key], mb[key]))
    for k in sorted(set(ma["categories"]) | set(mb["categories"])):
        rows.append(_row(f"memory: {k}", ma["categories"].get(k, 0),
                         mb["categories"].get(k, 0)))
    return rows


def _by(a, b, key):
    ca, cb = cycles_by(a, key), cycles_by(b, key)
    rows = [_row(name or "(no layer)", sum(ca.get(name, {}).values()),
                 sum(cb.get(name, {}).values())) for name in set(ca) | set(cb)]
    return sorted(rows, key=lambda r: (-abs(r["diff"]), -r["a"], r["name"]))


def _memory_by_layer(report):
    out = {}
    for row in report["tensor_map"]:
        if row["kind"] != "view":
            layer = row["layer"] or "(no layer)"
            out[layer] = out.get(layer, 0) + row["bytes"]
    return out


def _memory_by(a, b):
    ma, mb = _memory_by_layer(a), _memory_by_layer(b)
    rows = [_row(name, ma.get(name, 0), mb.get(name, 0)) for name in set(ma) | set(mb)]
    return sorted(rows, key=lambda r: (-abs(r["diff"]), -r["a"], r["name"]))


def compare(a, b):
    """{"totals", "layers", "ops", "layer_memory"}: rows of {name, a, b, diff, percent}."""
    return {"totals": _totals(a, b), "layers": _by(a, b, "layer"), "ops": _by(a, b, "op"),
            "layer_memory": _memory_by(a, b)}


def _lines(title, rows, limit=None):
    shown = rows if limit is None else rows[:limit]
    width = max([len(title)] + [len(r["name"]) for r in shown])
    lines = [f"{title:<{width}} {'A':>14} {'B':>14} {'B - A':>14} {'change':>8}"]
    for r in shown:
        change = "new" if r["percent"] is None and r["b"] else (
            "" if r["percent"] is None else f"{r['percent']:+.1f}%")
        lines.append(f"{r['name']:<{width}} {r['a']:>14,} {r['b']:>14,} {r['diff']:>+14,} "
                     f"{change:>8}")
    if limit is not None and len(rows) > limit:
        lines.append(f"... {len(rows) - limit} more rows with smaller differences")
    return lines


def compare_text(a, b, top=TOP):
    """The comparison of reports `a` and `b` as text (module docstring)."""
    rows = compare(a, b)
    what = ("last execution" if a.get("execution") and b.get("execution")
            else "each block once where no execution was recorded")
    lines = [f"A: {a['name']} key {str(a.get('key'))[:16]} on {a['target']['name']}",
             f"B: {b['name']} key {str(b.get('key'))[:16]} on {b['target']['name']}",
             f"cycles of the {what}", ""]
    lines += _lines("totals", rows["totals"]) + [""]
    lines += _lines("cycles per layer", rows["layers"], top) + [""]
    lines += _lines("cycles per op", rows["ops"], top) + [""]
    lines += _lines("tensor bytes per layer", rows["layer_memory"], top)
    return "\n".join(lines)


__all__ = ["compare", "compare_text", "pair_reports"]
