"""The meaning of a loaded executable, checked before anything runs it.

`steps.py` checks that a loaded program is made of well-formed records with indices in
range; this module checks what an engine, a session or a report would otherwise find
out by crashing: the target is a target, the input, output, variable and feed types
are shapes and dtypes and there are as many as the program's inputs and outputs, a
deferred out-of-memory error has the fields of one, every `exec` step names a
registered op whose kernel takes its operands and params, every collective a
collective op, control flow hands as many values in as it takes out, and every slot a
step reads was written before it (by the program's inputs, a constant, a loop's or
branch's entry, or an earlier step of the enclosing blocks). An outlined function's body
(`Call`) is checked once, on its inputs, the program's inputs and the constants only,
since it runs wherever it is called; every call must hand it as many values as it takes,
and no block may run itself through calls.

`check_program(fields)` raises `Malformed` (expected, received), which the loader
reports as an `ExecutableFormatError`. What it cannot see is a program that is
well formed and means something else (one registered op for another of the same
arity): a checksum is no signature, and the executable cache binds each entry to its
key and graph so that such a file is at least never another graph's program.
"""
import functools
import inspect
import numbers

import numpy as np

from ipu_keras._src.device.steps import Call, Collective, Exec, If, Malformed, While
from ipu_keras._src.device.targets import Target
from ipu_keras._src.ops.registry import all_ops
from ipu_keras.errors import OutOfTileMemoryError

_POSITIVE = ("tiles_per_ipu", "bytes_per_tile", "num_ipus", "clock_hz", "workers_per_tile")
_COLLECTIVE_ROLES = ("replica_reduce", "replica_index")
_OUT_OF_MEMORY = set(inspect.signature(OutOfTileMemoryError).parameters)


def _expect(ok, what, received):
    if not ok:
        text = repr(received)
        raise Malformed(what, text if len(text) <= 80 else text[:77] + "...")


def _number(value, low=0):
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and value >= low


def _target(data):
    try:
        Target.from_dict(data)
    except Exception as e:  # the target's own checks, whatever they raise
        raise Malformed("a target as Target.to_dict() writes it", f"{e}") from None
    for name, value in data.items():
        if name == "name":
            _expect(isinstance(value, str), "target.name, a string", value)
        elif isinstance(value, dict):
            _expect(all(_number(v, 1) for v in value.values()), f"target.{name}", value)
        else:
            _expect(_number(value, 1 if name in _POSITIVE else 0),
                    f"target.{name}, a number", value)


def _tensor_type(data, where):
    _expect(isinstance(data, dict) and isinstance(data.get("shape"), list)
            and all(type(d) is int and d >= 0 for d in data["shape"])
            and isinstance(data.get("dtype"), str), f"{where}, a shape and a dtype", data)
    try:
        np.dtype(data["dtype"])
    except TypeError:
        raise Malformed(f"{where}, a numpy dtype", f"{data['dtype']!r:.80}") from None


def _interface(fields):
    for name, slots in (("input_types", "inputs"), ("output_types", "outputs")):
        _expect(len(fields[name]) == len(fields[slots]),
                f"{name}, one per slot of {slots} ({len(fields[slots])})", fields[name])
        for data in fields[name]:
            _tensor_type(data, name)
    for data in fields["variables"]:
        _expect(isinstance(data, dict) and isinstance(data.get("name"), str)
                and type(data.get("written")) is bool, "a variable with name and written",
                data)
        _tensor_type(data, "a variable")
    for name in ("infeeds", "outfeeds"):
        for data in fields[name]:
            _expect(isinstance(data, dict) and isinstance(data.get("name"), str)
                    and isinstance(data.get("types"), list), f"{name}, names and types", data)
            for t in data["types"]:
                _tensor_type(t, name)
    oom = fields["memory"].get("out_of_memory")
    _expect(oom is None or isinstance(oom, dict) and set(oom) <= _OUT_OF_MEMORY
            and {"tile", "bytes_used", "bytes_available"} <= set(oom),
            f"memory.out_of_memory, null or the fields {sorted(_OUT_OF_MEMORY)}", oom)


@functools.lru_cache(maxsize=None)
def _signature(kernel):
    """A kernel's signature, read once per kernel rather than once per step."""
    return inspect.signature(kernel)


def _kernel_takes(op, step, ops):
    opdef = ops.get(step.op)
    _expect(opdef is not None and opdef.kernel is not None,
            "an exec step naming a registered op with a kernel", step.op)
    try:
        _signature(opdef.kernel).bind(*step.ins, **step.params)
    except TypeError as e:
        raise Malformed(f"operands and params that the kernel of '{op}' takes",
                        f"{len(step.ins)} operands, params {sorted(step.params)} ({e})"
                        ) from None


class _Flow:
    """Walks the blocks from the main one, the slots written so far in hand."""

    def __init__(self, blocks, ops, base=()):
        self.blocks, self.ops, self.seen = blocks, ops, set()
        self.base = set(base)   # what a called body may read besides its inputs
        self.bodies = {}        # a called body -> (its inputs, its results)

    def block(self, index, written):
        _expect(index not in self.seen, "each block run by one step", f"block {index}")
        self.seen.add(index)
        for i, step in enumerate(self.blocks[index].steps):
            missing = [s for s in step.reads if s not in written]
            _expect(not missing, "slots written before they are read",
                    f"block {index} step {i} ({step.kind}) reads {missing}")
            if isinstance(step, Exec):
                _kernel_takes(step.op, step, self.ops)
            elif isinstance(step, Collective):
                opdef = self.ops.get(step.op)
                _expect(opdef is not None and opdef.role in _COLLECTIVE_ROLES,
                        "a collective step naming a collective op", step.op)
            elif isinstance(step, While):
                self.loop(step, written)
            elif isinstance(step, If):
                self.branch(step, written)
            elif isinstance(step, Call):
                self.call(step)
            written.update(step.writes)

    def loop(self, step, written):
        n = len(step.carry)
        _expect(len(step.cond_in) == len(step.body_in) == len(step.body_out)
                == len(step.outs) == n, f"a while step carrying {n} values everywhere", step)
        self.block(step.cond_block, written | set(step.cond_in))
        _expect(step.cond_out in self.written_by(step.cond_block, written, step.cond_in),
                "a loop condition written by its block", step.cond_out)
        inner = self.written_by(step.body_block, written, step.body_in)
        self.block(step.body_block, written | set(step.body_in))
        _expect(set(step.body_out) <= inner, "loop results written by its body", step)

    def branch(self, step, written):
        n = len(step.ins)
        for block, ins, outs in ((step.then_block, step.then_in, step.then_out),
                                 (step.else_block, step.else_in, step.else_out)):
            _expect(len(ins) == n and len(outs) == len(step.outs),
                    f"a branch taking {n} values and giving {len(step.outs)}", step)
            inner = self.written_by(block, written, ins)
            self.block(block, written | set(ins))
            _expect(set(outs) <= inner, "branch results written by the branch", step)

    def call(self, step):
        _expect(len(step.ins) == len(step.body_in) and len(step.outs) == len(step.body_out),
                "a call handing its body as many values as it takes and gives", step)
        known = self.bodies.get(step.body_block)
        if known is not None:
            _expect(known == (step.body_in, step.body_out),
                    "every call of a body with the same inputs and results", step)
            return
        self.bodies[step.body_block] = (step.body_in, step.body_out)
        inner = self.written_by(step.body_block, self.base, step.body_in)
        self.block(step.body_block, self.base | set(step.body_in))
        _expect(set(step.body_out) <= inner, "call results written by the body", step)

    def written_by(self, index, written, ins):
        """The slots in hand after block `index` runs (only its own steps' writes)."""
        out = written | set(ins)
        for step in self.blocks[index].steps:
            out.update(step.writes)
        return out


def _no_cycle(blocks):
    """Raises `Malformed` if a block runs itself through calls (other sub-blocks always
    have larger indices than their parents), which the engine would recurse into forever."""
    state = [0] * len(blocks)   # 0 unvisited, 1 on the path, 2 done

    def visit(index):
        state[index] = 1
        for step in blocks[index].steps:
            for sub in step.blocks:
                _expect(state[sub] != 1, "calls that do not form a cycle",
                        f"block {index} runs block {sub}")
                if state[sub] == 0:
                    visit(sub)
        state[index] = 2

    for index in range(len(blocks)):
        if state[index] == 0:
            visit(index)


def check_program(fields):
    """Raises `Malformed` unless the loaded fields of an `Executable` mean a program the
    engine can run (module docstring)."""
    _target(fields["target"])
    _interface(fields)
    _no_cycle(fields["blocks"])
    written = set(fields["inputs"]) | {slot for slot, _ in fields["constants"]}
    flow = _Flow(fields["blocks"], all_ops(), written)
    flow.block(0, written)
    _expect(set(fields["outputs"]) <= written, "outputs written by the main program",
            fields["outputs"])


__all__ = ["check_program"]
