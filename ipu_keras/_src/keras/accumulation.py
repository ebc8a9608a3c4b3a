"""Gradient accumulation of Keras models, and the step plan of accumulating and pipelined
models.

`set_gradient_accumulation_options` validates and stores the options with the original's
rules. `step_plan(model, kind)` is what `DeviceFunction` asks for: None for a plain model,
else a `StepPlan` that (1) for training wraps the compiled optimizer in
`GradientAccumulationOptimizerV2` for the duration of the trace of the model's own
`train_step`, so micro-batches accumulate in device variables and the optimizer updates
the weights once per window, and (2) for a pipelined model places each layer's ops on its
stage and IPU (`keras/pipelining.py`).

Where a window ends is part of the data: the host tags each staged batch with a flag,
set every `gradient_accumulation_steps_per_replica` steps and on the last step of an
execution, and with its number of samples, its weight in a MEAN or RUNNING_MEAN window
(so a partial last batch counts for what it holds). `steps_per_execution` must be a
multiple of the accumulation (the original's error), so only the remainder execution of
an epoch (which the original refused) can end on a partial window: it is applied over the
micro-batches it has, which is what Keras on the CPU does with the partial last batch of
a dataset batched G times larger.
"""
import inspect
import logging

import numpy as np
import tensorflow as tf
from keras.src.backend.tensorflow.trainer import TensorFlowTrainer

from ipu_keras.errors import AccumulationStepsError
from ipu_keras._src.keras.gradient_accumulation import GradientAccumulationReductionMethod
from ipu_keras._src.keras import pipelining, replication
from ipu_keras._src.keras.gradient_accumulation_optimizer import (
    GradientAccumulationOptimizer, GradientAccumulationOptimizerV2,
)

logger = logging.getLogger("ipu_keras")

_OPTIONS_ATTR = "_ipu_gradient_accumulation"
_LOG_PENDING_ATTR = "_ipu_log_batch_size"


def set_gradient_accumulation_options(model, gradient_accumulation_steps_per_replica=None,
                                      gradient_accumulation_reduction_method="sum",
                                      use_v2_gradient_accumulation_optimizer=False,
                                      **gradient_accumulation_optimizer_kwargs):
    """Validates and stores the options (`IPUTrainerMixin.set_gradient_accumulation_options`)."""
    options = dict(getattr(model, _OPTIONS_ATTR, None) or {})
    options["reduction_method"] = GradientAccumulationReductionMethod.parse(
        gradient_accumulation_reduction_method)
    steps = gradient_accumulation_steps_per_replica
    if steps is not None:
        options["steps"] = pipelining.positive_steps(steps)
    _check_optimizer_kwargs(gradient_accumulation_optimizer_kwargs)
    options["optimizer_kwargs"] = dict(gradient_accumulation_optimizer_kwargs)
    if not isinstance(use_v2_gradient_accumulation_optimizer, bool):
        raise ValueError(
            "set_gradient_accumulation_options expected a bool. Received: "
            f"use_v2_gradient_accumulation_optimizer={use_v2_gradient_accumulation_optimizer!r}."
        )
    options["use_v2"] = use_v2_gradient_accumulation_optimizer
    object.__setattr__(model, _OPTIONS_ATTR, options)
    model.train_function = None  # recompile with the new options


def _check_optimizer_kwargs(kwargs):
    if "opt" in kwargs:
        raise ValueError(
            "Found `opt` key in `gradient_accumulation_optimizer_kwargs`. This is not "
            "supported as the optimizer which the model has been compiled with is "
            "automatically wrapped.")
    if "num_mini_batches" in kwargs:
        raise ValueError(
            "Found `num_mini_batches` key in `gradient_accumulation_optimizer_kwargs`. Set the "
            "`gradient_accumulation_steps_per_replica` argument to "
            "`set_gradient_accumulation_options` instead.")
    if "experimental_normalize_gradients" in kwargs:
        raise ValueError(
            "Found `experimental_normalize_gradients` argument to "
            "`set_gradient_accumulation_options`. This argument has now been removed, use "
            "`gradient_accumulation_reduction_method` instead.")
    known = set(inspect.signature(GradientAccumulationOptimizerV2).parameters) - {
        "opt", "num_mini_batches", "reduction_method"}
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise ValueError(
            f"set_gradient_accumulation_options expected optimizer keyword arguments among "
            f"{sorted(known)}. Received: {unknown}.")


def training_accumulation(model):
    """(steps, reduction method, optimizer kwargs, use_v2) of training `model`, or None."""
    if pipelining.is_pipelined(model):
        options = pipelining.options(model)
        return options.steps, options.reduction_method, {}, False
    options = getattr(model, _OPTIONS_ATTR, None)
    if not options or options.get("steps", 1) == 1:
        return None
    return (options["steps"], options["reduction_method"], options["optimizer_kwargs"],
            options["use_v2"])


def before_fit(model):
    """Asks for the effective batch size to be logged by the first execution of this fit."""
    object.__setattr__(model, _LOG_PENDING_ATTR, True)


def step_plan(model, kind):
    """The `StepPlan` of `model`'s `kind` ("train", "test", "predict") step, or None."""
    pipelined = pipelining.is_pipelined(model)
    accumulation = training_accumulation(model) if kind == "train" else None
    if pipelined:
        pipelining.check_model(model, kind, accumulation)
    replicas = replication.replication_factor(model)
    if accumulation is None and not pipelined and not replication.reduces(replicas):
        return None
    if accumulation is not None:
        _check_steps(model, accumulation[0], pipelined, replicas)
    return StepPlan(model, kind, accumulation, pipelined, replicas)


def _check_steps(model, steps, pipelined, replicas=1):
    mode = "pipelined " if pipelined else ""
    if type(model).train_step is not TensorFlowTrainer.train_step:
        raise AccumulationStepsError(
            f"The function `train_step` for the model {model.name} has been overridden. This "
            f"is not supported for a {mode}model that uses gradient accumulation, expected the "
            "Keras `train_step`. Received: a custom train_step. Either remove the override "
            "from your model definition or do not set gradient accumulation options.")
    steps_per_execution = model.steps_per_execution // replicas   # per replica
    if steps_per_execution % steps:
        raise AccumulationStepsError(
            f"The {mode}model has been configured to use gradient accumulation for training, "
            f"however the current `steps_per_execution` value (set to {steps_per_execution}) "
            f"is not divisible by `gradient_accumulation_steps_per_replica` ({steps}). You "
            "need to adjust either `steps_per_execution` or "
            "`gradient_accumulation_steps_per_replica` to make sure that "
            "`steps_per_execution` is divisible by `gradient_accumulation_steps_per_replica`. "
            f"Received: steps_per_execution={steps_per_execution}, "
            f"gradient_accumulation_steps_per_replica={steps}.")


class StepPlan:
    """How one kind of step of an accumulating or pipelined model is traced and fed."""

    def __init__(self, model, kind, accumulation, pipelined, replicas=1):
        self.model = model
        self.kind = kind
        self.pipelined = pipelined
        self.replicas = replicas
        self.steps = accumulation[0] if accumulation else 1
        self.optimizer = None
        if accumulation is not None:
            steps, method, kwargs, use_v2 = accumulation
            wrapper = _KerasOptimizerV2 if not use_v2 else _KerasOptimizer
            self.optimizer = wrapper(model.optimizer, steps, reduction_method=method, **kwargs)

    def pipeline(self):
        """{"schedule", "depth", "recomputation"} of a pipelined model's device loop, else
        None. Its
        iterations are micro-batches. Training: a window of `steps` of them is a pipeline
        run, and the weight update the optimizer branch of the window-end cond. Evaluate
        and predict: one execution is one inference pipeline run, `steps_per_execution`
        deep, as in the original."""
        if not self.pipelined:
            return None
        depth = (self.steps if self.optimizer is not None
                 else self.model.steps_per_execution // self.replicas)   # per replica
        stored = pipelining.options(self.model)
        return {"schedule": stored.schedule, "depth": depth,
                "recomputation": stored.recomputation}

    def tag(self, batches):
        """The staged batches, each with its window-end flag when training accumulates.
        With R replicas, batches i R .. i R + R - 1 are the replicas' parts of step i."""
        if self.kind == "train" and getattr(self.model, _LOG_PENDING_ATTR, False):
            object.__setattr__(self.model, _LOG_PENDING_ATTR, False)
            self._log_batch_size(batches[0])
        if self.optimizer is None:
            return batches
        last = (len(batches) - 1) // self.replicas
        return [(batch, np.int32((i // self.replicas + 1) % self.steps == 0
                                 or i // self.replicas == last),
                 np.float32(_batch_size(batch))) for i, batch in enumerate(batches)]

    def _log_batch_size(self, batch):
        size = _batch_size(batch) * self.steps * self.replicas
        if self.replicas == 1:
            logger.info("Training is not distributed and accumulating %d batches per "
                        "optimizer step, your effective batch size is %d.", self.steps, size)
            return
        logger.info(
            "Training is distributed across %d replicas and accumulating %d batches per "
            "optimizer step, your effective batch size is %d. The replicas' gradients are "
            "summed, each the gradient of its own mean loss: one update is %d times that of "
            "a single device on the whole batch at the same learning rate.", self.replicas,
            self.steps, size, self.replicas)

    def step_function(self):
        """The function `StepProgram` traces for this kind of step."""
        step = getattr(self.model, f"{self.kind}_step")
        reduces = replication.reduces(self.replicas)
        if self.kind != "train" or (self.optimizer is None and not reduces):
            return self._placed(step)

        @tf.autograph.experimental.do_not_convert   # plain Python around Keras' step
        def train_step(tagged):
            compiled = self.model.optimizer
            if self.optimizer is None:
                data, swapped = tagged, compiled
            else:
                data, window_end, samples = tagged
                self.optimizer.window_end, self.optimizer.weight = window_end > 0, samples
                swapped = self.optimizer
            if reduces:
                swapped = replication.replica_sum_optimizer(swapped)
            object.__setattr__(self.model, "optimizer", swapped)
            try:
                return self._placed(step)(data)
            finally:
                object.__setattr__(self.model, "optimizer", compiled)

        return train_step

    def _placed(self, step):
        if not self.pipelined:
            return step

        def placed_step(data):
            with pipelining.placed_layers(self.model):
                return step(data)

        placed_step.__name__ = getattr(step, "__name__", "step")
        return placed_step


def _batch_size(batch):
    leaves = [leaf for leaf in tf.nest.flatten(batch) if leaf is not None]
    return int(np.shape(leaves[0])[0]) if leaves and np.ndim(leaves[0]) else 1


class _WindowEnd:
    """The Keras trainer's accumulation: the window ends where the host's flag says, and
    each micro-batch weighs its number of samples."""

    window_end = weight = None

    def _check_loop(self):
        pass  # the trainer's counted device loop, not a loops.repeat, runs the steps

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        return self._accumulate(grads_and_vars, self.window_end, self.weight, *args, **kwargs)


class _KerasOptimizerV2(_WindowEnd, GradientAccumulationOptimizerV2):
    pass


class _KerasOptimizer(_WindowEnd, GradientAccumulationOptimizer):
    pass
