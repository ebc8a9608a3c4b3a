"""The execution trace of a report as Chrome trace events (Perfetto, chrome://tracing).

`trace_document(report)` walks the program of `report.json` as the last execution ran it
(`execution.block_counts`; without a run, each loop once) and lays every costed step out
in time, in cycles from the start of the execution:

* one process per IPU of each replica ("replica r, IPU i"; replicas run the same program
  on their own data, so their rows are alike), with threads `steps` (a slice per program
  step: op, layer, cycles per kind), `layers` (a slice per run of steps of one Keras
  layer), `compute`, `exchange`, `sync`, `host I/O` (each step's phases, in the order a
  superstep runs them: sync, exchange, compute, then the host transfer) and, for a
  pipeline, `pipeline` (a box per stage, micro-batch and pass, and `O` for the work of no
  stage, from the schedule);
* a process `program` whose thread `control` nests the blocks, loops and iterations;
* a process `links` with `inter-IPU copies` and `cross-replica` collectives.

A loop's first `expand` iterations are drawn step by step; the rest of its iterations
are one slice per row (`"iterations k-n"`) whose length is what they took. A pipelined
loop is drawn as runs of `depth` iterations, the schedule's boxes scaled to the run.
Timestamps are microseconds at the target's clock, computed from the cumulative cycle
count (never by summing rounded durations); each slice's `args` holds its exact cycles.
Events are complete events (`ph: X`) sorted by time on each row, plus metadata events
naming the rows. No TensorFlow, no plotting.
"""
import gzip
import json

from ipu_keras._src.device.executable import CYCLE_KINDS
from ipu_keras._src.ops.registry import all_ops

EXPAND = 2
"""Iterations of each loop drawn step by step (per entry into the loop)."""
MAX_REPLICAS = 4
"""Replicas drawn; the others run the same program (said in the metadata)."""
PHASES = ("sync", "exchange", "compute", "host_io")
_THREADS = {"steps": 1, "layers": 2, "compute": 3, "exchange": 4, "sync": 5, "host_io": 6,
            "pipeline": 7}
_THREAD_NAMES = {"host_io": "host I/O"}
_PROGRAM, _LINKS = 0, 1


class _Walk:
    """The state of one walk: the clock, the events and each conditional's history."""

    def __init__(self, report, expand):
        self.report, self.blocks, self.expand = report, report["program"], expand
        execution = report.get("execution") or {}
        self.counts = execution.get("block_counts") or _nominal_counts(self.blocks)
        self.roles = {name: op.role for name, op in all_ops().items()}
        self.pipelines = (report.get("ipus") or {}).get("pipelines") or []
        self.t, self.events, self.taken = 0, [], {}
        self.flat = {b["index"]: sum(sum(step["cycles"].values()) for step in b["steps"])
                     for b in self.blocks if not any(step["blocks"] for step in b["steps"])}
        self.layer_runs = {}   # ipu -> [layer, start, end] of the current run of a layer

    def slice(self, pid, tid, name, start, end, cat, args=None):
        if end > start:
            self.events.append((pid, tid, name, start, end, cat, args or {}))

    # -- blocks and steps --------------------------------------------------------------
    def block(self, index, draw=True):
        start, steps = self.t, self.blocks[index]["steps"]
        if not draw and index in self.flat:   # not drawn and no control flow: just its time
            self.t += self.flat[index]
            return
        for position, step in enumerate(steps):
            if step["blocks"]:
                self.control(index, position, step, draw)
            else:
                self.step(step, draw)
        if draw:
            role = self.blocks[index]["role"]
            self.slice(_PROGRAM, 0, f"block {index} ({role})", start, self.t, "program",
                       {"block": index})

    def step(self, step, draw):
        total = sum(step["cycles"].values())
        if draw and total:
            self.draw_step(step, total)
        self.t += total

    def draw_step(self, step, total):
        ipu, start, cycles = step["ipu"], self.t, step["cycles"]
        args = {"layer": step["layer"], "ipu": ipu, **{k: cycles[k] for k in CYCLE_KINDS}}
        role = self.roles.get(step["op"])
        for pid in self.pids(ipu):
            self.slice(pid, _THREADS["steps"], step["op"], start, start + total, "step", args)
            t = start
            for phase in PHASES:
                self.slice(pid, _THREADS[phase], step["op"], t, t + cycles[phase], phase,
                           {"cycles": cycles[phase], "layer": step["layer"]})
                t += cycles[phase]
        if role == "link_copy":
            self.slice(_LINKS, 0, f"{step['op']} to IPU {ipu}", start, start + total, "link",
                       args)
        elif role == "replica_reduce":
            self.slice(_LINKS, 1, step["op"], start, start + total, "collective", args)
        self.layer(ipu, step["layer"], start, start + total)

    def layer(self, ipu, layer, start, end):
        run = self.layer_runs.get(ipu)
        if run and run[0] == layer:
            run[2] = end
            return
        self.close_layer(ipu)
        self.layer_runs[ipu] = [layer, start, end]

    def close_layer(self, ipu):
        run = self.layer_runs.pop(ipu, None)
        if run and run[0]:
            for pid in self.pids(ipu):
                self.slice(pid, _THREADS["layers"], run[0], run[1], run[2], "layer",
                           {"cycles": run[2] - run[1]})

    def pids(self, ipu):
        ipus = self.report["target"].get("num_ipus", 1)
        return [2 + r * ipus + ipu for r in range(self.replicas_drawn())]

    def replicas_drawn(self):
        return min(MAX_REPLICAS, (self.report.get("ipus") or {}).get("replicas", 1))

    # -- control flow --------------------------------------------------------------------
    def control(self, parent, position, step, draw):
        if len(step["blocks"]) == 2 and self.blocks[step["blocks"][1]]["role"] == "while body":
            self.loop(parent, step, draw)
        else:
            self.branch(parent, position, step, draw)

    def branch(self, parent, position, step, draw):
        then, other = step["blocks"][0], step["blocks"][-1]
        share = self.counts[then] / max(1, self.counts[parent])
        k = self.taken.get((parent, position), 0)
        self.taken[(parent, position)] = k + 1
        self.block(then if int((k + 1) * share) > int(k * share) else other, draw)

    def loop(self, parent, step, draw):
        cond, body = step["blocks"]
        n = round(self.counts[body] / max(1, self.counts[parent]))
        start = self.t
        pipeline = self.blocks[body].get("pipeline")
        if pipeline is not None and pipeline < len(self.pipelines):
            self.pipelined(cond, body, n, self.pipelines[pipeline], draw)
        else:
            rest = start
            for i in range(n):
                first, drawn = self.t, draw and i < self.expand
                self.block(cond, drawn)
                self.block(body, drawn)
                if drawn:
                    self.slice(_PROGRAM, 0, f"iteration {i + 1}", first, self.t, "program")
                    rest = self.t
            if draw and n > self.expand:
                self.rest(f"iterations {self.expand + 1}-{n}", rest)
        self.block(cond, draw)
        if draw:
            self.slice(_PROGRAM, 0, f"loop of block {body}, {n} iterations", start, self.t,
                       "program", {"iterations": n})

    def pipelined(self, cond, body, n, pipeline, draw):
        """Runs of `depth` iterations: the schedule's boxes, then each iteration's cond
        and the body's conditionals (the weight update at the end of a window)."""
        depth, body_cycles = max(1, pipeline["depth"]), sum(self.blocks[body]["cycles"].values())
        runs, rest = -(-n // depth), self.t
        for run in range(runs):
            start, drawn = self.t, draw and run < self.expand
            iterations = min(n, (run + 1) * depth) - run * depth
            self.t += body_cycles * iterations
            if drawn:
                self.boxes(pipeline, start, self.t)
            for _ in range(iterations):
                self.block(cond, drawn)
                for position, step in enumerate(self.blocks[body]["steps"]):
                    if step["blocks"]:
                        self.control(body, position, step, drawn)
            if drawn:
                self.slice(_PROGRAM, 0, f"pipeline run {run + 1}", start, self.t, "program")
                rest = self.t
        if draw and runs > self.expand:
            self.rest(f"pipeline runs {self.expand + 1}-{runs}", rest)

    def rest(self, name, start):
        """One slice per row over iterations not drawn step by step."""
        for ipu in list(self.layer_runs):
            self.close_layer(ipu)
        self.slice(_PROGRAM, 0, name, start, self.t, "program", {"cycles": self.t - start})
        ipus = range(self.report["target"].get("num_ipus", 1))
        for pid in sorted({p for ipu in ipus for p in self.pids(ipu)}):
            self.slice(pid, _THREADS["steps"], name, start, self.t, "step",
                       {"cycles": self.t - start})

    def boxes(self, pipeline, start, end):
        span = max((b[5] for b in pipeline["timeline"]), default=0)
        scale = (end - start) / span if span else 1.0
        for ipu, stage, micro_batch, phase, b0, b1 in pipeline["timeline"]:
            name = "O" if stage is None else f"{phase}{stage}.{micro_batch}"
            for pid in self.pids(ipu):
                self.slice(pid, _THREADS["pipeline"], name, start + round(b0 * scale),
                           start + round(b1 * scale), "pipeline",
                           {"stage": stage, "micro_batch": micro_batch, "pass": phase,
                            "cycles": b1 - b0})


def _nominal_counts(blocks):
    """Block counts of one pass: each loop once, each conditional's first branch."""
    counts = [0] * len(blocks)
    counts[0] = 1
    for block in blocks:
        for step in block["steps"]:
            for sub in step["blocks"][:2]:
                counts[sub] = max(counts[sub], counts[block["index"]])
    return counts


def _process_names(report, walk):
    ipus = report["target"].get("num_ipus", 1)
    replicas = walk.replicas_drawn()
    names = {_PROGRAM: "program (blocks, loops, iterations)",
             _LINKS: "links (inter-IPU copies, cross-replica collectives)"}
    for r in range(replicas):
        for i in range(ipus):
            names[2 + r * ipus + i] = f"replica {r}, IPU {i}" if replicas > 1 else f"IPU {i}"
    return names


def _metadata(report, walk):
    events = []
    for pid, name in _process_names(report, walk).items():
        events.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                       "args": {"name": name}})
        events.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0,
                       "args": {"sort_index": pid}})
        threads = ({0: "control"} if pid == _PROGRAM else
                   {0: "inter-IPU copies", 1: "cross-replica"} if pid == _LINKS else
                   {tid: _THREAD_NAMES.get(name, name) for name, tid in _THREADS.items()})
        for tid, thread in threads.items():
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                           "args": {"name": thread}})
            events.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                           "args": {"sort_index": tid}})
    return events


def trace_document(report, expand=EXPAND):
    """The Chrome trace-event JSON object (a dict) of `report` (module docstring)."""
    walk = _Walk(report, expand)
    walk.block(0)
    for ipu in list(walk.layer_runs):
        walk.close_layer(ipu)
    mhz = report["target"]["clock_hz"] / 1e6
    events = _metadata(report, walk)
    for pid, tid, name, start, end, cat, args in sorted(
            walk.events, key=lambda e: (e[0], e[1], e[3], -e[4])):
        # the end rounded as the start is, so a slice ending with its parent does not
        # poke out of it by a rounding step
        ts = round(start / mhz, 4)
        events.append({"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid,
                       "ts": ts, "dur": round(round(end / mhz, 4) - ts, 4),
                       "args": dict(args, start_cycle=start, end_cycle=end)})
    replicas = (report.get("ipus") or {}).get("replicas", 1)
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "metadata": {"name": report.get("name"), "key": report.get("key"),
                         "target": report["target"]["name"],
                         "clock_hz": report["target"]["clock_hz"],
                         "ipu_keras_version": report.get("ipu_keras_version"),
                         "time": "microseconds at the clock; args hold exact cycles",
                         "total_cycles": walk.t, "replicas": replicas,
                         "replicas_drawn": walk.replicas_drawn(),
                         "executed": bool(report.get("execution")),
                         "iterations_drawn_per_loop": expand}}


def write_trace(report, path, expand=EXPAND):
    """Writes the trace of `report` to `path` (gzip-compressed when it ends in `.gz`)."""
    data = json.dumps(trace_document(report, expand), separators=(",", ":")).encode()
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(data)
    return path


__all__ = ["EXPAND", "trace_document", "write_trace"]
