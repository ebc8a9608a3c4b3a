"""The on-device loop that runs a traced step `n` times per execution.

`counted_loop(step)` wraps a step graph (inputs: one batch; outputs: its logs) in
`while i < n`: each iteration dequeues one batch from a new infeed, runs the step
(a `call`, inlined by the compiler) and enqueues the step's outputs to a new outfeed.
`n` is an input of the executable, so one executable runs any number of steps up to
the host's staging limit: a shorter remainder execution needs no recompile.

A pipelined step (`pipeline={"schedule": name, "depth": n}`) marks the loop as a
pipeline's micro-batch loop (`Equation.pipeline`), as the low-level pipeline's loop is:
the compiler's `pipeline` analysis then costs its iterations as the schedule's makespan.
"""
import numpy as np

from ipu_keras._src.ir.graph import FeedSpec
from ipu_keras._src.ops.builder import Builder, new_input


def counted_loop(step, pipeline=None):
    """Returns (graph, infeed index, outfeed index); the graph's outputs are the last logs.

    `pipeline` ({"schedule", "depth"}, or None) is stamped on the loop equation."""
    in_types = tuple(v.type for v in step.inputs)
    out_types = tuple(v.type for v in step.outputs)
    infeed, outfeed = len(step.infeeds), len(step.outfeeds)

    def carry():
        return [new_input((), "int32", "i"), new_input((), "int32", "n")] + [
            new_input(t.shape, t.dtype) for t in out_types]

    cond_b = Builder()
    i, n, *_ = cond_inputs = carry()
    cond = cond_b.graph(cond_inputs, [cond_b.emit("less", [i, n])])

    body_b = Builder()
    i, n, *_ = body_inputs = carry()
    batch = body_b.emit("infeed", [], infeed=infeed, types=in_types) if in_types else ()
    batch = list(batch) if isinstance(batch, tuple) else [batch]
    logs = body_b.emit("call", batch, fn=step) if out_types else ()
    logs = list(logs) if isinstance(logs, tuple) else [logs]
    if out_types:
        body_b.emit("outfeed", logs, outfeed=outfeed)
    next_i = body_b.emit("add", [i, body_b.const(np.int32(1))])
    body = body_b.graph(body_inputs, [next_i, n] + logs)

    b = Builder()
    count = new_input((), "int32", "steps")
    initial = [b.const(np.int32(0)), count] + [b.const(np.zeros(t.shape, t.dtype))
                                                for t in out_types]
    results = b.emit("while", initial, cond=cond, body=body)
    b.equations[-1].pipeline = dict(pipeline) if pipeline else None
    graph = b.graph(
        [count], list(results[2:]),
        variables=list(step.variables),
        infeeds=list(step.infeeds) + [FeedSpec("batches", in_types)],
        outfeeds=list(step.outfeeds) + [FeedSpec("step_logs", out_types)],
    )
    return graph, infeed, outfeed
