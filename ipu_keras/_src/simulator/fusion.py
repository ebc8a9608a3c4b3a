"""Chains of rowwise ops run a block of rows at a time, their intermediates in the cache.

A block's consecutive exec steps whose ops are `rowwise` (each output row computed from
the same rows of the numpy-broadcast inputs alone: elementwise math, activations,
bias_add) form a chain. When a chain defines more values that die within it than it
hands on, and its steps' outputs all have one large shape (the frame), `Chain` runs it
a block of `CHUNK_ELEMENTS` outputs at a time: every step on the first
rows, then every step on the next rows, and so on, with the rows split over the host's
cores (`cores.each_slab`). A value the chain defines and nothing after it reads (the
engine's `dead` slots: GELU's gradient is a dozen such 8 MB values in a Transformer)
then lives a block of rows at a time in the core's cache instead of travelling to memory
and back between two steps; what is read later is written whole, as before. Each
element is computed by the same kernel from the same operands, so the results are
bitwise those of the steps run one after the other. A chain whose shapes do not qualify
at run time (small, a single row, shapes differing) runs its steps one by one.
"""
import math

import numpy as np

from ipu_keras._src.device.steps import Exec
from ipu_keras._src.ops import cores
from ipu_keras._src.ops.registry import get_op

CHUNK_ELEMENTS = 1 << 16
"""Outputs per block of rows: a few float32 blocks fit in one core's L2 cache."""
MIN_ELEMENTS = 1 << 18
"""Smaller chains run step by step: their values stay in the cache anyway."""


def fuse(steps, runs, dead):
    """`runs` (the closures of a block's `steps`, each dropping its `dead` slots) with each
    chain of two or more consecutive single-output rowwise exec steps made one `Chain`."""
    out, i = [], 0
    while i < len(steps):
        j = i
        while j < len(steps) and _rowwise(steps[j]):
            j += 1
        chain = Chain(steps[i:j], runs[i:j], dead[i:j]) if j - i >= 2 else None
        if chain is not None and chain.locals > len(chain.outputs):
            out.append(chain)
            i = j
        else:
            out.append(runs[i])
            i += 1
    return out


def _rowwise(step):
    return isinstance(step, Exec) and len(step.outs) == 1 and get_op(step.op).rowwise


class Chain:
    """Runs a chain of rowwise exec steps a block of rows at a time (module docstring)."""

    def __init__(self, steps, runs, dead):
        self.runs = runs    # the steps one by one, for shapes that do not qualify
        defined = [step.outs[0] for step in steps]
        self.dropped = tuple(dict.fromkeys(slot for slots in dead for slot in slots))
        self.outputs = [slot for slot in defined if slot not in self.dropped]
        # (kernel, input slots, output slot, params, whether the output is handed on)
        self.ops = [(get_op(step.op).kernel, tuple(step.ins), step.outs[0], step.params,
                     step.outs[0] in self.outputs) for step in steps]
        # Values that live a block at a time: the memory traffic saved, against the extra
        # copy of each output's blocks into its whole array.
        self.locals = len(defined) - len(self.outputs)
        self._frames = {}   # the inputs' shapes -> `_frame` of them
        self.inputs = tuple(dict.fromkeys(
            slot for _, ins, _, _, _ in self.ops for slot in ins if slot not in defined))

    def __call__(self, env):
        inputs = {slot: env[slot] for slot in self.inputs}
        shapes = tuple(np.shape(x) for x in inputs.values())
        frame = self._frames.get(shapes, False)
        if frame is False:   # first call with these shapes
            frame = self._frames[shapes] = self._frame(dict(zip(self.inputs, shapes)))
        if frame is None:
            for run in self.runs:
                run(env)
            return
        rows = max(1, CHUNK_ELEMENTS // math.prod(frame[1:]))
        whole = {}
        self._block(inputs, frame, slice(0, rows), whole)   # allocates the outputs

        def blocks(part):
            for start in range(rows + part.start, rows + part.stop, rows):
                self._block(inputs, frame, slice(start, min(start + rows, rows + part.stop)),
                            whole)

        cores.each_slab(blocks, frame[0] - rows)
        for slot in self.outputs:
            env[slot] = whole[slot]
        for slot in self.dropped:
            env[slot] = None

    def _frame(self, shapes):
        """The one output shape of every step, given the inputs' `{slot: shape}`, if the
        chain is worth running by blocks; else None."""
        try:
            for _, ins, out, _, _ in self.ops:
                shapes[out] = np.broadcast_shapes(*(shapes[slot] for slot in ins))
        except ValueError:
            return None
        frame = shapes[self.ops[0][2]]
        if (len(frame) < 1 or math.prod(frame) < MIN_ELEMENTS
                or frame[0] <= max(1, CHUNK_ELEMENTS // math.prod(frame[1:]))
                or any(shapes[out] != frame for _, _, out, _, _ in self.ops)):
            return None
        return frame

    def _block(self, inputs, frame, rows, whole):
        """Every step on `rows` of the frame; outputs written into `whole` (allocated by
        the first block)."""
        local = {}
        for kernel, ins, out, params, handed_on in self.ops:
            args = [local[slot] if slot in local else cores.rows_of(inputs[slot], frame, rows)
                    for slot in ins]
            local[out] = value = kernel(*args, **params)
            if handed_on:
                if out not in whole:
                    whole[out] = np.empty(frame, value.dtype)
                whole[out][rows] = value

