"""The engine: runs an `Executable`'s programs with numpy.

It owns execution only. At construction every step is resolved once into a closure
over its kernel, slots and params, so the hot path is a flat loop of calls with no
look-ups, shape checks or cost arithmetic. Cycles are not added up while running:
each block counts how often it ran, and `cycles()` multiplies those counts by the
cost tables the compiler computed.

Host streams and variables are the runtime's business; the engine sees them through
`state` (a list of variable arrays it replaces entries of) and `streams` (an object
with `pull(feed) -> [arrays]` and `push(feed, [arrays])`).
"""
import numpy as np

from ipu_keras.compiler.executable import CYCLE_KINDS
from ipu_keras.errors import OutOfTileMemoryError
from ipu_keras.ops.registry import get_op
from ipu_keras.ops.state import write_kernel


class Engine:
    def __init__(self, executable):
        self.executable = executable
        self.counts = [0] * len(executable.blocks)
        self._preset = [None] * executable.num_slots
        for slot, value in executable.constants:
            self._preset[slot] = value
        self._blocks = [None] * len(executable.blocks)
        for i in reversed(range(len(executable.blocks))):
            self._blocks[i] = self._build_block(i)
        # Compiled with debug.allowOutOfMemory: the error the compiler deferred to run time.
        self._out_of_memory = executable.memory.get("out_of_memory")
        self._cost = np.array(
            [[b["cycles"][k] for k in CYCLE_KINDS] for b in executable.blocks], dtype=np.int64
        )

    def run(self, inputs, state, streams):
        """Run the main program once; returns the output arrays."""
        if self._out_of_memory:
            raise OutOfTileMemoryError(**self._out_of_memory)
        env = list(self._preset)
        for slot, value in zip(self.executable.inputs, inputs):
            env[slot] = value
        self.counts = [0] * len(self._blocks)
        self._state, self._streams = state, streams
        try:
            # Like the IPU with floating_point_behaviour off: no float exception stops a run.
            with np.errstate(all="ignore"):
                self._blocks[0](env)
        finally:
            self._state = self._streams = None
        return [env[s] for s in self.executable.outputs]

    def cycles(self):
        """Cycles of the last run, split into CYCLE_KINDS."""
        totals = np.asarray(self.counts, dtype=np.int64) @ self._cost
        return dict(zip(CYCLE_KINDS, (int(c) for c in totals)))

    # -- building closures ------------------------------------------------------
    def _build_block(self, index):
        steps = [self._build_step(s) for s in self.executable.blocks[index]["steps"]]

        def run_block(env):
            self.counts[index] += 1
            for step in steps:
                step(env)

        return run_block

    def _build_step(self, step):
        return getattr(self, "_step_" + step[0])(*step[1:])

    def _step_exec(self, op, ins, outs, params):
        kernel = get_op(op).kernel
        if len(outs) == 1:
            (out,) = outs

            def run(env):
                env[out] = kernel(*[env[i] for i in ins], **params)
        else:
            def run(env):
                for slot, value in zip(outs, kernel(*[env[i] for i in ins], **params)):
                    env[slot] = value
        return run

    def _step_read(self, var, out):
        def run(env):
            env[out] = self._state[var]
        return run

    def _step_write(self, var, mode, slot):
        update = write_kernel(mode)

        def run(env):
            self._state[var] = update(self._state[var], env[slot])
        return run

    def _step_infeed(self, feed, outs):
        def run(env):
            for slot, value in zip(outs, self._streams.pull(feed)):
                env[slot] = value
        return run

    def _step_outfeed(self, feed, ins):
        def run(env):
            self._streams.push(feed, [env[i] for i in ins])
        return run

    def _step_while(self, carry, cond, cond_in, cond_out, body, body_in, body_out, outs):
        run_cond, run_body = self._blocks[cond], self._blocks[body]

        def run(env):
            values = [env[i] for i in carry]
            while True:
                for slot, value in zip(cond_in, values):
                    env[slot] = value
                run_cond(env)
                if not env[cond_out]:
                    break
                for slot, value in zip(body_in, values):
                    env[slot] = value
                run_body(env)
                values = [env[i] for i in body_out]
            for slot, value in zip(outs, values):
                env[slot] = value
        return run

    def _step_if(self, pred, ins, then, then_in, then_out, other, else_in, else_out, outs):
        branches = ((self._blocks[then], then_in, then_out),
                    (self._blocks[other], else_in, else_out))

        def run(env):
            block, inner_in, inner_out = branches[0] if env[pred] else branches[1]
            for slot, i in zip(inner_in, ins):
                env[slot] = env[i]
            block(env)
            for slot, i in zip(outs, inner_out):
                env[slot] = env[i]
        return run
