"""AdamIpuOptimizer: Adam with epsilon added to the square root of the debiased v.

Unlike Keras Adam (which folds debiasing into the learning rate, so its epsilon meets the
raw v), the update is `var -= lr * m_hat / (sqrt(v_hat) + epsilon)` with `m_hat`, `v_hat`
the debiased moments (or the raw ones when `debiasing=False`); AMSGrad keeps the maximum
of the debiased v.
"""
import tensorflow as tf

from ipu_keras_addons.keras.layers.ipu_layer import serializable
from ipu_keras_addons.keras.optimizers.ipu_optimizer_base import IpuOptimizerBase
from ipu_keras_addons.keras.optimizers.ipu_optimizer_base import dtype_name


@serializable
class AdamIpuOptimizer(IpuOptimizerBase):
    """Adam with per-slot dtypes and a compute precision, as on the IPU.

    Args:
        learning_rate: A float, a schedule or a callable; the learning rate.
        beta_1: Exponential decay rate of the first moment.
        beta_2: Exponential decay rate of the second moment.
        epsilon: Added to the square root of the (debiased) second moment.
        amsgrad: Whether to keep the maximum of the debiased second moment.
        name: The optimizer's name.
        m_dtype: Dtype of the slot m (None: the variable's dtype).
        v_dtype: Dtype of the slot v (None: the variable's dtype).
        vhat_dtype: Dtype of the AMSGrad slot vhat (None: the variable's dtype).
        debiasing: Whether to debias m and v.
        **kwargs: `optimizer_compute_precisions` (one entry), outlining arguments and
            Keras optimizer arguments.
    """

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 amsgrad=False, name="Adam", m_dtype=None, v_dtype=None, vhat_dtype=None,
                 debiasing=True, **kwargs):
        super().__init__(name, learning_rate=learning_rate, **kwargs)
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.amsgrad = amsgrad
        self.m_dtype = dtype_name(m_dtype)
        self.v_dtype = dtype_name(v_dtype)
        self.vhat_dtype = dtype_name(vhat_dtype)
        self.debiasing = debiasing

    def get_slot_dtype(self, var, slot_name):
        return {"m": self.m_dtype, "v": self.v_dtype, "vhat": self.vhat_dtype}[slot_name]

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        names = ("m", "v", "vhat") if self.amsgrad else ("m", "v")
        slots = self._slots(var_list, *names)
        self._m, self._v = slots[0], slots[1]
        self._vhat = slots[2] if self.amsgrad else []

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        m_hat, v_hat = self._adam_moments(gradient, self._m[index], self._v[index])
        lr, = self._compute(learning_rate)
        if self.amsgrad:
            vhat = self._vhat[index]
            v_hat = tf.maximum(self._compute(vhat)[0], v_hat)
            self.assign(vhat, tf.cast(v_hat, vhat.dtype))
        update = lr * (m_hat / (tf.sqrt(v_hat) + self.epsilon))
        self.assign(variable, variable - tf.cast(update, variable.dtype))

    def get_config(self):
        config = super().get_config()
        config.update({
            "beta_1": self.beta_1, "beta_2": self.beta_2, "epsilon": self.epsilon,
            "amsgrad": self.amsgrad, "m_dtype": self.m_dtype, "v_dtype": self.v_dtype,
            "vhat_dtype": self.vhat_dtype, "debiasing": self.debiasing,
        })
        return config
