"""`ipu.rand_ops.dropout`: PopLibs' dropout, one IPU op whose backward regenerates its mask.

The op is a TensorFlow function call marked "IpuDropout" (`tracer/marked.py`): on the CPU
its body runs the same numbers with TensorFlow's stateless random ops; on the simulated
IPU it is the `dropout` op of `ops/dropout.py`. Its gradient is the same op on the
incoming gradient with the same seed, so no mask is kept between the passes.
"""
import tensorflow as tf

from ipu_keras._src import compat
from ipu_keras.errors import AddonsArgumentError
from ipu_keras._src.ops import dropout as dropout_op
from ipu_keras._src.tracer.marked import marked_call


def dropout(x, seed=None, rate=0.5, seed_modifier=1, noise_shape=None, name=None):
    """Drops elements of `x` with probability `rate`, scaling the kept ones by 1/(1-rate).

    Args:
        x: The input tensor (float16 or float32).
        seed: An optional pair of int32 (tensor, array, list or tuple). With it, the same
            mask on every call; without it, a fresh seed from Keras' global seed generator.
        rate: The probability that an element is zeroed, in [0, 1).
        seed_modifier: Accepted for compatibility (the original passed it to Poplar to
            modify the seed); the mask depends on `seed` only.
        noise_shape: Optional shape of the mask, of x's rank; each entry is 1 (the mask is
            broadcast along that axis) or x's size.
        name: Optional op name.

    Returns:
        A tensor of x's shape and dtype.
    """
    del seed_modifier
    if not 0.0 <= rate < 1.0:
        raise AddonsArgumentError(f"The rate must be in the range [0, 1), but was {rate}.")
    x = tf.convert_to_tensor(x)
    axes = broadcast_axes(x.shape, noise_shape)
    if seed is None:
        seed = _fresh_seed()
    seed = tf.convert_to_tensor(seed)
    if seed.shape != [2]:
        raise AddonsArgumentError(
            f"Expected the seed to have a shape [2], but got {seed.shape}.")
    with tf.name_scope(name or "dropout"):
        return regenerating_dropout(x, seed, float(rate), axes)


def broadcast_axes(shape, noise_shape):
    """The axes along which a `noise_shape` mask is broadcast over inputs of `shape`."""
    if not noise_shape:
        return ()
    dims = shape.as_list()
    if len(dims) != len(noise_shape):
        raise AddonsArgumentError("The length of noise_shape must equal the rank of x.")
    axes = []
    for axis, (d, n) in enumerate(zip(dims, noise_shape)):
        if n == 1 and d != 1:
            axes.append(axis)
        elif n is not None and d is not None and n != d:
            raise AddonsArgumentError(f"Dimension mismatch, {d} != {n}.")
    return tuple(axes)


def regenerating_dropout(x, seed, rate, axes):
    """The marked dropout of `x` with an int seed pair tensor, and its regenerating
    gradient (the same op, same seed, on the incoming gradient)."""

    @tf.custom_gradient
    def forward(x):
        def backward(dy):
            return _marked(dy, seed, rate, axes)

        return _marked(x, seed, rate, axes), backward

    return forward(x)


def _marked(x, seed, rate, axes):
    rate_c, scale_c = dropout_op.constants(rate, x.dtype.as_numpy_dtype)

    def body(x, seed):
        shape = tf.shape(x)
        mask_shape = tf.stack([1 if a in axes else shape[a] for a in range(x.shape.rank)])
        uniform = tf.random.stateless_uniform(mask_shape, seed, dtype=x.dtype)
        keep = tf.cast(uniform >= tf.constant(rate_c, x.dtype), x.dtype)
        return x * keep * tf.constant(scale_c, x.dtype)

    return marked_call(dropout_op.TF_TYPE, body, [x, seed],
                       {"rate": rate, "broadcast_axes": list(axes)})


def _fresh_seed():
    import keras

    generator = keras.src.random.seed_generator.global_seed_generator()
    return tf.cast(tf.math.floormod(generator.next(), 2**31 - 1), tf.int32)


compat.declare("ipu.rand_ops.dropout", compat.SUPPORTED,
               "One IPU dropout op (mask regenerated in the backward pass, not stored); "
               "seed_modifier is accepted and unused", since="2.1")
