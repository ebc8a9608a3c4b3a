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

from ipu_keras.ir.types import TensorType
from ipu_keras.ops import cores
from ipu_keras.ops._common import broadcast_shape
from ipu_keras.ops.registry import Work, register_op, tf_import

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
    result = cores.einsum(equation, operands, _macs(equation, tuple(x.shape for x in operands)),
                          optimize=len(operands) > 1)
    return np.asarray(result).astype(dtype, copy=False)


@functools.lru_cache(maxsize=256)
def _macs(equation, shapes):
    """Multiply-accumulates: every combination of labels, times the broadcast dimensions."""
    _, _, sizes, ellipsis = _label_sizes(equation, shapes)
    return math.prod(sizes.values()) * math.prod(ellipsis)


def _einsum_cost(in_types, out_types, *, equation):
    """Multiply-accumulates: every combination of labels, times the broadcast dimensions."""
    return Work("amp", _macs(equation, tuple(t.shape for t in in_types)))


register_op("einsum", shape=_einsum_shape, kernel=_einsum, cost=_einsum_cost, mapping="matmul")


@tf_import("Einsum")
def _import_einsum(node, b):
    return b.emit("einsum", node.inputs, equation=str(node.attr("equation")))
