"""`IPUTrainerMixin`: plugs the simulated IPU into Keras' TensorFlow trainer.

Keras owns the training loop (epochs, data adapters, callbacks, progress bar,
History, metrics); the mixin only replaces how a batch of steps runs, through the
documented hooks `make_train_function`, `make_test_function` and
`make_predict_function`, each returning a `DeviceFunction` that runs the model's
(possibly user-defined) `train_step`/`test_step`/`predict_step` on the device; and
`_maybe_symbolic_build`, where `fit` and `evaluate` show it their epoch iterator, so that
it counts the batches that run (`step_counts.py`). `ipu_report` describes the program
of the user's last call: after `fit`, training's, even when validation ran after it.
With `verbose` on, `fit` adds a `DeviceTimeLogger` that prints the simulated device
time of each epoch beside the wall time, without touching the logs. The calls that run
the model hold its lock (`locking.py`): threads sharing a model take turns; their
errors' tracebacks leave out the simulator's frames, as Keras' leave out its own
(`tracebacks.py`).
"""
import inspect

import keras

from ipu_keras._src.keras import accumulation, execution_options, pipelining, replication
from ipu_keras._src.keras.callbacks import StepReplay
from ipu_keras._src.keras.device_function import DeviceFunction
from ipu_keras._src.keras.device_time import with_device_time
from ipu_keras._src.keras.locking import model_lock
from ipu_keras._src.keras.step_counts import count_batches_run
from ipu_keras._src.keras.tracebacks import filtered
from ipu_keras._src.runtime import infeed_dataset
from ipu_keras.errors import FeedError


class IPUTrainerMixin:
    """Mixed into keras.Model subclasses before the Keras class."""

    _ipu_asynchronous_callbacks = False

    @property
    def distribute_strategy(self):
        """Keras' strategy, except that the datasets it distributes are device infeeds."""
        return _InfeedStrategy(super().distribute_strategy, self)

    @property
    def steps_per_execution(self):
        """Steps per device execution, always a Python int (`execution_options.py`)."""
        return self.__dict__.get("steps_per_execution", 1)

    @steps_per_execution.setter
    def steps_per_execution(self, value):
        self.__dict__["steps_per_execution"] = execution_options.as_steps_per_execution(value)

    def get_compile_config(self):
        config = super().get_compile_config()
        if "steps_per_execution" in config:   # `compile` kept what it was given, maybe a tensor
            config["steps_per_execution"] = execution_options.as_steps_per_execution(
                self._compile_config.config["steps_per_execution"])
        return config

    def make_train_function(self, force=False):
        if self.train_function is None or force:
            self.train_function = DeviceFunction(self, "train")
        return self.train_function

    def make_test_function(self, force=False):
        if self.test_function is None or force:
            self.test_function = DeviceFunction(self, "test")
        return self.test_function

    def make_predict_function(self, force=False):
        if self.predict_function is None or force:
            self.predict_function = DeviceFunction(self, "predict")
        return self.predict_function

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        # Keras' fit and evaluate hand their epoch iterator here before they start it.
        if iterator is not None:
            count_batches_run(iterator, replication.replication_factor(self))
        return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)

    @filtered
    def fit(self, *args, **kwargs):
        arguments = self._with_step_replay(keras.Model.fit, args, kwargs)
        with model_lock(self):
            accumulation.before_fit(self)
            if arguments.get("verbose", "auto") != 0:
                arguments["callbacks"] = with_device_time(arguments.get("callbacks"), self)
            with replication.batches_per_execution(self):
                try:
                    return super().fit(**arguments)
                finally:
                    # fit's validation ran the test program after the last training
                    # execution; the model's report stays the training one.
                    _report_on(self, "train")

    @filtered
    def evaluate(self, *args, **kwargs):
        arguments = self._with_step_replay(keras.Model.evaluate, args, kwargs)
        with model_lock(self), replication.batches_per_execution(self):
            try:
                return super().evaluate(**arguments)
            finally:
                _report_on(self, "test")

    @filtered
    def predict(self, *args, **kwargs):
        arguments = self._with_step_replay(keras.Model.predict, args, kwargs)
        with model_lock(self), replication.batches_per_execution(self):
            _report_on(self, "predict")
            try:
                return super().predict(**arguments)
            except UnboundLocalError as e:
                if "batch_outputs" not in str(e):
                    raise
                # Keras' loop reads the outputs of a batch that never came (as on the CPU).
                raise FeedError(
                    "predict expected at least one batch of input. Received: no data (an "
                    "empty array or dataset). Check the input's length or the dataset's "
                    "filters.") from None

    @filtered
    def train_on_batch(self, *args, **kwargs):
        with model_lock(self):
            _report_on(self, "train")
            return super().train_on_batch(*args, **kwargs)

    @filtered
    def test_on_batch(self, *args, **kwargs):
        with model_lock(self):
            _report_on(self, "test")
            return super().test_on_batch(*args, **kwargs)

    @filtered
    def predict_on_batch(self, *args, **kwargs):
        with model_lock(self):
            _report_on(self, "predict")
            return super().predict_on_batch(*args, **kwargs)

    def get_metrics_result(self):
        logs = replication.replicated_logs(self)
        if logs is not None and replication.replication_factor(self) > 1:
            return dict(logs)
        built = [metric for metric in self.metrics if getattr(metric, "built", True) is not False]
        if len(built) == len(self.metrics):
            return super().get_metrics_result()
        # No step has run (empty data on a fresh model): Keras on the CPU builds the compiled
        # metrics while tracing the step it then cannot feed, and reports none of them.
        return {metric.name: metric.result() for metric in built}

    def set_replication_options(self, replicated_metric_reduction_method="NONE"):
        """How the logs of the replicas become a step's logs when the model is replicated.

        Args:
            replicated_metric_reduction_method: A `ReplicatedMetricReductionMethod` or its
                name: NONE (the last replica's values), LIST (a list with one value per
                replica), SUM or MEAN over the replicas.
        """
        replication.set_options(self, replicated_metric_reduction_method)

    def _with_step_replay(self, method, args, kwargs):
        """The call's arguments by name, the callbacks wrapped if asynchronous callbacks are on."""
        bound = inspect.signature(method).bind(self, *args, **kwargs)
        arguments = dict(bound.arguments)
        del arguments["self"]
        arguments.update(arguments.pop("kwargs", {}))
        callbacks = arguments.get("callbacks")
        # A CallbackList is Keras passing fit's own callbacks on to evaluate: already wrapped.
        if (self._ipu_asynchronous_callbacks and callbacks
                and not isinstance(callbacks, keras.callbacks.CallbackList)):
            arguments["callbacks"] = [StepReplay(list(callbacks), self)]
        return arguments

    def set_asynchronous_callbacks(self, asynchronous=False):
        """With True, per-batch callbacks also see every step of an execution, with its logs."""
        if not isinstance(asynchronous, bool):
            raise ValueError(
                f"set_asynchronous_callbacks expected a bool. Received: asynchronous="
                f"{asynchronous!r}"
            )
        self._ipu_asynchronous_callbacks = asynchronous

    def export_for_ipu_serving(self, export_dir, batch_size=None, output_names=None,
                               preprocessing_step=None, preprocessing_step_signature=None,
                               postprocessing_step=None, postprocessing_step_signature=None,
                               purge_export_dir=False):
        """`ipu.serving.export_keras(self, ...)`: a SavedModel of this model's inference with
        its compiled IPU program (SDK 2.6+; see `ipu_keras.serving`)."""
        from ipu_keras._src.serving.exports import export_model

        return export_model(self, export_dir, batch_size, output_names, preprocessing_step,
                            preprocessing_step_signature, postprocessing_step,
                            postprocessing_step_signature, purge_export_dir)

    def set_infeed_queue_options(self, **kwargs):
        """Options of the infeed that `fit`, `evaluate` and `predict` feed the device from.

        Applies from the next call. `prefetch_depth` (1 to 255) makes the host prefetch that
        many batches ahead of the device; `optimise_latency` and `device_ordinal` are
        checked and kept (no effect on the simulator). Keys Keras sets itself (`dataset`,
        `infeed_spec`, `element_spec`) are refused, other unknown keys ignored with a
        warning, as Graphcore's Keras ignored them.
        """
        execution_options.set_infeed_queue_options(self, **kwargs)

    def set_outfeed_queue_options(self, **kwargs):
        """Options of the outfeed that brings back each step's results.

        Applies from the next call. `buffer_depth` (>= 1) and `optimise_latency` are
        checked and kept (the simulator's host buffer is unbounded); `outfeed_mode` and
        `device_ordinal` are refused, as Graphcore's Keras refused them, and an unknown key
        is a TypeError.
        """
        execution_options.set_outfeed_queue_options(self, **kwargs)

    def set_gradient_accumulation_options(self, gradient_accumulation_steps_per_replica=None,
                                          gradient_accumulation_reduction_method="sum",
                                          use_v2_gradient_accumulation_optimizer=False,
                                          **gradient_accumulation_optimizer_kwargs):
        """Sets the gradient accumulation of training (not of `evaluate` or `predict`).

        With `gradient_accumulation_steps_per_replica=G`, `fit` adds the gradients of G
        consecutive batches in buffers on the device and the compiled optimizer updates
        the weights once per G batches (so its `iterations` count weight updates).
        `steps_per_execution` must be a multiple of G. An epoch whose batches are not a
        multiple of G ends on a partial window, applied over the batches it has.

        Args:
            gradient_accumulation_steps_per_replica: G, a positive int; None keeps it.
            gradient_accumulation_reduction_method: How the G gradients are combined: a
                `GradientAccumulationReductionMethod` or its name ('sum', 'mean',
                'running_mean'). With 'mean', training equals Keras trained on batches G
                times larger; with 'sum', the same with the learning rate scaled by G.
            use_v2_gradient_accumulation_optimizer: Wrap the optimizer in
                `ipu.optimizers.GradientAccumulationOptimizer` rather than
                `GradientAccumulationOptimizerV2` (the same numerics here).
            **gradient_accumulation_optimizer_kwargs: Other arguments of
                `GradientAccumulationOptimizerV2` (`dtype`, `name`, placement hints); not
                `opt` or `num_mini_batches`.
        """
        accumulation.set_gradient_accumulation_options(
            self, gradient_accumulation_steps_per_replica,
            gradient_accumulation_reduction_method, use_v2_gradient_accumulation_optimizer,
            **gradient_accumulation_optimizer_kwargs)

    def set_pipelining_options(self, gradient_accumulation_steps_per_replica=None,
                               device_mapping=None, accumulate_outfeed=None,
                               gradient_accumulation_reduction_method="sum",
                               **pipelining_kwargs):
        """Sets the options of a pipelined model (one with a pipeline stage assignment).

        A pipelined model trains as the same model with gradient accumulation
        `gradient_accumulation_steps_per_replica` (required for `fit`), each layer's ops
        placed on its stage's IPU. The depth rule of the schedule applies: for training the
        accumulation must be a multiple of 2 x stages (Grouped) or of the number of stages
        (Interleaved); for `evaluate` and `predict`, `steps_per_execution` must be a
        multiple of the number of stages (Sequential: any value).

        Args:
            gradient_accumulation_steps_per_replica: Micro-batches per weight update.
            device_mapping: A list giving the IPU of each stage (default: stage k on IPU k).
            accumulate_outfeed: Accepted and stored (logs are computed per step here).
            gradient_accumulation_reduction_method: 'sum', 'mean' or 'running_mean'.
            **pipelining_kwargs: Options of `pipelining_ops.pipeline`, e.g.
                `pipeline_schedule`; not the ones Keras sets or that have named arguments.
        """
        pipelining.set_pipelining_options(
            self, gradient_accumulation_steps_per_replica, device_mapping, accumulate_outfeed,
            gradient_accumulation_reduction_method, **pipelining_kwargs)

    def get_pipeline_stage_assignment(self):
        """The stage of each layer (Sequential) or layer call (functional), in post order."""
        return pipelining.get_pipeline_stage_assignment(self)

    def set_pipeline_stage_assignment(self, pipeline_stage_assignment):
        """Sets the stages: a list of ints or of the records `get_pipeline_stage_assignment`
        returns, one per layer (per layer call for functional models), in that order."""
        pipelining.set_pipeline_stage_assignment(self, pipeline_stage_assignment)

    def reset_pipeline_stage_assignment(self):
        """Removes the stage assignment: the model is no longer pipelined."""
        pipelining.reset_pipeline_stage_assignment(self)

    def print_pipeline_stage_assignment_summary(self, line_length=None, print_fn=None):
        """Prints a table of the layers and their pipeline stages (`print_fn`: per line)."""
        pipelining.print_summary(self, line_length, print_fn)

    def ipu_report(self):
        """A summary of the last executable this model ran on the simulated IPU: after
        `fit`, the training program's (even when validation ran after it); after
        `evaluate` or `predict`, theirs.

        Returns:
            A dict with `target`, `steps` (of the last execution), `cycles` split into
            compute/exchange/sync/host_io, `total_cycles`, `device_seconds_per_step`,
            `max_tile`, `max_tile_bytes` and `bytes_per_tile`; None before any run.
        """
        program = _last_program(self)
        if program is None:
            return None
        cycles = program.session.last_cycles
        total = sum(cycles.values())
        steps = max(1, program.steps_run)
        target = program.target
        return {
            "target": target.name,
            "steps": program.steps_run,
            "cycles": dict(cycles),
            "total_cycles": total,
            "device_seconds_per_step": total / steps / target.clock_hz,
            "max_tile": program.executable.memory["max_tile"],
            "max_tile_bytes": program.executable.memory["max_tile_bytes"],
            "bytes_per_tile": target.bytes_per_tile,
        }


class _InfeedStrategy:
    """A strategy whose `experimental_distribute_dataset` gives the dataset the options of
    a device infeed (`runtime.infeed_dataset`) and the model's `prefetch_depth` first;
    everything else is `strategy`'s. Keras' trainer builds each epoch's input pipeline
    through it."""

    def __init__(self, strategy, model):
        self._strategy = strategy
        self._model = model

    def experimental_distribute_dataset(self, dataset, options=None):
        dataset = execution_options.with_prefetch(self._model, infeed_dataset(dataset))
        return self._strategy.experimental_distribute_dataset(dataset, options)

    def __getattr__(self, name):
        return getattr(self._strategy, name)


_REPORTED_ATTR = "_ipu_reported_function"


def _report_on(model, kind):
    """Makes `ipu_report` describe the `kind` ("train", "test", "predict") function's last
    program: the one of the user's last call, not of a step run inside it (fit's
    validation)."""
    object.__setattr__(model, _REPORTED_ATTR, kind)


def _last_program(model):
    functions = {"train": model.train_function, "test": model.test_function,
                 "predict": model.predict_function}
    chosen = functions.get(getattr(model, _REPORTED_ATTR, None))
    if isinstance(chosen, DeviceFunction) and chosen.last_program is not None:
        return chosen.last_program
    candidates = [f.last_program for f in functions.values()
                  if isinstance(f, DeviceFunction) and f.last_program is not None]
    if not candidates:
        return None
    return max(candidates, key=lambda p: p.session.run_index)

