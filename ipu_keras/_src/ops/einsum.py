"""Op family 'einsum': TensorFlow's Einsum (EinsumDense, MultiHeadAttention).

Owns the IR op `einsum(*operands)`, param `equation` (TensorFlow's syntax, with `...`
for broadcast dimensions and an implicit output when `->` is missing). Its gradient
needs nothing else: TensorFlow emits the gradient of an Einsum as other Einsums
(plus reductions and reshapes, imported by their own families). The kernel is
`numpy.einsum` with contraction-order optimisation, in float32 for float16 operands.
"""
import functools
import math

import numpy as np

from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops import cores
from ipu_keras._src.ops._common import broadcast_shape
from ipu_keras._src.ops.registry import Work, register_op, tf_import

TF_TYPES = ("Einsum",)
"""The TensorFlow op types this module imports."""

IR_OPS = ("einsum",)
"""The IR ops this module registers."""

_ELLIPSIS = "."


def _split(equation, count):
    """Input subscripts and output subscripts ("..." as one '.' character)."""
    equation = equation.replace(" ", "").replace("...", _ELLIPSIS)
    inputs, arrow, output = equation.partition("->")
    inputs = inputs.split(",")
    if len(inputs) != count:
        raise ValueError(f"einsum expected {len(inputs)} operands for equation "
                         f"'{equation}'. Received: {count} operands")
    if not arrow:
        letters = "".join(inputs).replace(_ELLIPSIS, "")
        output = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
        output = (_ELLIPSIS if any(_ELLIPSIS in s for s in inputs) else "") + output
    return inputs, output


def _label_sizes(equation, shapes):
    """{label: size} over all operands and the broadcast shape of the '...' dimensions."""
    inputs, output = _split(equation, len(shapes))
    sizes, broadcast = {}, []
    for subscripts, shape in zip(inputs, shapes):
        named = len(subscripts.replace(_ELLIPSIS, ""))
        if len(shape) < named or (len(shape) != named and _ELLIPSIS not in subscripts):
            raise ValueError(f"einsum subscripts '{subscripts}' expected rank {named}. "
                             f"Received: shape={shape}")
        dims = list(shape)
        if _ELLIPSIS in subscripts:
            at = subscripts.index(_ELLIPSIS)
            extra = len(shape) - named
            broadcast.append(tuple(shape[at:at + extra]))
            dims = dims[:at] + dims[at + extra:]
        for label, size in zip(subscripts.replace(_ELLIPSIS, ""), dims):
            if sizes.get(label, size) not in (size, 1) and size != 1:
                raise ValueError(f"einsum label '{label}' has sizes {sizes[label]} and {size}. "
                                 f"Received: equation='{equation}', shapes={shapes}")
            sizes[label] = max(sizes.get(label, size), size)
    return inputs, output, sizes, broadcast_shape(*broadcast) if broadcast else ()


def _einsum_shape(in_types, *, equation):
    _, output, sizes, ellipsis = _label_sizes(equation, [t.shape for t in in_types])
    shape = []
    for label in output:
        shape.extend(ellipsis if label == _ELLIPSIS else (sizes[label],))
    return [TensorType(tuple(shape), in_types[0].dtype)]


def _einsum(*operands, equation):
    dtype = operands[0].dtype
    work = np.float32 if dtype == np.float16 else dtype
    operands = [x.astype(work, copy=False) for x in operands]
    plan = _product_plan(equation, tuple(x.shape for x in operands))
    if plan is not None:
        result = _as_product(plan, *operands)
    else:
        result = cores.einsum(equation, operands,
                              _macs(equation, tuple(x.shape for x in operands)),
                              optimize=len(operands) > 1)
    return np.asarray(result).astype(dtype, copy=False)


@functools.lru_cache(maxsize=256)
def _product_plan(equation, shapes):
    """How a two-operand einsum is one batched product, or None.

    numpy's einsum runs a contraction that keeps batch labels (attention's
    'BTNH,BSNH->BNTS') as many small products in its own loops, slower than one batched
    BLAS product. Each label must be a batch label (both operands and the output), a
    contracted one (both operands only) or a free one (one operand and the output), of
    one size wherever it appears. Each operand is laid out as (batch, free, contracted)
    or (batch, contracted, free), whichever keeps its last axis last (the copy then moves
    contiguous runs), and handed to the product as that or its transposed view; the
    product's (batch, free of a, free of b) is transposed to the output's order.
    Returns ((axes, 3-d shape, transposed) per operand, the unfolded product shape, the
    output's axes of it)."""
    if len(shapes) != 2 or "." in equation:
        return None
    (left, right), output, size, _ = _label_sizes(equation, shapes)
    if any(len(set(x)) != len(x) for x in (left, right, output)):
        return None
    if any(n != size[c] for sub, shape in zip((left, right), shapes) for c, n in zip(sub, shape)):
        return None   # a size-1 label broadcast against a larger one
    batch = [c for c in output if c in left and c in right]
    free_a = [c for c in output if c in left and c not in right]
    free_b = [c for c in output if c in right and c not in left]
    summed = [c for c in left if c in right and c not in output]
    if len(batch) + len(free_a) + len(free_b) != len(output) \
            or set(left) != set(batch + free_a + summed) \
            or set(right) != set(batch + free_b + summed):
        return None   # a label summed within one operand alone

    def layout(subscripts, rows, columns):
        """(axes, 3-d shape, transposed): the operand as (batch, rows, columns) of the
        product, copied as (batch, columns, rows) and transposed when its last label is
        a row label."""
        swap = bool(subscripts) and subscripts[-1] in rows
        first, second = (columns, rows) if swap else (rows, columns)
        return (tuple(subscripts.index(c) for c in batch + first + second),
                tuple(math.prod(size[c] for c in group) for group in (batch, first, second)),
                swap)

    order = batch + free_a + free_b
    return (layout(left, free_a, summed), layout(right, summed, free_b),
            tuple(size[c] for c in order), tuple(order.index(c) for c in output))


def _as_product(plan, a, b):
    """The einsum of `a` and `b` by the batched product `_product_plan` made."""
    a_layout, b_layout, unfolded, output_axes = plan
    product = cores.matmul(_laid_out(a, *a_layout), _laid_out(b, *b_layout))
    return product.reshape(unfolded).transpose(output_axes)


def _laid_out(x, axes, shape, transposed):
    x = x.transpose(axes).reshape(shape)
    return x.swapaxes(-1, -2) if transposed else x


@functools.lru_cache(maxsize=256)
def _macs(equation, shapes):
    """Multiply-accumulates: every combination of labels, times the broadcast dimensions."""
    _, _, sizes, ellipsis = _label_sizes(equation, shapes)
    return math.prod(sizes.values()) * math.prod(ellipsis)


def _einsum_cost(in_types, out_types, *, equation):
    """Multiply-accumulates: every combination of labels, times the broadcast dimensions."""
    return Work("amp", _macs(equation, tuple(t.shape for t in in_types)))


def _einsum_is_function(in_types, out_types, *, equation):
    """Whether IPU TensorFlow runs this einsum as a cached Poplar function: XLA lowers a
    two-operand einsum to a dot, which is one (as `matmul`'s rule says) unless an operand
    keeps no free dimension larger than 1, its labels all batch or contracted ones (a
    dot by a vector: a multiply and a reduce). A one-operand einsum is a transpose or a
    reduction, no dot."""
    if len(in_types) != 2:
        return False
    (left, right), output, sizes, ellipsis = _label_sizes(equation,
                                                          [t.shape for t in in_types])

    def free(mine, other):
        """Elements of the dimensions only `mine` carries into the output."""
        size = math.prod(sizes[c] for c in set(mine) - set(other) if c in output
                         and c != _ELLIPSIS)
        return size * (math.prod(ellipsis) if _ELLIPSIS in set(mine) - set(other) else 1)

    return free(left, right) > 1 and free(right, left) > 1


register_op("einsum", shape=_einsum_shape, kernel=_einsum, cost=_einsum_cost, mapping="matmul",
            function=_einsum_is_function)


@tf_import("Einsum")
def _import_einsum(node, b):
    return b.emit("einsum", node.inputs, equation=str(node.attr("equation")))
