"""`ipu.normalization_ops`: Popnn's group, layer and instance normalisation.

`group_norm`, `layer_norm` and `instance_norm` keep the original's functional interface:
they make their `beta` (zeros) and `gamma` (ones) variables, of shape [channels], with
`tf.compat.v1.get_variable` in a variable scope named `GroupNorm`, `LayerNorm` or
`InstanceNorm` (as TensorFlow 1 layers did: `reuse`, `scope` and the collections work as
there), and normalise with the statistics of each sample: over its spatial positions and
the channels of a group, with the biased variance. There are no moving statistics, so
`training=False` computes the same numbers (the original only chose another op).

Layer norm is group norm with one group (every non-batch axis together, gamma and beta
per channel); instance norm has one group per channel. With `strided_channel_grouping`
(group norm's default, as on the IPU) channel `c` is in group `c % groups`; without it
the groups are contiguous ranges of channels, as in `keras.layers.GroupNormalization`.

The computation is a composition of TensorFlow ops (means, a reciprocal square root),
which the simulated IPU runs op by op; its gradient is TensorFlow's.
"""
import functools
import operator

import warnings

import tensorflow as tf

from ipu_keras.errors import OpArgumentError

__all__ = ["group_norm", "instance_norm", "layer_norm"]

MIN_EPSILON = 1.53e-5
"""Below this the original warned of NaNs or floating-point exceptions (float16)."""


def normalise(x, gamma, beta, groups, epsilon, strided):
    """Group normalisation of channels-last `x` [N, ..., C] with per-channel gamma, beta."""
    channels = x.shape[-1]
    spatial = functools.reduce(operator.mul, x.shape[1:-1], 1)
    if strided:    # channel c = j * groups + g: group g is the last axis
        grouped = tf.reshape(x, [-1, spatial, channels // groups, groups])
        axes = [1, 2]
    else:          # channel c = g * (C / groups) + j
        grouped = tf.reshape(x, [-1, spatial, groups, channels // groups])
        axes = [1, 3]
    mean = tf.reduce_mean(grouped, axis=axes, keepdims=True)
    centred = grouped - mean
    variance = tf.reduce_mean(tf.square(centred), axis=axes, keepdims=True)
    normalised = tf.reshape(centred * tf.math.rsqrt(variance + epsilon), tf.shape(x))
    return normalised * gamma + beta


def _error(function, expected, **received):
    value = ", ".join(f"{k}={v!r}" for k, v in received.items())
    return OpArgumentError(f"{function} expected {expected}. Received: {value}")


def _channel_axis(inputs, channels_axis, function):
    rank = inputs.shape.rank
    if rank is None:
        raise _error(function, "inputs of known rank (the original: 'Inputs has undefined "
                     "rank.')", inputs=inputs)
    if isinstance(channels_axis, bool) or not isinstance(channels_axis, int) \
            or not -rank <= channels_axis < rank:
        raise _error(function, f"channels_axis within the rank {rank} of the inputs "
                     "(the original: 'Axis is out of bounds.')", channels_axis=channels_axis)
    axis = channels_axis % rank
    if rank < 2 or axis not in (1, rank - 1):
        raise _error(function, "the channels on axis 1 (NCHW) or -1 (NHWC) of inputs of rank "
                     ">= 2 (the original: 'Unsupported data format')",
                     channels_axis=channels_axis, shape=inputs.shape.as_list())
    if any(d is None for d in inputs.shape[1:]):
        raise _error(function, "the non-batch dimensions of the inputs to be known",
                     shape=inputs.shape.as_list())
    return axis


def _option(options, key):
    return options.get(key) if isinstance(options, dict) else options


def _parameter(name, shape, dtype, enabled, fill, initializers, collections, trainable):
    """The variable `name` (`beta` or `gamma`) of the current variable scope, or a constant."""
    if not enabled:
        return tf.constant(fill, dtype, shape)
    initializer = (initializers or {}).get(name)
    if initializer is None:
        initializer = tf.compat.v1.constant_initializer(fill)
    return tf.compat.v1.get_variable(name, shape=shape, dtype=dtype, initializer=initializer,
                                     collections=_option(collections, name),
                                     trainable=trainable)


def _group_norm(inputs, groups, channels_axis, center, scale, epsilon, param_initializers,
                reuse, variables_collections, trainable, scope, kind, strided):
    function = {"GroupNorm": "group_norm", "LayerNorm": "layer_norm",
                "InstanceNorm": "instance_norm"}[kind]
    inputs = tf.convert_to_tensor(inputs)
    axis = _channel_axis(inputs, channels_axis, function)
    channels = inputs.shape[axis]
    groups = channels if groups is None else groups
    if isinstance(groups, bool) or not isinstance(groups, int) or not 1 <= groups <= channels:
        raise _error(function, f"groups in [1, {channels}] for {channels} channels",
                     groups=groups)
    if channels % groups:
        raise _error(function, f"groups to divide the {channels} channels (the original: "
                     f"'{channels} channels is not commensurate with {groups} groups.')",
                     groups=groups)
    if epsilon < MIN_EPSILON:
        warnings.warn(f"The epsilon value of {function} is too low, which can lead to NaN "
                      f"values or floating point exceptions: use at least {MIN_EPSILON}. "
                      f"Received: epsilon={epsilon}", stacklevel=3)
    if param_initializers is not None and not isinstance(param_initializers, dict):
        raise _error(function, "a dict of initializers keyed 'beta' and 'gamma', or None",
                     param_initializers=param_initializers)
    dtype = inputs.dtype.base_dtype
    with tf.compat.v1.variable_scope(scope, kind, [inputs], reuse=reuse):
        args = (param_initializers, variables_collections, trainable)
        beta = _parameter("beta", [channels], dtype, center, 0.0, *args)
        gamma = _parameter("gamma", [channels], dtype, scale, 1.0, *args)
        rank = inputs.shape.rank
        last = axis == rank - 1
        x = inputs if last else tf.transpose(inputs, [0] + list(range(2, rank)) + [1])
        out = normalise(x, tf.cast(gamma, dtype), tf.cast(beta, dtype), groups, epsilon,
                        strided)
        return out if last else tf.transpose(out, [0, rank - 1] + list(range(1, rank - 1)))


def group_norm(inputs, groups=2, channels_axis=-1, center=True, scale=True, epsilon=1.53e-5,
               param_initializers=None, reuse=None, variables_collections=None, training=True,
               trainable=True, scope=None, strided_channel_grouping=True):
    """Group normalisation (Wu and He, 2018) of `inputs`, with its own beta and gamma.

    Args:
        inputs: A tensor of rank >= 2: the batch, then the channels first (NCHW) or last
            (NHWC); every non-batch dimension known.
        groups: The number of channel groups; it must divide the channels.
        channels_axis: 1 or -1 (the last axis).
        center: Add the variable `beta` (zeros); else no offset.
        scale: Multiply by the variable `gamma` (ones); else no scale.
        epsilon: Added to the variance.
        param_initializers: Optional dict of initializers keyed 'beta' and 'gamma'.
        reuse: Reuse the scope's variables (TensorFlow 1 `variable_scope`).
        variables_collections: Collections for the variables: a list, or a dict keyed
            'beta' and 'gamma'.
        training: Accepted; both phases normalise with the inputs' own statistics.
        trainable: Whether the variables are trainable.
        scope: The variable scope (default `GroupNorm`).
        strided_channel_grouping: Channel c is in group `c % groups` (the IPU's layout);
            False: contiguous groups of channels.

    Returns:
        The normalised tensor, of the inputs' shape and dtype.
    """
    del training
    return _group_norm(inputs, groups, channels_axis, center, scale, epsilon,
                       param_initializers, reuse, variables_collections, trainable, scope,
                       "GroupNorm", strided_channel_grouping)


def layer_norm(inputs, channels_axis=-1, center=True, scale=True, epsilon=1.53e-5,
               param_initializers=None, reuse=None, variables_collections=None, training=True,
               trainable=True, scope=None):
    """Layer normalisation: `group_norm` with one group (all non-batch axes together).

    The arguments are `group_norm`'s; the variable scope defaults to `LayerNorm`.
    """
    del training
    return _group_norm(inputs, 1, channels_axis, center, scale, epsilon, param_initializers,
                       reuse, variables_collections, trainable, scope, "LayerNorm", False)


def instance_norm(inputs, channels_axis=-1, center=True, scale=True, epsilon=1.53e-5,
                  param_initializers=None, reuse=None, variables_collections=None,
                  training=True, trainable=True, scope=None):
    """Instance normalisation: `group_norm` with one group per channel.

    The arguments are `group_norm`'s; the variable scope defaults to `InstanceNorm`.
    """
    del training
    return _group_norm(inputs, None, channels_axis, center, scale, epsilon,
                       param_initializers, reuse, variables_collections, trainable, scope,
                       "InstanceNorm", False)
