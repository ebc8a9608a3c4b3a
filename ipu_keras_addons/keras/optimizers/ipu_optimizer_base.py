"""IpuOptimizerBase: slot dtypes and compute precisions shared by the addons optimizers.

Each slot (optimizer state tensor) has its own dtype: the explicit `*_dtype` argument, else
`get_slot_dtype`, else the variable's dtype; a float16 slot is a float16 variable, so it is
stored and counted as float16 on the device. Updates cast state and gradient to
`optimizer_compute_precisions[0]`, compute, and cast the new state back to its slot dtype.
"""
import keras
import tensorflow as tf

from ipu_keras.errors import AddonsArgumentError


def dtype_name(dtype):
    """'float16' for tf.float16, np.float16 or 'float16'; None stays None."""
    return None if dtype is None else tf.as_dtype(dtype).name


class IpuOptimizerBase(keras.optimizers.Optimizer):
    """Base of the IPU optimizers: per-slot dtypes and stage compute precisions.

    Args:
        name: The optimizer's name.
        optimizer_compute_precisions: Tuple of dtypes, the precision of each stage of the
            update (one stage for Adam and SGD, two for LAMB).
        outline_apply_gradients: On the IPU, outlines the update to reuse code; the
            simulator accepts it and computes the same numbers.
        outline_apply_gradients_kwargs: Options of the outlined function (accepted, unused).
        **kwargs: Keras optimizer arguments (`learning_rate`, `clipnorm`, `clipvalue`, ...);
            `lr` is accepted as the old name of `learning_rate`.
    """

    def __init__(self, name, optimizer_compute_precisions=(tf.float32,),
                 outline_apply_gradients=False, outline_apply_gradients_kwargs=None, **kwargs):
        if "lr" in kwargs:
            kwargs["learning_rate"] = kwargs.pop("lr")
        super().__init__(name=name, **kwargs)
        self.opt_dtypes = tuple(dtype_name(d) for d in optimizer_compute_precisions)
        self.outline_apply_gradients = outline_apply_gradients
        self.outline_apply_gradients_kwargs = outline_apply_gradients_kwargs or {}

    @property
    def optimizer_compute_precisions(self):
        return self.opt_dtypes

    def get_slot_dtype(self, var, slot_name):  # pylint: disable=unused-argument
        """The dtype of slot `slot_name` of `var` when no explicit dtype is given."""
        return var.dtype

    def add_slot(self, var, slot_name, dtype=None):
        """A zero-initialised slot variable for `var` named `slot_name`.

        Its name is the variable's with `/` and `:` made `_`, as Keras' own optimizers do:
        a `tf.compat.v1` variable in a variable scope is named `dense/kernel:0`, and a Keras
        variable's name may not contain `/`."""
        dtype = dtype_name(dtype or self.get_slot_dtype(var, slot_name) or var.dtype)
        base = str(var.name).replace("/", "_").replace(":", "_")
        return self.add_variable(shape=var.shape, initializer="zeros", dtype=dtype,
                                 name=f"{base}_{slot_name}")

    def _slots(self, var_list, *names):
        """Builds one list of slots per name, indexed like `var_list`."""
        return [[self.add_slot(v, n, self.get_slot_dtype(v, n)) for v in var_list]
                for n in names]

    def _compute(self, *tensors, stage=0):
        """`tensors` cast to the precision of compute stage `stage`."""
        dtype = self.opt_dtypes[stage]
        return [tf.cast(t, dtype) for t in tensors]

    def _step(self, stage=0):
        """The step number t = iterations + 1 in the precision of `stage`."""
        return tf.cast(self.iterations + 1, self.opt_dtypes[stage])

    def _adam_moments(self, gradient, m, v):
        """Adam's moment update (Adam and LAMB): stores the new m, v rounded to their slot
        dtypes and returns the debiased (or, without `debiasing`, raw) unrounded values
        in the stage-0 precision. Uses `beta_1`, `beta_2` and `debiasing` of `self`."""
        grad, old_m, old_v = self._compute(self._dense(gradient), m, v)
        next_m = old_m * self.beta_1 + grad * (1.0 - self.beta_1)
        next_v = old_v * self.beta_2 + tf.square(grad) * (1.0 - self.beta_2)
        self.assign(m, tf.cast(next_m, m.dtype))
        self.assign(v, tf.cast(next_v, v.dtype))
        if not self.debiasing:
            return next_m, next_v
        step = self._step()
        return (next_m / (1.0 - tf.pow(tf.cast(self.beta_1, step.dtype), step)),
                next_v / (1.0 - tf.pow(tf.cast(self.beta_2, step.dtype), step)))

    @staticmethod
    def _dense(gradient):
        """Sparse gradients (embedding lookups) are applied densely; same numbers."""
        if isinstance(gradient, tf.IndexedSlices):
            return tf.convert_to_tensor(gradient)
        return gradient

    def get_config(self):
        config = super().get_config()
        config.update({
            "optimizer_compute_precisions": list(self.opt_dtypes),
            "outline_apply_gradients": self.outline_apply_gradients,
            "outline_apply_gradients_kwargs": self.outline_apply_gradients_kwargs,
        })
        return config


def check_precisions(precisions, count, optimizer):
    """Refuses an `optimizer_compute_precisions` tuple without `count` entries."""
    if len(precisions) != count:
        raise AddonsArgumentError(
            f"{optimizer} expected optimizer_compute_precisions with {count} entries (the "
            f"precision of each stage of the update). Received: "
            f"optimizer_compute_precisions={precisions!r}")
