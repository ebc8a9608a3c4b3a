"""The multi-IPU part of a report: memory per IPU and each pipeline's schedule.

`ipus_section(executable)` is the report's `ipus` section (bytes and busiest tile per
IPU, and per pipeline its stages' forward/backward cycles, makespan against the serial
time, per-IPU busy and idle cycles and the timeline boxes); `ipu_lines` its text for
the summary; `timeline_plot` draws `timeline.png`, one row per IPU and a box per stage,
micro-batch and pass, like the execution trace of Graphcore's tools.
"""

PHASE_COLOURS = {"F": "#4C72B0", "B": "#DD8452"}


def ipus_section(executable):
    memory = executable.memory
    return {"ipu_memory": list(memory.get("ipu_memory") or [memory["total_bytes"]]),
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
            lines.append(f"  stage {row['stage']} on IPU {row['ipu']}: forward "
                         f"{row['forward']:,}, backward {row['backward']:,} cycles per "
                         f"micro-batch")
        if p["other"]:
            lines.append(f"  outside the stages: {p['other']:,} cycles per micro-batch")
        for ipu in p["ipus"]:
            share = ipu["busy"] / max(1, p["makespan_cycles"])
            lines.append(f"  IPU {ipu['ipu']}: busy {ipu['busy']:,}, idle {ipu['idle']:,} "
                         f"cycles ({share:.0%} busy)")
    return lines


def timeline_plot(report, path):
    """Draws the first pipeline's timeline; writes nothing for a graph with no pipeline."""
    pipelines = (report.get("ipus") or {}).get("pipelines") or []
    if not pipelines:
        return
    from ipu_keras._src.reports.plots import _pyplot, _save

    p = pipelines[0]
    plt = _pyplot()
    ipus = sorted({b[0] for b in p["timeline"]})
    fig, ax = plt.subplots(figsize=(11, 1.0 + 0.7 * len(ipus)))
    for ipu, stage, micro_batch, phase, start, end in p["timeline"]:
        row = ipus.index(ipu)
        ax.broken_barh([(start, end - start)], (row - 0.4, 0.8),
                       facecolors=PHASE_COLOURS[phase], edgecolors="white")
        if len(p["timeline"]) <= 96:
            ax.text((start + end) / 2, row, f"{phase}{stage}.{micro_batch}", ha="center",
                    va="center", fontsize=6, color="white")
    ax.set_yticks(range(len(ipus)), [f"IPU {i}" for i in ipus])
    ax.invert_yaxis()
    ax.set_xlabel("cycles in one pipeline run (F = forward, B = backward; stage.micro-batch)")
    ax.set_title(f"Pipeline timeline ({p['schedule']}, depth {p['depth']}): "
                 f"{p['makespan_cycles']:,} cycles per run")
    _save(fig, path)


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
