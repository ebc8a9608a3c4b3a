"""SGDIpuOptimizer: Keras' SGD (same numbers) with a dtype for the momentum slot.

momentum == 0: var -= lr * g. Otherwise velocity = momentum * velocity - lr * g and
var += velocity (Nesterov: var += momentum * velocity - lr * g), computed in
`optimizer_compute_precisions[0]` and stored in `momentum_accum_dtype`.
"""
import tensorflow as tf

from ipu_keras.errors import AddonsArgumentError
from ipu_keras_addons.keras.layers.ipu_layer import serializable
from ipu_keras_addons.keras.optimizers.ipu_optimizer_base import IpuOptimizerBase
from ipu_keras_addons.keras.optimizers.ipu_optimizer_base import dtype_name


@serializable
class SGDIpuOptimizer(IpuOptimizerBase):
    """Gradient descent with optional (Nesterov) momentum, as on the IPU.

    Args:
        learning_rate: A float, a schedule or a callable; the learning rate.
        momentum: Float >= 0, accelerates descent and dampens oscillations.
        nesterov: Whether to apply Nesterov momentum.
        name: The optimizer's name.
        momentum_accum_dtype: Dtype of the slot `momentum` (None: the variable's dtype).
        **kwargs: `optimizer_compute_precisions` (one entry), outlining arguments and
            Keras optimizer arguments.
    """

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, name="SGD",
                 momentum_accum_dtype=None, **kwargs):
        if not isinstance(momentum, (int, float)) or momentum < 0:
            raise AddonsArgumentError(
                "SGDIpuOptimizer expected momentum to be a float >= 0. "
                f"Received: momentum={momentum!r}")
        super().__init__(name, learning_rate=learning_rate, **kwargs)
        self.momentum = momentum
        self.nesterov = nesterov
        self.momentum_accum_dtype = dtype_name(momentum_accum_dtype)

    def get_slot_dtype(self, var, slot_name):
        del var, slot_name
        return self.momentum_accum_dtype

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._momenta = self._slots(var_list, "momentum")[0] if self.momentum else []

    def update_step(self, gradient, variable, learning_rate):
        gradient = self._dense(gradient)
        if not self.momentum:
            lr = tf.cast(learning_rate, variable.dtype)
            self.assign(variable, variable - lr * tf.cast(gradient, variable.dtype))
            return
        accum = self._momenta[self._get_variable_index(variable)]
        grad, old, lr = self._compute(gradient, accum, learning_rate)
        velocity = old * self.momentum - lr * grad
        step = velocity * self.momentum - lr * grad if self.nesterov else velocity
        self.assign(variable, variable + tf.cast(step, variable.dtype))
        self.assign(accum, tf.cast(velocity, accum.dtype))

    def get_config(self):
        config = super().get_config()
        config.update({"momentum": self.momentum, "nesterov": self.nesterov,
                       "momentum_accum_dtype": self.momentum_accum_dtype})
        return config
