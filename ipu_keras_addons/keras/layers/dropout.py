"""Dropout as on the IPU: a seed pair makes the mask repeat; `noise_shape` broadcasts it.

With `seed=[a, b]` the mask comes from a stateless generator keyed by that pair, so every
call draws the same mask. Without a seed each call draws a fresh seed from the layer's
seed generator. With `ref=True` (the default) the layer is PopLibs' dropout op
(`ipu_keras.ops.rand_ops`, `ops/dropout.py`), which regenerates its mask from the seed in
the backward pass instead of storing it; `ref=False` builds the same numbers from plain
TensorFlow ops, whose mask stays live until the backward pass.
"""
import keras
import numpy as np
import tensorflow as tf

from ipu_keras.ops import rand_ops
from ipu_keras._src.ops import dropout as dropout_op
from ipu_keras_addons.keras.layers.ipu_layer import argument_error, serializable


@serializable
class Dropout(keras.layers.Layer):
    """Dropout layer optimized for the IPU.

    Args:
        rate: Float in [0, 1): the fraction of the inputs to drop.
        noise_shape: Shape of the binary mask, of the inputs' rank; each entry is 1
            (broadcast) or the inputs' size in that dimension.
        seed: Optional pair of int32 seeds; with it the mask is the same on every call.
    """

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        self.ref = kwargs.pop("ref", True)
        super().__init__(**kwargs)
        if not 0 <= rate < 1:
            raise argument_error("Dropout", "rate in the range [0, 1)", rate=rate)
        if seed is not None:
            seed = [int(s) for s in np.asarray(seed).reshape(-1)] \
                if np.ndim(seed) == 1 and np.shape(seed) == (2,) else _bad_seed(seed)
        self.rate = float(rate)
        self.noise_shape = None if noise_shape is None else list(noise_shape)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator() if seed is None else None
        self.supports_masking = True

    def _mask_shape(self, inputs):
        if self.noise_shape is None:
            return tf.shape(inputs)
        shape = inputs.shape
        if len(self.noise_shape) != len(shape):
            raise argument_error("Dropout", f"noise_shape of rank {len(shape)}",
                                 noise_shape=self.noise_shape)
        for n, d in zip(self.noise_shape, shape):
            if n is not None and n != 1 and d is not None and n != d:
                raise argument_error(
                    "Dropout", f"noise_shape entries of 1 or the input's size {list(shape)} "
                    "(Dimension mismatch)", noise_shape=self.noise_shape)
        dynamic = tf.shape(inputs)
        return tf.stack([dynamic[i] if n is None else n
                         for i, n in enumerate(self.noise_shape)])

    def call(self, inputs, training=None):
        if not training or self.rate == 0:
            return inputs
        mask_shape = self._mask_shape(inputs)
        seed = seed_tensor(self.seed if self.seed is not None else self.seed_generator)
        if self.ref:
            axes = tuple(a for a, n in enumerate(self.noise_shape or ()) if n == 1)
            return rand_ops.regenerating_dropout(inputs, seed, self.rate, axes)
        return dropout(inputs, self.rate, mask_shape, seed)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"rate": self.rate, "noise_shape": self.noise_shape,
                       "seed": self.seed, "ref": self.ref})
        return config


def seed_tensor(seed):
    """An int32 seed pair tensor from a pair of ints (the same mask on every call) or a
    `keras.random.SeedGenerator` (a fresh seed each call)."""
    if isinstance(seed, keras.random.SeedGenerator):
        return tf.cast(tf.math.floormod(seed.next(), 2**31 - 1), tf.int32)
    return tf.constant(seed, tf.int32)


def dropout(inputs, rate, mask_shape, seed):
    """Zeroes elements with probability `rate` (mask of `mask_shape`, broadcast over the
    inputs) and scales the rest by 1 / (1 - rate), from plain TensorFlow ops (the mask is
    a tensor the backward pass reads). `seed` is an int32 pair tensor."""
    rate_c, scale_c = dropout_op.constants(rate, inputs.dtype.as_numpy_dtype)
    uniform = tf.random.stateless_uniform(mask_shape, seed=seed, dtype=inputs.dtype)
    keep = tf.cast(uniform >= tf.constant(rate_c, inputs.dtype), inputs.dtype)
    return inputs * keep * tf.constant(scale_c, inputs.dtype)


def _bad_seed(seed):
    raise argument_error("Dropout", "seed to be a pair of int32 values of shape [2]",
                         seed=seed)
