"""The engine: runs an `Executable`'s programs with numpy.

It owns execution only. At construction every step is resolved once into a closure
over its kernel, slots and params, so the hot path is a flat loop of calls with no
look-ups, shape checks or cost arithmetic. A value is dropped after the last step of
its block that reads it (`_dead_after`), so results reuse memory freed a moment
earlier; a chain of rowwise steps whose intermediates die within it runs a block of rows
at a time, so that those stay in the cache (`fusion.py`), an op followed by the only
reader of its output runs as one kernel where its family registered one (`pairs.py`),
and two independent products next to each other run at once, one per core
(`siblings.py`). An outlined function's body is one block that every call of it runs
(`Call`), its count the number of calls. Cycles are not added up while running: each
block counts how often it ran, and `cycles()` multiplies those counts by the cost tables
the compiler computed.

Host streams and variables are the runtime's business; the engine sees them through
`state` (a list of variable arrays it replaces entries of) and `streams` (an object
with `pull(feed) -> [arrays]`, `push(feed, [arrays])` and, for the collectives across
replicas, `collective(op, [arrays], params) -> array`).

Floating-point traps (`IPUConfig.floating_point_behaviour`): the IPU can trap on the
tile when an op produces an invalid result (`inv`), divides by zero (`div0`) or
overflows (`oflo`). With none of these on, the engine runs under
`np.errstate(all="ignore")` and inf and NaN propagate as in TensorFlow on the CPU.
With some on, the run sets numpy's error state to "raise" for those categories once,
and each exec or variable-write step is wrapped so that numpy's `FloatingPointError`
becomes a `FloatingPointTrapError` naming the op, its TensorFlow node and Keras layer
(the block's `sources`); the hot path with the flags off is unchanged. What is
modelled: the three traps, for float16 and float32 results alike (numpy flags a
float16 overflow, including a cast to float16, like a float32 one). An op whose
inputs are all integers never traps (the IPU's traps are floating-point ones; an
integer division by zero gives numpy's 0). Not modelled: `nanoo` (on the IPU a float16
overflow then gives NaN instead of saturating; here it gives inf either way, as
TensorFlow does) and `esr` (stochastic rounding; results are rounded to nearest).
A kernel that computes a value it then discards (a `where` over both branches) must
silence numpy locally with its own `np.errstate`, or it would trap spuriously.
"""
import functools

import numpy as np

from ipu_keras._src.device.executable import CYCLE_KINDS
from ipu_keras._src.device.steps import Call, Exec, If, Source, While, Write
from ipu_keras.errors import FloatingPointTrapError, IndexOutOfRangeError, OutOfTileMemoryError
from ipu_keras._src.ops.registry import get_op
from ipu_keras._src.ops.state import write_kernel
from ipu_keras._src.simulator.fusion import fuse
from ipu_keras._src.simulator.pairs import fuse_pairs, pair_kernel
from ipu_keras._src.simulator.siblings import Siblings, siblings


# floating_point_behaviour flag -> numpy error category, and numpy's words for each.
TRAPS = {"inv": "invalid", "div0": "divide", "oflo": "over"}
_NUMPY_WORDS = (("invalid value", "inv"), ("divide by zero", "div0"), ("overflow", "oflo"))


class Engine:
    """Runs an `Executable`.

    Args:
        executable: The compiled `Executable`.
        floating_point: `IPUConfig.floating_point_behaviour` as a dict of flags (e.g.
            `{"inv": True, "div0": False, ...}`); None or all off: no traps.
    """

    fuses = True
    """Whether chains of rowwise steps run a block of rows at a time (`fusion.py`),
    registered pairs of steps as one kernel (`pairs.py`) and sibling products at once
    (`siblings.py`)."""

    def __init__(self, executable, floating_point=None):
        self.executable = executable
        flags = dict(floating_point or {})
        self._errstate = {"all": "ignore"}
        self._errstate.update({TRAPS[f]: "raise" for f in TRAPS if flags.get(f)})
        self._traps = len(self._errstate) > 1
        self.counts = [0] * len(executable.blocks)
        self._preset = [None] * executable.num_slots
        for slot, value in executable.constants:
            self._preset[slot] = value
        self._exports = _exports(executable)
        self._reads = {}
        self._blocks = [None] * len(executable.blocks)
        for i in reversed(range(len(executable.blocks))):
            self._blocks[i] = self._build_block(i)
        # Compiled with debug.allowOutOfMemory: the error the compiler deferred to run time.
        self._out_of_memory = executable.memory.get("out_of_memory")
        self._cost = np.array(
            [[b.cycles[k] for k in CYCLE_KINDS] for b in executable.blocks], dtype=np.int64
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
            # Off, like the IPU: no float exception stops a run; on, the chosen ones trap.
            with np.errstate(**self._errstate):
                self._blocks[0](env)
        except IndexOutOfRangeError as e:
            if e.op is None:
                raise
            raise located(e, self.executable) from None
        finally:
            self._state = self._streams = None
        return [env[s] for s in self.executable.outputs]

    def cycles(self):
        """Cycles of the last run, split into CYCLE_KINDS."""
        totals = np.asarray(self.counts, dtype=np.int64) @ self._cost
        return dict(zip(CYCLE_KINDS, (int(c) for c in totals)))

    # -- building closures ------------------------------------------------------
    def _build_block(self, index):
        block = self.executable.blocks[index]
        plan = block.steps
        fusing = self.fuses and not self._traps
        if fusing:
            plan = siblings(fuse_pairs(plan, self._block_step_reads, self._exports[index]))
        steps = [self._build_step(s) for s in plan]
        if self._traps:
            sources = block.sources or [Source("", "")] * len(steps)
            steps = [self._trapping(run, step, source) if isinstance(step, (Exec, Write))
                     else run for run, step, source in zip(steps, plan, sources)]
        dead = self._dead_after(index, plan)
        steps = [_then_drop(run, slots) if slots else run for run, slots in zip(steps, dead)]
        if fusing:
            steps = fuse(plan, steps, dead)

        def run_block(env):
            self.counts[index] += 1
            for step in steps:
                step(env)

        return run_block

    def _dead_after(self, index, steps):
        """Per step of block `index` (its `steps`, with pairs and siblings made one): the
        slots it defined that no later step reads and the block does not hand back, to drop
        after their last reader. The allocator then serves the next results from memory
        just freed (still in the cache) instead of keeping every value of a loop body alive
        until the next iteration replaces it. Only slots a step of this block writes are
        dropped: a loop body redefines them on each iteration; its inputs, constants and
        values of enclosing blocks stay."""
        defined = {slot: i for i, step in enumerate(steps) for slot in step.writes}
        last = dict(defined)
        for i, step in enumerate(steps):
            for slot in self._block_step_reads(step):
                if slot in defined:
                    last[slot] = i
        dead = [[] for _ in steps]
        for slot, i in last.items():
            if slot not in self._exports[index]:
                dead[i].append(slot)
        return [tuple(slots) for slots in dead]

    def _block_step_reads(self, step):
        """The slots a step reads, a loop's or a branch's blocks' reads included."""
        return tuple(step.reads) + sum((self._reads_of(b) for b in step.blocks), ())

    def _reads_of(self, index):
        if index not in self._reads:
            self._reads[index] = ()   # a block does not contain itself
            block = self.executable.blocks[index]
            self._reads[index] = tuple({slot for step in block.steps
                                        for slot in self._block_step_reads(step)})
        return self._reads[index]

    def _build_step(self, step):
        return getattr(self, "_step_" + step.kind)(step)

    def _trapping(self, run, step, source):
        """`run` with numpy's FloatingPointError turned into the IPU's trap error."""
        op, ins = ((step.op, step.ins) if isinstance(step, Exec)
                   else (f"write_var ({step.mode})", [step.src]))
        node, layer = source.node, source.layer

        def trapped(env):
            try:
                run(env)
            except FloatingPointTrapError:
                raise
            except FloatingPointError as e:
                if not any(np.asarray(env[i]).dtype.kind in "fc" for i in ins):
                    with np.errstate(all="ignore"):  # integer ops do not trap
                        return run(env)
                flag = next((f for words, f in _NUMPY_WORDS if words in str(e)), "inv")
                raise FloatingPointTrapError(flag, op, node, layer,
                                             f"numpy reported '{e}'") from None
        return trapped

    def _step_exec(self, step):
        return self._kernel_step(get_op(step.op).kernel, step.ins, step.outs, step.params)

    def _step_pair(self, step):
        return self._kernel_step(pair_kernel(step.name), step.ins, step.outs, step.params)

    @staticmethod
    def _kernel_step(kernel, ins, outs, params):
        """A step writing `kernel(*ins, **params)` to the slots `outs`."""
        if params:
            kernel = functools.partial(kernel, **params)
        if len(outs) == 1:
            return _call_into(kernel, tuple(ins), outs[0])

        def run(env):
            for slot, value in zip(outs, kernel(*[env[i] for i in ins])):
                env[slot] = value
        return run

    def _step_siblings(self, step):
        first, second = step.first, step.second
        return Siblings(self._build_step(first), self._build_step(second), (first, second))

    def _step_read(self, step):
        var, out = step.var, step.out

        def run(env):
            env[out] = self._state[var]
        return run

    def _step_write(self, step):
        var, slot, update = step.var, step.src, write_kernel(step.mode)

        def run(env):
            self._state[var] = update(self._state[var], env[slot])
        return run

    def _step_infeed(self, step):
        feed, outs = step.feed, step.outs

        def run(env):
            for slot, value in zip(outs, self._streams.pull(feed)):
                env[slot] = value
        return run

    def _step_outfeed(self, step):
        feed, ins = step.feed, step.ins

        def run(env):
            self._streams.push(feed, [env[i] for i in ins])
        return run

    def _step_collective(self, step):
        op, ins, params = step.op, step.ins, step.params
        (out,) = step.outs

        def run(env):
            env[out] = self._streams.collective(op, [env[i] for i in ins], params)
        return run

    def _step_while(self, step):
        carry, cond_in, cond_out = step.carry, step.cond_in, step.cond_out
        body_in, body_out, outs = step.body_in, step.body_out, step.outs
        run_cond, run_body = self._blocks[step.cond_block], self._blocks[step.body_block]

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

    def _step_if(self, step):
        pred, ins, outs = step.pred, step.ins, step.outs
        branches = ((self._blocks[step.then_block], step.then_in, step.then_out),
                    (self._blocks[step.else_block], step.else_in, step.else_out))

        def run(env):
            block, inner_in, inner_out = branches[0] if env[pred] else branches[1]
            for slot, i in zip(inner_in, ins):
                env[slot] = env[i]
            block(env)
            for slot, i in zip(outs, inner_out):
                env[slot] = env[i]
        return run

    def _step_call(self, step):
        """An outlined function's call: its arguments copied in, its shared body run, its
        results copied out. The body may be built after the caller (it can have a smaller
        index), so it is looked up when the call runs."""
        ins, outs, body_in, body_out = step.ins, step.outs, step.body_in, step.body_out
        blocks, index = self._blocks, step.body_block

        def run(env):
            for slot, i in zip(body_in, ins):
                env[slot] = env[i]
            blocks[index](env)
            for slot, i in zip(outs, body_out):
                env[slot] = env[i]
        return run


def _call_into(kernel, ins, out):
    """A step writing `kernel(*ins)` to slot `out`, with its operands named one by one for
    up to three (a quarter of the generic call's cost: the hot path of small models)."""
    if len(ins) == 1:
        (a,) = ins

        def run(env):
            env[out] = kernel(env[a])
    elif len(ins) == 2:
        a, b = ins

        def run(env):
            env[out] = kernel(env[a], env[b])
    elif len(ins) == 3:
        a, b, c = ins

        def run(env):
            env[out] = kernel(env[a], env[b], env[c])
    else:
        def run(env):
            env[out] = kernel(*[env[i] for i in ins])
    return run


def _then_drop(run, slots):
    if len(slots) == 1:
        (slot,) = slots

        def step(env):
            run(env)
            env[slot] = None
        return step

    def step(env):
        run(env)
        for slot in slots:
            env[slot] = None
    return step


def _exports(executable):
    """Per block: the slots read after it runs by whoever runs it (the run's outputs, a
    loop's condition and carried values, a branch's results)."""
    exports = [set() for _ in executable.blocks]
    exports[0].update(executable.outputs)
    for block in executable.blocks:
        for step in block.steps:
            if isinstance(step, While):
                exports[step.cond_block].add(step.cond_out)
                exports[step.body_block].update(step.body_out)
            elif isinstance(step, If):
                exports[step.then_block].update(step.then_out)
                exports[step.else_block].update(step.else_out)
            elif isinstance(step, Call):
                exports[step.body_block].update(step.body_out)
    return exports


def located(error, executable):
    """`error` (raised by the kernel of op `error.op`) with where that op comes from: the
    TensorFlow node and Keras layer of its steps (found after the fact, so that the run
    loop pays nothing for it)."""
    places = []
    for block in executable.blocks:
        for step, source in zip(block.steps, block.sources):
            if isinstance(step, Exec) and step.op == error.op:
                place = f"TensorFlow node '{source.node}'" + (
                    f" in Keras layer '{source.layer}'" if source.layer else "")
                if place not in places:
                    places.append(place)
    where = ("; ".join(places[:3]) + (f" and {len(places) - 3} more" if len(places) > 3
                                        else "")) if places else "an unknown node"
    again = type(error)(f"{error} (op '{error.op}', from {where})", op=error.op)
    again.where = places
    return again
