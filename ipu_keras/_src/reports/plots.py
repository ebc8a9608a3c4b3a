"""The report's PNG plots, drawn on matplotlib Agg canvases of their own.

`memory.png` (bytes per tile stacked by category, with the tile's capacity),
`liveness.png` (not-always-live bytes during each program step), `cycles.png` (where
the cycles go: per kind and the top ops) and `trace.png` (the execution trace: how
often each block ran and its cycles by kind), and for a pipeline `timeline.png`
(one row per IPU and a box per stage, micro-batch and pass, like the execution trace of
Graphcore's tools). Each function takes the report dict and a path. matplotlib is
imported here only, and only when a report is written. The figures are made with
matplotlib's object API (`Figure` on a `FigureCanvasAgg`), never through pyplot: the
process's backend and pyplot's figures are the user's, so a notebook that writes a report
still shows its own plots afterwards.
"""
import numpy as np

from ipu_keras._src.device.executable import CYCLE_KINDS
from ipu_keras._src.reports.document import cycle_breakdown

COLOURS = {"compute": "#4C72B0", "exchange": "#DD8452", "sync": "#937860",
           "host_io": "#55A868"}


def _subplots(*args, figsize=None, **kwargs):
    """(figure, axes) as `pyplot.subplots` gives them, on an Agg canvas of their own."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(*args, **kwargs)


def _save(fig, path, margins=None, wspace=None):
    """Saves `fig`; with `margins` (subplots_adjust's left, right, bottom, top) instead of
    a tight layout, which measures every label and took half of a plot's time."""
    if margins is None:
        fig.tight_layout()
    else:
        left, right, bottom, top = margins
        fig.subplots_adjust(left=left, right=right, bottom=bottom, top=top, wspace=wspace)
    fig.savefig(path, dpi=90)


def memory_plot(report, path):
    memory = report["memory"]
    categories = memory["tile_categories"]
    tiles = np.arange(len(memory["tile_memory"]))
    fig, ax = _subplots(figsize=(10, 4))
    names = [k for k in categories if any(categories[k])]
    ax.stackplot(tiles, *[np.asarray(categories[k]) / 1024 for k in names], labels=names,
                 step="post")
    capacity, top = memory["bytes_per_tile"] / 1024, memory["max_tile_bytes"] / 1024
    # Scaled to the fullest tile: 40 KiB used on a 0-600 KiB axis was a flat sliver. The
    # tile's capacity is drawn when it is within sight, else said in the title.
    if top > capacity / 2:
        ax.axhline(capacity, color="red", linewidth=1, label="tile memory")
    ax.set_ylim(0, max(top, capacity if top > capacity / 2 else 0, 1e-3) * 1.12)
    ax.set_xlabel("tile")
    ax.set_ylabel("KiB")
    ax.set_xlim(0, max(1, len(tiles) - 1))
    ax.set_title(f"Memory per tile (busiest: tile {memory['max_tile']}, "
                 f"{memory['max_tile_bytes']:,} bytes, "
                 f"{memory['max_tile_bytes'] / memory['bytes_per_tile']:.1%} of its "
                 f"{memory['bytes_per_tile']:,})")
    ax.legend(loc="upper right", fontsize="small", ncol=2)
    _save(fig, path, (0.07, 0.98, 0.12, 0.9))


def liveness_plot(report, path):
    liveness = report["liveness"].get("loop") or report["liveness"]
    where = "step of the device loop's body" if report["liveness"].get("loop") else "top-level step"
    steps = liveness["steps"]
    fig, ax = _subplots(figsize=(10, 3.5))
    values = [s["bytes"] / 2**20 for s in steps]
    # One filled outline, not a bar per step (thousands of bars took seconds to draw).
    edges = np.arange(len(values) + 1) - 0.5
    ax.fill_between(edges, np.append(values, values[-1:]), step="post", color="#4C72B0",
                    linewidth=0)
    ax.set_xlabel(f"program step ({where})")
    ax.set_ylabel("not-always-live MiB (all tiles)")
    peak = liveness["peak_step"]
    label = steps[peak]["label"] if steps else ""
    ax.set_title(f"Liveness (peak at step {peak}: {label}, {liveness['peak_bytes']:,} bytes)")
    _save(fig, path, (0.08, 0.98, 0.14, 0.9))


def cycles_plot(report, path):
    totals, top, what = cycle_breakdown(report)
    top = top[:15][::-1]
    fig, (left, right) = _subplots(1, 2, figsize=(11, 4.5),
                                   gridspec_kw={"width_ratios": [1, 2.2]})
    left.bar(list(totals), list(totals.values()),
             color=[COLOURS[k] for k in totals])
    left.set_title(f"Cycles by kind ({what})")
    left.tick_params(axis="x", labelrotation=30)
    labels = [_short(f"{r['op']} ({r['layer']})" if r["layer"] else r["op"]) for r in top]
    base = np.zeros(len(top))
    for kind in CYCLE_KINDS:
        values = np.array([r["cycles"][kind] for r in top], dtype=float)
        right.barh(labels, values, left=base, color=COLOURS[kind], label=kind)
        base += values
    right.set_title("Top ops by cycles")
    right.tick_params(axis="y", labelsize="small")
    right.legend(fontsize="small")
    _save(fig, path, (0.07, 0.98, 0.18, 0.9), wspace=0.85)


def _short(label, width=42):
    return label if len(label) <= width else label[:width - 1] + "…"


PHASE_COLOURS = {"F": "#4C72B0", "B": "#DD8452", "O": "#8C8C8C"}


def timeline_plot(report, path):
    """Draws the first pipeline's timeline; writes nothing for a graph with no pipeline."""
    pipelines = (report.get("ipus") or {}).get("pipelines") or []
    if not pipelines:
        return
    p = pipelines[0]
    ipus = sorted({b[0] for b in p["timeline"]})
    fig, ax = _subplots(figsize=(11, 1.0 + 0.7 * len(ipus)))
    for ipu, stage, micro_batch, phase, start, end in p["timeline"]:
        row = ipus.index(ipu)
        ax.broken_barh([(start, end - start)], (row - 0.4, 0.8),
                       facecolors=PHASE_COLOURS[phase], edgecolors="white")
        if len(p["timeline"]) <= 96:
            text = f"{phase}{stage}.{micro_batch}" if stage is not None else "O"
            ax.text((start + end) / 2, row, text, ha="center", va="center", fontsize=6,
                    color="white")
    ax.set_yticks(range(len(ipus)), [f"IPU {i}" for i in ipus])
    ax.invert_yaxis()
    ax.set_xlabel("cycles in one pipeline run (F = forward, B = backward; stage.micro-batch; "
                  "O = work of no stage)")
    ax.set_title(f"Pipeline timeline ({p['schedule']}, depth {p['depth']}): "
                 f"{p['makespan_cycles']:,} cycles per run")
    _save(fig, path)


def trace_plot(report, path):
    execution = report["execution"]
    blocks = execution["blocks"]
    roles = {b["index"]: b["role"] for b in report["program"]}
    labels = [f"{b['index']} {roles.get(b['index'], '')} x{b['count']}" for b in blocks]
    fig, ax = _subplots(figsize=(10, max(2.5, 0.35 * len(blocks) + 1)))
    base = np.zeros(len(blocks))
    for kind in CYCLE_KINDS:
        values = np.array([b["cycles"][kind] for b in blocks], dtype=float)
        ax.barh(labels, values, left=base, color=COLOURS[kind], label=kind)
        base += values
    ax.invert_yaxis()
    ax.set_xlabel("cycles in the last execution")
    ax.set_title(f"Execution trace: {execution['total_cycles']:,} cycles, "
                 f"{execution['seconds'] * 1e3:.3f} ms, {execution['steps']} steps")
    ax.legend(fontsize="small")
    _save(fig, path)


STATIC_PLOTS = {"memory.png": memory_plot, "liveness.png": liveness_plot,
                "cycles.png": cycles_plot, "timeline.png": timeline_plot}
"""The plots written at compile time; `cycles.png` and `trace.png` follow each run."""

__all__ = ["STATIC_PLOTS", "cycles_plot", "liveness_plot", "memory_plot", "trace_plot"]

