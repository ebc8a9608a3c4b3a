"""GroupNorm, InstanceNorm and LayerNorm: one group-norm computation, no moving statistics.

Training and inference both normalise with the statistics of the batch at hand (per sample
and per group, biased variance), computed as `ipu.normalization_ops` does. Channel `c`
belongs to group `c % groups` when `strided_channel_grouping` (the default), else to group
`c // (channels // groups)`.
GroupNorm and InstanceNorm default gamma and beta to glorot_uniform, as the original does;
LayerNorm defaults them to ones and zeros and its weights interchange with Keras'.
"""
import functools
import operator

import keras
import tensorflow as tf

from ipu_keras.ops.normalization_ops import normalise as group_norm
from ipu_keras_addons.keras.layers.ipu_layer import IPULayer, argument_error, serializable


@serializable
class GroupNorm(IPULayer):
    """Group normalization without statistics gathering, as on the IPU.

    Args:
        groups: Number of channel groups; it must divide the number of channels.
        channels_axis: The channels axis: 1 (NCHW) or the last axis (NHWC).
        center: If True, add the offset `beta`; else beta is 0.
        scale: If True, multiply by `gamma`; else gamma is 1.
        epsilon: Small float added to the variance to avoid dividing by zero.
        beta_initializer: Initializer for beta (None: glorot_uniform, as in the original).
        gamma_initializer: Initializer for gamma (None: glorot_uniform).
        strided_channel_grouping: If True, channel c is in group `c % groups`; else the
            groups are contiguous ranges of channels.
        trainable: Whether gamma and beta are trainable.
    """

    def __init__(self, groups=2, channels_axis=-1, center=True, scale=True, epsilon=1e-3,
                 beta_initializer=None, gamma_initializer=None,
                 strided_channel_grouping=True, trainable=True, **kwargs):
        super().__init__(trainable=trainable, **kwargs)
        self.groups = groups
        self.channels_axis = channels_axis
        self.center = center
        self.scale = scale
        self.epsilon = epsilon
        self.beta_initializer = keras.initializers.get(beta_initializer or "glorot_uniform")
        self.gamma_initializer = keras.initializers.get(gamma_initializer or "glorot_uniform")
        self.strided_channel_grouping = strided_channel_grouping

    def _build_impl(self, input_shape, parameter_shape=None):
        rank = len(input_shape)
        axis = self.channels_axis % rank if self.channels_axis < 0 else self.channels_axis
        if axis not in (1, rank - 1):
            raise argument_error(type(self).__name__, "channels_axis 1 (NCHW) or -1 (NHWC)",
                                 channels_axis=self.channels_axis)
        self._channels_first = axis == 1 and rank > 2
        self.channels = input_shape[axis]
        if self.channels is None or not 1 <= self.groups <= self.channels:
            raise argument_error(type(self).__name__, f"groups in [1, {self.channels}] for "
                                 f"{self.channels} channels", groups=self.groups)
        if self.channels % self.groups:
            raise argument_error(type(self).__name__, f"groups to divide the {self.channels} "
                                 "channels", groups=self.groups)
        shape = parameter_shape or [self.channels]
        self.gamma = self.beta = None
        if self.scale:
            self.gamma = self.add_weight(name="gamma", shape=shape,
                                         initializer=self.gamma_initializer)
        if self.center:
            self.beta = self.add_weight(name="beta", shape=shape,
                                        initializer=self.beta_initializer)

    def build(self, input_shape):
        self._build_impl(input_shape)

    def _parameters(self, dtype):
        gamma = (tf.reshape(tf.cast(self.gamma, dtype), [-1]) if self.scale
                 else tf.ones([self.channels], dtype))
        beta = (tf.reshape(tf.cast(self.beta, dtype), [-1]) if self.center
                else tf.zeros([self.channels], dtype))
        return gamma, beta

    def call(self, inputs, training=None):
        del training  # Both phases normalise with the batch's own statistics.
        gamma, beta = self._parameters(inputs.dtype)
        rank = len(inputs.shape)
        x = tf.transpose(inputs, [0] + list(range(2, rank)) + [1]) if self._channels_first \
            else inputs
        out = group_norm(x, gamma, beta, self.groups, self.epsilon,
                         self.strided_channel_grouping)
        if self._channels_first:
            out = tf.transpose(out, [0, rank - 1] + list(range(1, rank - 1)))
        return out

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "groups": self.groups, "channels_axis": self.channels_axis,
            "center": self.center, "scale": self.scale, "epsilon": self.epsilon,
            "beta_initializer": keras.initializers.serialize(self.beta_initializer),
            "gamma_initializer": keras.initializers.serialize(self.gamma_initializer),
            "strided_channel_grouping": self.strided_channel_grouping,
        })
        return config


@serializable
class InstanceNorm(GroupNorm):
    """Instance normalization: GroupNorm with one group per channel.

    Args:
        channels_axis: The channels axis: 1 (NCHW) or the last axis (NHWC).
        center: If True, add the offset `beta`.
        scale: If True, multiply by `gamma`.
        epsilon: Small float added to the variance to avoid dividing by zero.
        beta_initializer: Initializer for beta (None: glorot_uniform).
        gamma_initializer: Initializer for gamma (None: glorot_uniform).
        trainable: Whether gamma and beta are trainable.
    """

    def __init__(self, channels_axis=-1, center=True, scale=True, epsilon=1e-3,
                 beta_initializer=None, gamma_initializer=None, trainable=True, **kwargs):
        super().__init__(groups=0, channels_axis=channels_axis, center=center, scale=scale,
                         epsilon=epsilon, beta_initializer=beta_initializer,
                         gamma_initializer=gamma_initializer, trainable=trainable, **kwargs)

    def build(self, input_shape):
        self.groups = input_shape[self.channels_axis]
        super().build(input_shape)

    def get_config(self):
        config = super().get_config()
        del config["groups"], config["strided_channel_grouping"]
        return config


@serializable
class LayerNorm(GroupNorm):
    """Layer normalization without statistics gathering; weights interchange with Keras'.

    Args:
        axis: Integer or list of integers, the axes to normalise over.
        epsilon: Small float added to the variance to avoid dividing by zero.
        center: If True, add the offset `beta`.
        scale: If True, multiply by `gamma`.
        beta_initializer: Initializer for beta.
        gamma_initializer: Initializer for gamma.
        beta_regularizer: Not supported (kept for API consistency); must be None.
        gamma_regularizer: Not supported; must be None.
        beta_constraint: Not supported; must be None.
        gamma_constraint: Not supported; must be None.
        trainable: Whether gamma and beta are trainable.
    """

    def __init__(self, axis=-1, epsilon=1e-3, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones", beta_regularizer=None,
                 gamma_regularizer=None, beta_constraint=None, gamma_constraint=None,
                 trainable=True, **kwargs):
        if isinstance(axis, (list, tuple)):
            axis = list(axis)
        elif not isinstance(axis, int):
            raise argument_error("LayerNorm", "an int or a list/tuple of ints for axis",
                                 axis=axis)
        super().__init__(groups=1, channels_axis=-1, center=center, scale=scale,
                         epsilon=epsilon, beta_initializer=beta_initializer,
                         gamma_initializer=gamma_initializer, trainable=trainable, **kwargs)
        self.axis = axis
        self._check_unsupported(beta_regularizer, "beta_regularizer")
        self._check_unsupported(gamma_regularizer, "gamma_regularizer")
        self._check_unsupported(beta_constraint, "beta_constraint")
        self._check_unsupported(gamma_constraint, "gamma_constraint")

    def build(self, input_shape):
        rank = len(input_shape)
        axes = [self.axis] if isinstance(self.axis, int) else list(self.axis)
        if any(not -rank <= a < rank for a in axes):
            raise argument_error("LayerNorm", f"axes in [{-rank}, {rank})", axis=self.axis)
        axes = [a % rank for a in axes]
        if len(set(axes)) != len(axes):
            raise argument_error("LayerNorm", "no duplicate axes", axis=self.axis)
        if any(input_shape[a] is None for a in axes):
            raise argument_error("LayerNorm", "the normalised dimensions to be known",
                                 input_shape=input_shape)
        parameter_shape = [input_shape[a] for a in axes]
        self._reduced = sorted(axes)
        self._kept = [d for d in range(rank) if d not in axes]
        self._permutation = self._kept + self._reduced
        size = functools.reduce(operator.mul, parameter_shape, 1)
        self._build_impl([None, size], parameter_shape)

    def call(self, inputs, training=None):
        del training
        gamma, beta = self._parameters(inputs.dtype)
        moved = tf.transpose(inputs, self._permutation)
        flat = tf.reshape(moved, [-1, self.channels])
        out = tf.reshape(group_norm(flat, gamma, beta, 1, self.epsilon, True),
                         tf.shape(moved))
        inverse = [self._permutation.index(d) for d in range(len(self._permutation))]
        return tf.transpose(out, inverse)

    def get_config(self):
        config = super().get_config()
        for key in ("groups", "channels_axis", "strided_channel_grouping"):
            del config[key]
        config["axis"] = self.axis
        return config


GroupNormalization = GroupNorm
InstanceNormalization = InstanceNorm
LayerNormalization = LayerNorm
