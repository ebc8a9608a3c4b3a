"""The multi-IPU part of a report: memory per IPU and each pipeline's schedule.

`ipus_section(executable)` is the report's `ipus` section (the replicas the device runs,
bytes and busiest tile per IPU, and per pipeline its stages' forward/backward cycles,
makespan against the serial time, per-IPU busy and idle cycles and the timeline boxes); `ipu_lines` its text for
the summary; `timeline_html` its HTML. `plots.timeline_plot` draws it.
"""


def ipus_section(executable):
    memory = executable.memory
    ipus = executable.target.get("num_ipus", 1)
    return {"replicas": max(1, int(executable.info.get("device_ipus") or ipus) // ipus),
            "ipu_memory": list(memory.get("ipu_memory") or [memory["total_bytes"]]),
            "ipu_max_tile_bytes": list(memory.get("ipu_max_tile_bytes") or
                                       [memory["max_tile_bytes"]]),
            "pipelines": list(executable.info.get("pipelines") or [])}


def ipu_lines(report):
    section = report.get("ipus") or {}
    memory = section.get("ipu_memory") or []
    if len(memory) <= 1 and not section.get("pipelines"):
        return []
    lines = ["memory per IPU:"]
    for ipu, (total, top) in enumerate(zip(memory, section["ipu_max_tile_bytes"])):
        lines.append(f"  IPU {ipu}: {total:>12,} bytes, busiest tile {top:,}")
    for p in section.get("pipelines") or []:
        saving = p["serial_cycles"] / max(1, p["makespan_cycles"])
        lines.append(f"pipeline ({p['schedule']}, {len(p['stages'])} stages, depth "
                     f"{p['depth']}): {p['makespan_cycles']:,} cycles per run, serial "
                     f"{p['serial_cycles']:,} ({saving:.2f}x)")
        for row in p["stages"]:
            again = (f" (recomputing the forward pass: {row['recompute']:,})"
                     if row.get("recompute") else "")
            lines.append(f"  stage {row['stage']} on IPU {row['ipu']}: forward "
                         f"{row['forward']:,}, backward {row['backward']:,}{again} cycles "
                         f"per micro-batch")
        if p["other"]:
            lines.append(f"  outside the stages: {p['other']:,} cycles per micro-batch")
        for ipu in p["ipus"]:
            share = ipu["busy"] / max(1, p["makespan_cycles"])
            lines.append(f"  IPU {ipu['ipu']}: busy {ipu['busy']:,}, idle {ipu['idle']:,} "
                         f"cycles ({share:.0%} busy)")
    return lines


def timeline_html(report, table):
    """The HTML rows of the `ipus` section (`table` is html.py's table helper)."""
    section = report.get("ipus") or {}
    parts = []
    if len(section.get("ipu_memory") or []) > 1:
        parts.append(table(["IPU", "bytes", "busiest tile"],
                           [[i, f"{m:,}", f"{t:,}"] for i, (m, t) in enumerate(
                               zip(section["ipu_memory"], section["ipu_max_tile_bytes"]))]))
    for p in section.get("pipelines") or []:
        parts.append(f"<p>Pipeline, {p['schedule']} schedule, depth {p['depth']}: "
                     f"{p['makespan_cycles']:,} cycles per run (serial "
                     f"{p['serial_cycles']:,}).</p>")
        parts.append(table(["stage", "IPU", "forward", "backward"],
                           [[r["stage"], r["ipu"], f"{r['forward']:,}", f"{r['backward']:,}"]
                            for r in p["stages"]]))
        parts.append(table(["IPU", "busy", "idle"],
                           [[i["ipu"], f"{i['busy']:,}", f"{i['idle']:,}"] for i in p["ipus"]]))
    return "".join(parts)
