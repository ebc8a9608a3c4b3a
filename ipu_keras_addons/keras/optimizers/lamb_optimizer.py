"""LAMBIpuOptimizer: Adam's moments with a trust ratio per whole variable.

u = m_hat / (sqrt(v_hat) + epsilon) (+ weight_decay_rate * var unless excluded);
r = ||var|| / ||u|| (||var|| clipped to `weight_norm_clip`), or 1 when either norm is 0 or
the variable is excluded from layer adaptation; var -= lr * r * u. The two exclusion lists
are independent (no fall-back of one on the other). Stage 0 of
`optimizer_compute_precisions` computes the moments, stage 1 the product lr * r * u.
"""
import re

import tensorflow as tf

from ipu_keras_addons.keras.layers.ipu_layer import serializable
from ipu_keras_addons.keras.optimizers.ipu_optimizer_base import IpuOptimizerBase
from ipu_keras_addons.keras.optimizers.ipu_optimizer_base import check_precisions
from ipu_keras_addons.keras.optimizers.ipu_optimizer_base import dtype_name


def variable_name(variable):
    """The name the exclusion patterns see: the variable's path, without a `:N` suffix."""
    name = getattr(variable, "path", None) or variable.name
    return re.sub(r":\d+$", "", name)


def _matches(patterns, name):
    return any(re.search(p, name) is not None for p in patterns or ())


@serializable
class LAMBIpuOptimizer(IpuOptimizerBase):
    """LAMB (layer-wise adaptive moments) with slot dtypes and two compute precisions.

    Args:
        learning_rate: A float, a schedule or a callable; the learning rate.
        beta_1: Exponential decay rate of the first moment.
        beta_2: Exponential decay rate of the second moment.
        epsilon: Added to the square root of the (debiased) second moment.
        weight_decay_rate: Weight decay rate added to the update.
        exclude_from_weight_decay: Regex patterns; variables whose name matches one get no
            weight decay.
        exclude_from_layer_adaptation: Regex patterns; variables whose name matches one get
            a trust ratio of 1. Independent of `exclude_from_weight_decay`.
        name: The optimizer's name.
        debiasing: Whether to debias m and v.
        m_dtype: Dtype of the slot m (None: the variable's dtype).
        v_dtype: Dtype of the slot v (None: the variable's dtype).
        weight_norm_clip: If set, the weight norm is clipped to this value.
        optimizer_compute_precisions: Two dtypes: the moments' and the final product's.
        **kwargs: Outlining arguments and Keras optimizer arguments.
    """

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                 weight_decay_rate=0.0, exclude_from_weight_decay=None,
                 exclude_from_layer_adaptation=None, name="LAMB", debiasing=True,
                 m_dtype=None, v_dtype=None, weight_norm_clip=None,
                 optimizer_compute_precisions=(tf.float32, tf.float32), **kwargs):
        check_precisions(optimizer_compute_precisions, 2, "LAMBIpuOptimizer")
        super().__init__(name, optimizer_compute_precisions=optimizer_compute_precisions,
                         learning_rate=learning_rate, **kwargs)
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.weight_decay_rate = weight_decay_rate
        self.exclude_from_weight_decay = exclude_from_weight_decay
        self.exclude_from_layer_adaptation = exclude_from_layer_adaptation
        self.debiasing = debiasing
        self.m_dtype = dtype_name(m_dtype)
        self.v_dtype = dtype_name(v_dtype)
        self.weight_norm_clip = weight_norm_clip

    def get_slot_dtype(self, var, slot_name):
        return {"m": self.m_dtype, "v": self.v_dtype}[slot_name]

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._m, self._v = self._slots(var_list, "m", "v")

    def _trust_ratio(self, weights, update):
        """||weights|| / ||update|| per whole tensor, 1 when either norm is zero."""
        w_norm = tf.norm(tf.reshape(weights, [-1]), ord=2)
        u_norm = tf.norm(tf.reshape(update, [-1]), ord=2)
        if self.weight_norm_clip is not None:
            w_norm = tf.minimum(w_norm, tf.cast(self.weight_norm_clip, w_norm.dtype))
        one = tf.ones_like(w_norm)
        safe = tf.where(u_norm > 0, u_norm, one)
        return tf.where(tf.logical_and(w_norm > 0, u_norm > 0), w_norm / safe, one)

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        name = variable_name(variable)
        m_hat, v_hat = self._adam_moments(gradient, self._m[index], self._v[index])
        weights, lr = self._compute(variable, learning_rate)
        update = m_hat / (tf.sqrt(v_hat) + self.epsilon)
        if not _matches(self.exclude_from_weight_decay, name):
            update = update + weights * tf.cast(self.weight_decay_rate, update.dtype)
        ratio = lr
        if not _matches(self.exclude_from_layer_adaptation, name):
            ratio = lr * self._trust_ratio(weights, update)
        ratio, update = self._compute(ratio, update, stage=1)
        self.assign(variable, variable - tf.cast(ratio * update, variable.dtype))

    def get_config(self):
        config = super().get_config()
        config.update({
            "beta_1": self.beta_1, "beta_2": self.beta_2, "epsilon": self.epsilon,
            "weight_decay_rate": self.weight_decay_rate,
            "exclude_from_weight_decay": self.exclude_from_weight_decay,
            "exclude_from_layer_adaptation": self.exclude_from_layer_adaptation,
            "debiasing": self.debiasing, "m_dtype": self.m_dtype, "v_dtype": self.v_dtype,
            "weight_norm_clip": self.weight_norm_clip,
        })
        return config
