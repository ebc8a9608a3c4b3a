"""The `pipeline` analysis: a pipeline's stage times, its schedule and its makespan.

For each pipeline micro-batch loop (a `while` with `Equation.pipeline`), each stage's
forward and backward cycles per micro-batch are the cycles of its equations in the
loop body (the same cost model as every step, `lower.step_cycles`); an equation is
backward when TensorFlow made it for a gradient (its node is under `gradient_tape/` or
`gradients/`). A forward equation recomputed for the backward pass (`recompute.py`)
runs in the backward pass: its cycles count there, and apart as `recompute`. Body
equations of no stage (accumulating gradients, feeds) are
`other` work, run serially once per micro-batch: after the schedule step in which the
micro-batch's last pass ends, a box `O` per IPU that does some of it (stage None), all
later boxes shifted by it, so that the boxes end at the makespan. A conditional's branches are not
micro-batch work: they are their own blocks, costed when taken. In a Keras pipelined
model the device loop is the micro-batch loop and its window-end cond's optimizer branch
the weight update, run once per `depth` micro-batches (`update` cycles).

The schedule turns the table into boxes (IPU, stage, micro-batch, phase, start, end)
and a makespan; numerics never depend on it. With S stages and depth G:

* Sequential: one stage at a time, as sharding: every forward, then every backward.
* Grouped: G + 2S - 1 steps (G + S - 1 in inference); in step t forward stage k works on
  micro-batch t - k and backward stage k on t - (2S - 1 - k); all IPUs run their
  forward passes together, sync, then their backward passes together, sync.
* Interleaved (an estimate): the same steps, but each IPU runs its forward then its
  backward pass without a sync between them, so a step lasts the slowest IPU's sum.

The loop's cycles are the makespan (plus `other`) instead of G serial iterations: the
lowering scales the body block's cycles to it. The weight update after the loop is
costed like any step.
"""
from ipu_keras._src.compiler.passes.lower import step_cycles
from ipu_keras._src.compiler.passes.stages import is_backward, is_recomputed
from ipu_keras._src.device import cost as cost_model
from ipu_keras._src.ops.registry import get_op


def plan_pipelines(graph, tile_map, target):
    """id(loop equation) -> its schedule (a dict, see `schedule`), for every pipeline."""
    return {id(eqn): schedule_loop(eqn, tile_map, target)
            for eqn in graph.walk() if get_op(eqn.op).role == "loop" and eqn.pipeline}


def _micro_batch_work(graph):
    """The equations one iteration runs every time: all but a conditional's branches."""
    for eqn in graph.equations:
        yield eqn
        if get_op(eqn.op).role != "branch":
            for sub in eqn.subgraphs():
                yield from _micro_batch_work(sub)


def _update_cycles(body, tile_map, target):
    """Cycles of the costliest branch of the loop body's conditionals (a weight update)."""
    return sum(max(sum(sum(step_cycles(e, tile_map, target)) for e in sub.walk())
                   for sub in eqn.subgraphs())
               for eqn in body.walk() if get_op(eqn.op).role == "branch")


def stage_table(body, tile_map, target):
    """Per stage: its IPU and forward/backward cycles per micro-batch (`recompute`: the
    part of backward that recomputes forward values); and `other`, the cycles per
    micro-batch of the work of no stage, per IPU ({ipu: cycles})."""
    stages, other = {}, {}
    for eqn in _micro_batch_work(body):
        cycles = sum(step_cycles(eqn, tile_map, target))
        if eqn.stage is None:
            if cycles:
                other[eqn.shard or 0] = other.get(eqn.shard or 0, 0) + cycles
            continue
        row = stages.setdefault(eqn.stage, {"stage": eqn.stage, "ipu": eqn.shard or 0,
                                            "forward": 0, "backward": 0, "recompute": 0})
        if is_recomputed(eqn):
            row["recompute"] += cycles
        row["backward" if is_backward(eqn) or is_recomputed(eqn) else "forward"] += cycles
    return [stages[k] for k in sorted(stages)], other


def schedule_loop(eqn, tile_map, target):
    rows, other = stage_table(eqn.params["body"], tile_map, target)
    depth, name = eqn.pipeline["depth"], eqn.pipeline["schedule"]
    sync = cost_model.sync_cycles(target, external=True)
    plan = schedule(rows, depth, name, sync, other)
    plan["update_cycles"] = _update_cycles(eqn.params["body"], tile_map, target)
    return plan


def schedule(rows, depth, name, sync, other=0):
    """The boxes, makespan and per-IPU busy/idle time of one pipeline run. `other` is
    the cycles per micro-batch outside the stages: a number (on the first stage's IPU) or
    {ipu: cycles}."""
    if not isinstance(other, dict):
        other = {rows[0]["ipu"] if rows else 0: other} if other else {}
    boxes = _with_other(_SCHEDULES[name](rows, depth, sync), other)
    makespan = max((b[5] for b in boxes), default=0)
    other = sum(other.values())
    busy = {}
    for ipu, _, _, _, start, end in boxes:
        busy[ipu] = busy.get(ipu, 0) + end - start
    serial = depth * (sum(r["forward"] + r["backward"] for r in rows) + other)
    return {"schedule": name, "depth": depth, "stages": rows, "other": other,
            "serial_cycles": serial, "makespan_cycles": makespan,
            "ipus": [{"ipu": i, "busy": busy[i], "idle": makespan - busy[i]}
                     for i in sorted(busy)],
            "timeline": boxes}


def _with_other(boxes, other):
    """`boxes` with each micro-batch's `other` work (`{ipu: cycles}`) as boxes `O` after
    the schedule step in which its last pass ends, and every later box shifted by it."""
    total = sum(other.values())
    if not total or not boxes:
        return boxes
    done = {}
    for b in boxes:
        done[b[2]] = max(done.get(b[2], 0), b[5])
    quiet, reach = [], 0       # the starts no earlier box is still running over
    for b in sorted(boxes, key=lambda b: b[4]):
        if b[4] >= reach and (not quiet or quiet[-1] != b[4]):
            quiet.append(b[4])
        reach = max(reach, b[5])
    quiet.append(reach)
    inserts = sorted((next(q for q in quiet if q >= end), m) for m, end in done.items())

    def shift(t, inclusive=True):
        return t + total * sum(1 for p, _ in inserts if p < t or inclusive and p == t)

    out = [b[:4] + [shift(b[4]), shift(b[4]) + b[5] - b[4]] for b in boxes]
    for i, (point, m) in enumerate(inserts):
        t = shift(point, inclusive=False) + total * sum(1 for p, _ in inserts[:i] if p == point)
        for ipu in sorted(other):
            out.append([ipu, None, m, "O", t, t + other[ipu]])
            t += other[ipu]
    return sorted(out, key=lambda b: (b[4], b[0]))


def _sequential(rows, depth, sync):
    boxes, t = [], 0
    for m in range(depth):
        order = [(r, "F") for r in rows] + [(r, "B") for r in reversed(rows) if r["backward"]]
        for row, phase in order:
            length = row["forward" if phase == "F" else "backward"]
            boxes.append([row["ipu"], row["stage"], m, phase, t, t + length])
            t += length + sync
    return boxes


def _steps(rows, depth):
    """Per step: [(row, micro-batch, phase)] of the forward and the backward passes."""
    stages, training = len(rows), any(r["backward"] for r in rows)
    count = depth + (2 * stages - 1 if training else stages - 1)
    for t in range(count):
        fwd = [(r, t - k, "F") for k, r in enumerate(rows) if 0 <= t - k < depth]
        bwd = [(r, t - (2 * stages - 1 - k), "B") for k, r in enumerate(rows)
               if training and 0 <= t - (2 * stages - 1 - k) < depth]
        yield fwd, bwd


def _length(row, phase):
    return row["forward" if phase == "F" else "backward"]


def _grouped(rows, depth, sync):
    boxes, t = [], 0
    for fwd, bwd in _steps(rows, depth):
        for phase in (fwd, bwd):
            if not phase:
                continue
            for row, m, p in phase:
                boxes.append([row["ipu"], row["stage"], m, p, t, t + _length(row, p)])
            t += max(_length(row, p) for row, _, p in phase) + sync
    return boxes


def _interleaved(rows, depth, sync):
    boxes, t = [], 0
    for fwd, bwd in _steps(rows, depth):
        ends = {}
        for row, m, p in fwd + bwd:
            start = ends.get(row["ipu"], t)
            ends[row["ipu"]] = start + _length(row, p)
            boxes.append([row["ipu"], row["stage"], m, p, start, ends[row["ipu"]]])
        t = max(ends.values(), default=t) + sync
    return boxes


_SCHEDULES = {"Grouped": _grouped, "Interleaved": _interleaved, "Sequential": _sequential}
