"""Pairs of exec steps the engine runs as one kernel, the first step's output never stored.

An op family may register one kernel for an op followed by the only reader of its
output (`registry.register_pair`): the max-pool gradient followed by the ReLU gradient
at the pool's input, for instance, applies the ReLU's mask to the pooled gradient, a
quarter of the elements for 2x2 windows, instead of to the whole gradient it scatters.
`fuse_pairs` finds such pairs among a block's steps: the second the only step reading the
first's output, and otherwise reading only the first's operands. Each pair becomes one
`Pair` step, in the place of the second, `Pair(name, first's operands, second's outputs,
first's params)`, which the engine runs like an exec step (`Engine._step_pair`). A
registered kernel gives the bits of the two steps run one after the other (falling back
to running them so where its shortcut does not hold is the kernel's business), so the
IR, the cost model and the results are those of the unfused steps.
"""
import dataclasses
from typing import ClassVar

from ipu_keras._src.device.steps import Exec, KernelStep
from ipu_keras._src.ops.registry import get_pair, paired_ops


@dataclasses.dataclass(frozen=True, slots=True)
class Pair(KernelStep):
    """Two exec steps run as one kernel (module docstring); the engine's, not saved."""

    kind: ClassVar[str] = "pair"
    name: str
    ins: tuple
    outs: tuple
    params: dict


def fuse_pairs(steps, reads, exported):
    """`steps` (a block's) with each fusable pair of exec steps made one `Pair` step, in
    the place of the second. `reads(step)`: the slots a step reads; `exported`: the slots
    whoever runs the block reads after it. Slots are written once in a block, so the first
    step's operands still hold its values at the second."""
    steps = list(steps)
    firsts = paired_ops()
    for i, first in enumerate(steps):
        if not isinstance(first, Exec) or first.op not in firsts or len(first.outs) != 1:
            continue
        link = first.outs[0]
        readers = [j for j in range(i + 1, len(steps)) if link in reads(steps[j])]
        if link in exported or len(readers) != 1:
            continue
        fused = _fused(first, steps[readers[0]])
        if fused is not None:
            steps[i], steps[readers[0]] = None, fused
    return [step for step in steps if step is not None]


def _fused(first, second):
    """The `Pair` step of two exec steps if a pair is registered for their ops and
    their operands fit it, else None (whether the link dies is the caller's check)."""
    if not isinstance(second, Exec):
        return None
    pair = get_pair(first.op, second.op)
    if pair is None or second.params:
        return None
    ins = second.ins
    link = first.outs[0]
    if (len(ins) != 1 + len(pair.same) or ins[pair.link] != link
            or any(ins[s] != first.ins[f] for s, f in pair.same)):
        return None
    return Pair(pair.name, tuple(first.ins), tuple(second.outs), dict(first.params))


def pair_kernel(name):
    """The kernel of the pair named `name` ("first+second")."""
    return get_pair(*name.split("+")).kernel
