"""`GradientAccumulationOptimizerV2` and `GradientAccumulationOptimizer`.

Both wrap an optimizer so that, inside a `loops.repeat` body, each call of
`apply_gradients` only accumulates one micro-batch's gradients on the device; the wrapped
optimizer updates the weights once every `num_mini_batches` calls
(`gradient_accumulation.Accumulator`). The rules of the original are checked when the
body is traced: a loop must be open, its count must be a multiple of `num_mini_batches`,
one weight update per loop, and a gradient accumulation optimizer is never wrapped in
another. Every other attribute (`iterations`, `learning_rate`, `variables`, ...) is the
wrapped optimizer's.
"""
from ipu_keras.errors import GradientAccumulationError
from ipu_keras._src.keras.gradient_accumulation import (
    Accumulator, GradientAccumulationReductionMethod, current_repeat_loop,
)


class GradientAccumulationOptimizerV2:
    """An optimizer that updates the weights once per `num_mini_batches` micro-batches.

    Must be used inside `ipu_keras.loops.repeat`, whose iteration count
    `num_mini_batches` must divide. The wrapped optimizer's `apply_gradients` runs once
    per window, so its `iterations` and learning-rate schedule count weight updates.

    Args:
        opt: The optimizer to wrap (a Keras optimizer).
        num_mini_batches: Micro-batches whose gradients are accumulated per update.
        offload_weight_update_variables: A memory placement hint; accepted and ignored
            (the simulator keeps every variable in tile memory).
        replicated_optimizer_state_sharding: A memory placement hint; accepted and ignored.
        dtype: The accumulators' dtype: None (each variable's own), a DType, or a callable
            taking the variable and returning a DType.
        reduction_method: A `GradientAccumulationReductionMethod` or its name (SUM, MEAN,
            RUNNING_MEAN), case-insensitive.
        name: The name prefix of the accumulator variables.
    """

    def __init__(self, opt, num_mini_batches, offload_weight_update_variables=None,
                 replicated_optimizer_state_sharding=False, dtype=None,
                 reduction_method=GradientAccumulationReductionMethod.SUM,
                 name="GradientAccumulationOptimizerV2"):
        if (isinstance(num_mini_batches, bool) or not isinstance(num_mini_batches, int)
                or num_mini_batches < 1):
            raise ValueError(
                "num_mini_batches must be a positive number. Received: "
                f"num_mini_batches={num_mini_batches!r}."
            )
        if isinstance(opt, GradientAccumulationOptimizerV2):
            raise GradientAccumulationError(
                f"{name} expected an optimizer that is not a gradient accumulation optimizer: "
                "a gradient accumulation optimizer must not be wrapped by another optimizer. "
                f"Received: opt={type(opt).__name__}(num_mini_batches={opt.num_mini_batches})."
                " Wrap the inner optimizer once."
            )
        self._opt = opt
        self._name = name
        self.offload_weight_update_variables = offload_weight_update_variables
        self.replicated_optimizer_state_sharding = replicated_optimizer_state_sharding
        self._accumulator = Accumulator(num_mini_batches, reduction_method, dtype, name)

    @property
    def num_mini_batches(self):
        return self._accumulator.num_mini_batches

    @property
    def reduction_method(self):
        return self._accumulator.reduction_method

    def __getattr__(self, name):
        if name.startswith("__") or name == "_opt":
            raise AttributeError(name)
        return getattr(self._opt, name)

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        """Accumulates one micro-batch; the wrapped optimizer applies the window at its end.

        Returns:
            A boolean scalar tensor, True where this micro-batch ended a window.
        """
        self._check_loop()
        return self._accumulate(grads_and_vars, None, None, *args, **kwargs)

    def _accumulate(self, grads_and_vars, window_end, weight, *args, **kwargs):
        pairs = list(grads_and_vars)
        if hasattr(self._opt, "build") and not getattr(self._opt, "built", True):
            self._opt.build([v for g, v in pairs if g is not None])
        return self._accumulator.accumulate(
            pairs, lambda reduced: self._opt.apply_gradients(reduced, *args, **kwargs),
            window_end, weight)

    def apply(self, grads, trainable_variables=None):
        """Keras 3 spelling of `apply_gradients(zip(grads, trainable_variables))`."""
        if trainable_variables is None:
            trainable_variables = self._opt._trainable_variables  # pylint: disable=protected-access
        return self.apply_gradients(zip(grads, trainable_variables))

    def _check_loop(self):
        loop = current_repeat_loop()
        if loop is None:
            raise GradientAccumulationError(
                f"{self._name} expected to be used inside a training loop. Received: a call of "
                "apply_gradients outside of ipu_keras.loops.repeat. Gradient accumulation "
                "operations are only allowed inside of training loops created using "
                "`ipu_keras.loops.repeat`: move the training step into its body."
            )
        if loop.count is not None and loop.count % self.num_mini_batches:
            raise GradientAccumulationError(
                f"Detected a gradient accumulation operation with {self.num_mini_batches} "
                f"number of mini batches inside a loop with {loop.count} iterations. It is "
                "required that the number of mini batches to accumulate evenly divides the "
                f"number of loop iterations. Received: num_mini_batches={self.num_mini_batches}"
                f", loop iterations={loop.count}."
            )
        if loop.updates:
            raise GradientAccumulationError(
                "Detected multiple resource update instructions inside of a training loop: "
                "expected one weight update (one gradient accumulation apply_gradients call) "
                f"per loops.repeat body. Received: {len(loop.updates) + 1} calls. Combine the "
                "gradients into one apply_gradients call."
            )
        loop.updates.append(self)


class GradientAccumulationOptimizer(GradientAccumulationOptimizerV2):
    """The Keras form of `GradientAccumulationOptimizerV2` (`keras.ipu.optimizers`).

    Same arguments and rules; with `num_mini_batches=1` the wrapped optimizer itself is
    returned, as in the original.
    """

    def __new__(cls, opt=None, num_mini_batches=None, *args, **kwargs):
        del args, kwargs
        if num_mini_batches == 1 and not isinstance(num_mini_batches, bool):
            return opt
        return super().__new__(cls)

    def __init__(self, opt, num_mini_batches, offload_weight_update_variables=None,
                 replicated_optimizer_state_sharding=False, dtype=None,
                 reduction_method=GradientAccumulationReductionMethod.SUM,
                 name="GradientAccumulationOptimizer"):
        super().__init__(opt, num_mini_batches, offload_weight_update_variables,
                         replicated_optimizer_state_sharding, dtype, reduction_method, name)
