"""Op family 'dropout': PopLibs' dropout, which regenerates its mask instead of storing it.

`dropout(x, seed) {rate, scale, broadcast_axes}` zeroes the elements of `x` whose
uniform random number (Philox, keyed by `seed`, an int32/int64 pair) is below `rate` and
multiplies the others by `scale` (1 / (1 - rate)). The mask has x's shape with the
`broadcast_axes` of size 1 (`noise_shape`) and is broadcast over them. The numbers are
TensorFlow's: the mask is `tf.random.stateless_uniform(mask_shape, seed, x.dtype) >= rate`,
bit for bit (`ops/random.py`), and `x * mask * scale` rounds as TensorFlow rounds it.

What the op changes against the generic graph of the same numbers: no mask tensor exists
between the forward and the backward pass. The backward pass is the same op on the
incoming gradient with the same seed (it regenerates the mask), so only the 8-byte
seed stays live, not a mask of x's size; and the random numbers are drawn inside the op
(one vertex per tile, no uniform tensor written to memory).

TensorFlow side: `ipu_keras.ops.rand_ops.dropout` (and the addons `Dropout` layer) build a
call marked "IpuDropout" (`tracer/marked.py`) whose body is that TensorFlow composition.
"""
import numpy as np

from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops.random import _key_counter, _uniform
from ipu_keras._src.ops.registry import Work, register_op, tf_import

TF_TYPE = "IpuDropout"
"""The marked call's op type (the original's TensorFlow op)."""

RNG_CYCLES_PER_ELEMENT = 1
"""Vector work per mask element: the tile's random generator makes the bits for one
element a cycle; comparing and scaling add two more per output element."""


def constants(rate, dtype):
    """The rate and the scale as `dtype` scalars, rounded as TensorFlow rounds a Python
    float cast to `dtype` (through float32)."""
    dtype = np.dtype(dtype)
    scale = 1.0 / (1.0 - rate)
    return np.float32(rate).astype(dtype), np.float32(scale).astype(dtype)


def mask_shape(shape, broadcast_axes):
    return tuple(1 if axis in broadcast_axes else d for axis, d in enumerate(shape))


def _shape(in_types, *, rate, broadcast_axes):
    x, seed = in_types
    if seed.shape != (2,) or seed.dtype not in ("int32", "int64"):
        raise ValueError(f"dropout expected a seed of two int32 or int64 values. "
                         f"Received: seed={seed}")
    if not 0 <= rate < 1:
        raise ValueError(f"dropout expected a rate in [0, 1). Received: rate={rate}")
    if any(not 0 <= a < len(x.shape) for a in broadcast_axes):
        raise ValueError(f"dropout expected broadcast axes of a rank-{len(x.shape)} input. "
                         f"Received: broadcast_axes={broadcast_axes}")
    return [TensorType(x.shape, x.dtype)]


def _kernel(x, seed, *, rate, broadcast_axes):
    key, counter = _key_counter(seed)
    uniform = _uniform(key, counter, shape=mask_shape(x.shape, broadcast_axes),
                       dtype=x.dtype)
    rate_, scale = constants(rate, x.dtype)
    keep = (uniform >= rate_).astype(x.dtype)
    return (x * keep) * scale


def _cost(in_types, out_types, *, rate, broadcast_axes):
    x = in_types[0]
    mask = int(np.prod(mask_shape(x.shape, broadcast_axes)))
    return Work("vector", RNG_CYCLES_PER_ELEMENT * mask + 2 * x.size)


register_op("dropout", shape=_shape, kernel=_kernel, cost=_cost, mapping="elementwise",
            recompute="never")   # stateful on the IPU: IPU TensorFlow stashes it


@tf_import(TF_TYPE)
def _import_dropout(node, b, *, rate, broadcast_axes):
    x, seed = node.inputs
    return b.emit("dropout", [x, seed], rate=float(rate), broadcast_axes=tuple(broadcast_axes))


__all__ = ["TF_TYPE", "constants", "mask_shape"]
