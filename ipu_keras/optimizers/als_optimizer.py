"""Automatic loss scaling: `ALSOptimizer` and its Adam, SGD and RMSProp forms.

The loss is multiplied by the loss scaling factor (LSF) before the gradients are taken
(Keras 3 asks the optimizer: `scale_loss`); `apply` divides the gradients by it again
and hands them to the wrapped optimizer. Statistics decide the factor: the scaled
float16 gradients (only those: other dtypes cannot overflow float16) feed a histogram of
two bins, |g| below `histogram_bin_edge` and at or above it (non-finite values count as
above). The rule, as Graphcore's Keras (`keras.ipu.optimizers`, SDK 3.x) has it:

* a counter n counts the steps since the last update; an update is due when
  `update_frequency` is 1 or n > 0 and n % update_frequency == 0;
* the histogram collects every step (`accumulate_statistics_over_update_period=True`) or
  only on the steps an update is due; each float16 gradient adds (1 - lpf_alpha) times its
  counts (the original's low-pass filter applied per gradient);
* on an update, the ratio above / total (NaN with no float16 gradients) greater than
  `ratio_threshold` divides the LSF by `increase_factor`, otherwise multiplies it; the new
  value is kept only if finite, below `max_loss_scaling_factor` and at least 1; the
  histogram is cleared and n restarts at 0;
* the weights are updated on every step, with the gradients divided by the LSF the loss
  was scaled with (the original does not skip steps whose gradients overflowed).

The state (histogram, counter, factor, previous factor) is optimizer variables, so it
persists across executions on the device and is saved with the optimizer. The wrapper
subclasses Keras' `LossScaleOptimizer`, so a `mixed_float16` model compiled with it is not
wrapped a second time. The specialised forms scale the moments in the original; here
they wrap the Keras optimizer, which gives the same updates up to rounding.
"""
import math

import keras
import tensorflow as tf

from ipu_keras.errors import AddonsArgumentError
from ipu_keras._src.keras.gradient_accumulation import GradientAccumulationReductionMethod
from ipu_keras._src.keras.gradient_accumulation_optimizer import GradientAccumulationOptimizer


def _power_of_two(value):
    return value > 0 and math.log2(value).is_integer()


def _check(initial, frequency, increase, maximum, threshold):
    if frequency <= 0:
        raise AddonsArgumentError("update_frequency must be nonzero and positive. "
                                  f"Received: update_frequency={frequency!r}")
    for name, value in (("increase_factor", increase),
                        ("initial_loss_scaling_factor", initial),
                        ("max_loss_scaling_factor", maximum)):
        if not _power_of_two(value):
            raise AddonsArgumentError(f"{name} must be a power of two. Received: "
                                      f"{name}={value!r}")
    if initial >= maximum:
        raise AddonsArgumentError(
            "initial_loss_scaling_factor must be less than max_loss_scaling_factor. "
            f"Received: initial_loss_scaling_factor={initial!r}, "
            f"max_loss_scaling_factor={maximum!r}")
    if initial * increase >= maximum:
        raise AddonsArgumentError("initial_loss_scaling_factor x increase_factor must be "
                                  "less than max_loss_scaling_factor")
    if not 0.0 < threshold < 1.0:
        raise AddonsArgumentError(
            "ratio_threshold must be greater than zero and less than one")


ALS_ARGUMENTS = ("initial_loss_scaling_factor", "update_frequency", "increase_factor",
                 "max_loss_scaling_factor", "accumulate_statistics_over_update_period",
                 "ratio_threshold", "captured_grads_only", "lpf_alpha", "histogram_bin_edge")


@keras.saving.register_keras_serializable(package="ipu_keras")
class ALSOptimizer(keras.optimizers.LossScaleOptimizer):
    """An optimizer that scales the loss by a factor it adapts from gradient statistics.

    Args:
        opt: The Keras optimizer to wrap.
        initial_loss_scaling_factor: The first LSF, a power of two.
        update_frequency: Steps between two updates of the LSF.
        increase_factor: The factor (a power of two) the LSF grows or shrinks by.
        max_loss_scaling_factor: A power of two the LSF stays below.
        accumulate_statistics_over_update_period: Collect the histogram on every step
            (True) or only on the steps that update the LSF.
        ratio_threshold: The fraction of float16 gradients at or above the bin edge
            above which the LSF shrinks; in (0, 1).
        captured_grads_only: Collect statistics only from gradients passed as
            `captured_grads` (the original's capture layers); the model's own
            gradients are then not counted.
        lpf_alpha: The low-pass filter coefficient of the histogram.
        histogram_bin_edge: The magnitude from which a scaled gradient counts as
            overflowing.
        name: The optimizer's name.
    """

    def __init__(self, opt, initial_loss_scaling_factor=1, update_frequency=8,
                 increase_factor=2, max_loss_scaling_factor=32768,
                 accumulate_statistics_over_update_period=True, ratio_threshold=10e-6,
                 captured_grads_only=False, lpf_alpha=0.0, histogram_bin_edge=2**13,
                 name="ALSOptimizer", **kwargs):
        _check(initial_loss_scaling_factor, update_frequency, increase_factor,
               max_loss_scaling_factor, ratio_threshold)
        super().__init__(opt, initial_scale=float(initial_loss_scaling_factor),
                         name=name, **kwargs)
        self.initial_loss_scaling_factor = initial_loss_scaling_factor
        self.update_frequency = int(update_frequency)
        self.increase_factor = increase_factor
        self.max_loss_scaling_factor = max_loss_scaling_factor
        self.accumulate_statistics_over_update_period = bool(
            accumulate_statistics_over_update_period)
        self.ratio_threshold = float(ratio_threshold)
        self.captured_grads_only = bool(captured_grads_only)
        self.lpf_alpha = float(lpf_alpha)
        self.histogram_bin_edge = float(histogram_bin_edge)

    @property
    def decrease_factor(self):
        return 1.0 / self.increase_factor

    def build(self, var_list):
        """Creates the ALS state next to the wrapped optimizer's variables."""
        if self.built:
            return
        def state(name, shape=(), dtype="float32", initializer="zeros"):
            return self.add_variable(shape=shape, initializer=initializer, dtype=dtype,
                                     aggregation="none", name=name)

        initial = keras.initializers.Constant(self.initial_scale)
        self._als = {"histogram": state("gradient_histogram", (2,)),
                     "counter": state("lsf_update_counter", dtype="int32"),
                     "lsf": state("loss_scaling_factor", initializer=initial),
                     "prev_lsf": state("prev_loss_scaling_factor", initializer=initial)}
        # Keras' LossScaleOptimizer names its factor `dynamic_scale`: keep that name
        # for what reads it, and its step counter for the base class's bookkeeping.
        self.dynamic_scale = self._als["lsf"]
        self.step_counter = self._als["counter"]
        self.inner_optimizer.build(var_list)
        keras.optimizers.Optimizer.build(self, var_list)

    # -- the state, as the original names it --------------------------------------------
    @property
    def histogram(self):
        return tf.convert_to_tensor(self._state("histogram"))

    @property
    def normalized_histogram(self):
        histogram = self.histogram
        return histogram / tf.reduce_sum(histogram)

    @property
    def loss_scaling_factor(self):
        return tf.convert_to_tensor(self._state("lsf"))

    @property
    def previous_loss_scaling_factor(self):
        return tf.convert_to_tensor(self._state("prev_lsf"))

    @property
    def update_counter(self):
        return tf.convert_to_tensor(self._state("counter"))

    def _state(self, key):
        if not self.built:
            raise AddonsArgumentError(
                f"{self.name} has no loss scaling state before it is built: apply "
                "gradients once (or call build(variables)) first.")
        return self._als[key]

    # -- the rule -------------------------------------------------------------------------
    def scale_loss(self, loss):
        scale = self._als["lsf"] if self.built else self.initial_scale
        return loss * tf.cast(scale, loss.dtype)

    def get_scaled_loss(self, loss):
        """The original's name for `scale_loss`: `loss` times the current LSF."""
        return self.scale_loss(loss)

    def minimize(self, loss, var_list, grad_loss=None, name=None, tape=None):
        """The original's custom-loop step: scales `loss`, takes its gradients with
        respect to `var_list` and applies them (statistics, LSF update, unscaling).

        Args:
            loss: A scalar tensor computed under `tape`, or a callable returning one.
            var_list: The variables to update.
            grad_loss: Optional gradient of the loss (as `tape.gradient`'s).
            name: Accepted for the original's signature.
            tape: The `tf.GradientTape` that recorded `loss`; a new one when `loss` is
                callable.
        """
        del name
        if tape is None and not callable(loss):
            raise AddonsArgumentError(
                f"{self.name}.minimize expected a callable loss or the tape that recorded "
                "it. Received: a loss tensor and tape=None.")
        tape = tape if tape is not None else tf.GradientTape()
        with tape:   # re-entered: the scaling is recorded with the loss
            if callable(loss):
                tape.watch(var_list)
                loss = loss()
            scaled = self.scale_loss(loss)
        grads = tape.gradient(scaled, var_list, output_gradients=grad_loss)
        return self.apply_gradients(zip(grads, var_list))

    def histogram_counts(self, grads):
        """(below, at or above the bin edge) of the float16 gradients among `grads`."""
        counts = tf.zeros([2], tf.float32)
        for g in grads:
            if g is None or g.dtype != tf.float16:
                continue
            magnitude = tf.abs(tf.reshape(tf.cast(g, tf.float32), [-1]))
            below = tf.reduce_sum(tf.cast(magnitude < self.histogram_bin_edge, tf.float32))
            total = tf.cast(tf.size(magnitude), tf.float32)
            counts += tf.stack([below, total - below])
        return counts * (1.0 - self.lpf_alpha)

    def _update_due(self):
        n = self._als["counter"]
        if self.update_frequency == 1:
            return tf.constant(True)
        return tf.logical_and(n > 0, tf.math.floormod(n, self.update_frequency) == 0)

    def _new_factor(self, histogram):
        lsf = self._als["lsf"]
        ratio = histogram[1] / tf.reduce_sum(histogram)
        new = tf.where(ratio > self.ratio_threshold, lsf / self.increase_factor,
                       lsf * self.increase_factor)
        keep = (tf.math.is_finite(new) & (new < self.max_loss_scaling_factor)
                & (new >= 1.0))
        return tf.where(keep, new, lsf)

    def update_state(self, grads, captured_grads=None):
        """Adds `grads` (and `captured_grads`) to the histogram and updates the LSF."""
        s = self._als
        due = self._update_due()
        collect = tf.logical_or(tf.constant(self.accumulate_statistics_over_update_period),
                                due)
        counts = self.histogram_counts(
            ([] if self.captured_grads_only else list(grads))
            + tf.nest.flatten(captured_grads or {}))
        histogram = s["histogram"] + tf.where(collect, counts, tf.zeros_like(counts))
        lsf = tf.where(due, self._new_factor(histogram), s["lsf"])
        s["prev_lsf"].assign(tf.where(tf.equal(lsf, s["lsf"]), s["prev_lsf"], s["lsf"]))
        s["lsf"].assign(lsf)
        s["histogram"].assign(tf.where(due, tf.zeros_like(histogram), histogram))
        s["counter"].assign(tf.where(due, 0, s["counter"] + 1))

    def apply(self, grads, trainable_variables=None, captured_grads=None):
        if not self.built:
            with tf.name_scope(self.name):
                self.build(trainable_variables)
            self.built = True
        grads = list(grads)
        scale = tf.identity(self._als["lsf"])   # the factor the loss was scaled with
        unscaled = [None if g is None else g / tf.cast(scale, g.dtype) for g in grads]
        self.update_state(grads, captured_grads)
        self.inner_optimizer.apply(unscaled, trainable_variables=trainable_variables)

    def apply_gradients(self, grads_and_vars, captured_grads=None):
        grads, variables = zip(*grads_and_vars)
        return self.apply(grads, list(variables), captured_grads)

    def stateless_apply(self, optimizer_variables, grads, trainable_variables):
        raise NotImplementedError(f"{type(self).__name__} runs on the TensorFlow backend "
                                  "only (stateful apply).")

    def reset(self):
        """Clears the statistics and restores the initial LSF."""
        s = self._als
        s["histogram"].assign(tf.zeros([2]))
        s["counter"].assign(0)
        s["lsf"].assign(float(self.initial_loss_scaling_factor))

    def get_config(self):
        config = keras.optimizers.Optimizer.get_config(self)
        del config["learning_rate"]
        config["inner_optimizer"] = keras.saving.serialize_keras_object(self.inner_optimizer)
        config.update({name: getattr(self, name) for name in ALS_ARGUMENTS})
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        inner = keras.saving.deserialize_keras_object(config.pop("inner_optimizer"),
                                                      custom_objects=custom_objects)
        return ALSOptimizer(inner, **config)


def _specialised(name, make_inner, inner_arguments, doc):
    """An `ALSOptimizer` subclass built from the inner optimizer's own arguments."""

    def __init__(self, *args, **kwargs):
        names = list(inner_arguments) + list(ALS_ARGUMENTS) + ["name"]
        if len(args) > len(names):
            raise TypeError(f"{name} takes at most {len(names)} positional arguments")
        given = dict(zip(names, args))
        duplicated = set(given) & set(kwargs)
        if duplicated:
            raise TypeError(f"{name} got multiple values for {sorted(duplicated)}")
        given.update(kwargs)
        inner = make_inner(**{k: given.pop(k, v) for k, v in inner_arguments.items()})
        given.setdefault("name", name)
        ALSOptimizer.__init__(self, inner, **given)
        self._inner_arguments = {k: getattr(inner, k, v) for k, v in inner_arguments.items()}

    def get_config(self):
        config = ALSOptimizer.get_config(self)
        del config["inner_optimizer"]
        config.update({k: _plain(v) for k, v in self._inner_arguments.items()})
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        return cls(**config)

    cls = type(name, (ALSOptimizer,), {"__init__": __init__, "get_config": get_config,
                                       "from_config": from_config, "__doc__": doc,
                                       "__module__": __name__})
    return keras.saving.register_keras_serializable(package="ipu_keras")(cls)


def _plain(value):
    if isinstance(value, (tf.Variable, keras.Variable)):
        return float(value.numpy())
    return value


ALSOptimizerAdam = _specialised(
    "ALSOptimizerAdam", keras.optimizers.Adam,
    {"learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7},
    """`ALSOptimizer` around `keras.optimizers.Adam(learning_rate, beta_1, beta_2,
    epsilon)`; the ALS arguments follow, as `ALSOptimizer`'s.""")
ALSOptimizerSGD = _specialised(
    "ALSOptimizerSGD", keras.optimizers.SGD, {"learning_rate": 0.01, "momentum": 0.0},
    """`ALSOptimizer` around `keras.optimizers.SGD(learning_rate, momentum)`; the ALS
    arguments follow, as `ALSOptimizer`'s.""")
ALSOptimizerRMSProp = _specialised(
    "ALSOptimizerRMSProp", keras.optimizers.RMSprop,
    {"learning_rate": 0.001, "rho": 0.9, "momentum": 0.0, "epsilon": 1e-7,
     "centered": False},
    """`ALSOptimizer` around `keras.optimizers.RMSprop(learning_rate, rho, momentum,
    epsilon, centered)`; the ALS arguments follow, as `ALSOptimizer`'s.""")


class ALSGradientAccumulationOptimizer(GradientAccumulationOptimizer):
    """Gradient accumulation for an `ALSOptimizer`, inside `ipu_keras.loops.repeat`.

    Every micro-batch feeds the ALS statistics and may update the LSF (as the original);
    its unscaled gradients are accumulated, and the ALS optimizer's wrapped optimizer
    applies each window. Does not divide by the number of micro-batches unless the
    reduction method says so. `num_mini_batches=1` returns the ALS optimizer itself.
    """

    def __init__(self, als_optimizer, num_mini_batches, offload_weight_update_variables=None,
                 replicated_optimizer_state_sharding=False, dtype=None,
                 reduction_method=GradientAccumulationReductionMethod.SUM,
                 name="ALSGradientAccumulationOptimizer"):
        if not isinstance(als_optimizer, ALSOptimizer):
            raise AddonsArgumentError("ALSGradientAccumulationOptimizer can only be used "
                                      "with instances of ALSOptimizer.")
        super().__init__(als_optimizer, num_mini_batches, offload_weight_update_variables,
                         replicated_optimizer_state_sharding, dtype, reduction_method, name)

    @property
    def als_optimizer(self):
        return self._opt

    def apply_gradients(self, grads_and_vars, captured_grads=None):
        self._check_loop()
        als = self._opt
        pairs = list(grads_and_vars)
        if not als.built:
            als.build([v for _, v in pairs])
            als.built = True
        scale = tf.identity(als.loss_scaling_factor)
        unscaled = [(None if g is None else g / tf.cast(scale, g.dtype), v) for g, v in pairs]
        als.update_state([g for g, _ in pairs], captured_grads)
        return self._accumulator.accumulate(
            unscaled, als.inner_optimizer.apply_gradients, None, None)


__all__ = ["ALSGradientAccumulationOptimizer", "ALSOptimizer", "ALSOptimizerAdam",
           "ALSOptimizerRMSProp", "ALSOptimizerSGD"]
