"""Sibling products: two independent products next to each other run at once, one per core.

A Keras gradient computes a layer's two products from the same output gradient: the
input and filter gradients of a convolution, the two matmuls of a Dense layer's. Split
over the two cores one after the other, each pays a hand-off to the slab worker (its
wake-up, then the caller's wait for its slab: 100-250 us on this project's VMs); run at
once, each whole on one core (`cores.concurrently`), the pair pays one.

`siblings(steps)` finds them when the engine is built: two consecutive single-output exec
steps of products (ops whose tile mapping is "matmul": convolutions, their gradients,
matmul, einsum) sharing an operand, the second not reading the first's output. Each pair
becomes one `SiblingSteps` step (operands, outputs, first, second), whose values are
dropped after both have run. `Siblings` runs it: at once when the execution
splits kernels over two cores and each product is at least `cores.WIDE_MACS`
multiply-accumulates (its cost rule, for its operands' shapes), else one after the
other. Each product is then computed whole by one thread: bitwise the kernel on one
core (a filter gradient's sum over the batch in one pass instead of a partial sum per
slab).
"""
import dataclasses
from typing import ClassVar

from ipu_keras._src.device.steps import Exec, KernelStep
from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops import cores
from ipu_keras._src.ops.registry import get_op


@dataclasses.dataclass(frozen=True, slots=True)
class SiblingSteps(KernelStep):
    """Two sibling product steps run as one (module docstring); the engine's, not saved."""

    kind: ClassVar[str] = "siblings"
    ins: tuple
    outs: tuple
    first: Exec
    second: Exec


def siblings(steps):
    """`steps` (a block's) with each pair of sibling products made one `SiblingSteps`."""
    out, i = [], 0
    while i < len(steps):
        if i + 1 < len(steps) and _siblings(steps[i], steps[i + 1]):
            first, second = steps[i], steps[i + 1]
            out.append(SiblingSteps(first.ins + second.ins, first.outs + second.outs, first,
                                    second))
            i += 2
        else:
            out.append(steps[i])
            i += 1
    return out


def _product(step):
    return (isinstance(step, Exec) and len(step.outs) == 1
            and get_op(step.op).mapping == "matmul")


def _siblings(first, second):
    return (_product(first) and _product(second) and bool(set(first.ins) & set(second.ins))
            and first.outs[0] not in second.ins)


class Siblings:
    """Runs a `SiblingSteps` step: `first` and `second` are its steps' closures (`run(env)`)
    and the steps themselves, for their operands' shapes (module docstring)."""

    def __init__(self, first, second, steps):
        self.first, self.second = first, second
        self.steps = steps
        self._wide = {}   # the operands' shapes -> whether both products are wide

    def __call__(self, env):
        if cores.slabs() == 2 and self._both_wide(env):
            cores.concurrently(lambda: self.first(env), lambda: self.second(env))
        else:
            self.first(env)
            self.second(env)

    def _both_wide(self, env):
        shapes = tuple(tuple(env[slot].shape) for step in self.steps for slot in step.ins)
        wide = self._wide.get(shapes)
        if wide is None:
            wide = self._wide[shapes] = all(
                _macs(step, [env[slot] for slot in step.ins]) >= cores.WIDE_MACS
                for step in self.steps)
        return wide


def _macs(step, arrays):
    """Multiply-accumulates of a product step on `arrays`, by its op's cost rule."""
    params = step.params
    opdef = get_op(step.op)
    in_types = [TensorType(x.shape, x.dtype) for x in arrays]
    work = opdef.cost(in_types, opdef.shape(in_types, **params), **params)
    return work.amount if work.kind == "amp" else 0
