"""SDK 2.0-2.1's `ipu.keras.PipelineSequential` and `ipu.keras.PipelineModel`.

SDK 2.2 replaced both classes by the pipelining API on ordinary models. Here each is a
thin deprecated class over that API: `PipelineSequential(stages, ...)` is an
`ipu_keras.Sequential` of the stages' layers whose stage assignment is set from the list
of lists, and `PipelineModel(inputs, outputs, ...)` is the functional `ipu_keras.Model`
whose stages come from the `PipelineStage` scopes it was built in (checked when it is
constructed, as the original did). Both set their pipelining options from the
constructor's arguments: the accumulation is `gradient_accumulation_count *
batch_serialization_iterations` (the original's count), gradients are summed (SDK 2.1
had no reduction method), and `pipeline_schedule`, `recomputation_mode` and the Poplar
and offloading options go to `set_pipelining_options` as pipelining kwargs (the simulator
reads the schedule; the rest change no numerics). The original ran a whole epoch per
execution; `compile` without `steps_per_execution` runs one accumulation window per
execution, which an SDK 2.1 script needs to train unchanged.
"""
from keras.src.layers.layer import Layer

from ipu_keras._src import compat
from ipu_keras._src.keras import pipelining
from ipu_keras._src.keras.models import Functional, Sequential

_SINCE, _UNTIL = "2.0", "2.2"
_OPTIONS = "model.set_pipelining_options(gradient_accumulation_steps_per_replica=n)"
_POPLAR = ("forward_propagation_stages_poplar_options",
           "backward_propagation_stages_poplar_options", "weight_update_poplar_options",
           "offload_weight_update_variables", "replicated_optimizer_state_sharding",
           "offload_activations", "offload_gradient_accumulation_buffers",
           "replicated_weight_sharding", "offload_weights")


class _LegacyPipeline:
    """What both classes share: options from the constructor, a default for `compile`."""

    def _set_legacy_options(self, gradient_accumulation_count, gradient_accumulation_dtype,
                            batch_serialization_iterations, device_mapping, options):
        steps = pipelining.positive_steps(gradient_accumulation_count)
        self.gradient_accumulation_count = steps
        self.gradient_accumulation_dtype = gradient_accumulation_dtype
        self.batch_serialization_iterations = batch_serialization_iterations
        self.device_mapping = device_mapping
        kwargs = {k: v for k, v in options.items() if v is not None and v is not False}
        self.set_pipelining_options(
            gradient_accumulation_steps_per_replica=steps * batch_serialization_iterations,
            device_mapping=device_mapping, **kwargs)

    def compile(self, *args, steps_per_execution=None, **kwargs):
        """Keras' `compile`; `steps_per_execution` defaults to one accumulation window."""
        if steps_per_execution is None:
            steps_per_execution = pipelining.options(self).steps
        super().compile(*args, steps_per_execution=steps_per_execution, **kwargs)


@compat.deprecated_class(
    "ipu.keras.PipelineSequential",
    "ipu_keras.Sequential(layers), model.set_pipeline_stage_assignment(stages) and "
    f"{_OPTIONS}", _SINCE, _UNTIL)
class PipelineSequential(_LegacyPipeline, Sequential):
    """A Sequential model pipelined over `stages`, the SDK 2.0-2.1 way (deprecated).

    Args:
        stages: A list of lists of Keras layers, one list per pipeline stage.
        gradient_accumulation_count: The number of mini-batches of each weight update.
        gradient_accumulation_dtype: Accepted; the accumulators take the gradients' dtype.
        batch_serialization_iterations: Multiplies the accumulation, as in the original.
        device_mapping: The IPU of each stage (default: stage k on IPU k).
        pipeline_schedule: A `PipelineSchedule` (default Grouped).
        recomputation_mode: A `RecomputationMode`, passed on to the pipelining options.
        **kwargs: The Poplar and offloading options of the original (passed on to the
            pipelining options) and Keras' `Sequential` arguments (`name`).
    """

    def __init__(self, stages, gradient_accumulation_count, gradient_accumulation_dtype=None,
                 batch_serialization_iterations=1, device_mapping=None,
                 pipeline_schedule=None, recomputation_mode=None, layer_replacement=False,
                 **kwargs):
        _check_stages(stages)
        options = dict(_pop_poplar_options(kwargs), pipeline_schedule=pipeline_schedule,
                       recomputation_mode=recomputation_mode)
        super().__init__([layer for stage in stages for layer in stage], **kwargs)
        self.stages = stages
        stage_of = {id(layer): k for k, stage in enumerate(stages) for layer in stage}
        self.set_pipeline_stage_assignment([stage_of[id(layer)] for layer in self.layers])
        self._set_legacy_options(gradient_accumulation_count, gradient_accumulation_dtype,
                                 batch_serialization_iterations, device_mapping, options)


@compat.deprecated_class(
    "ipu.keras.PipelineModel",
    f"ipu_keras.Model(inputs, outputs) built in PipelineStage scopes and {_OPTIONS}",
    _SINCE, _UNTIL)
class PipelineModel(_LegacyPipeline, Functional):
    """A functional model pipelined by its `PipelineStage` scopes, the SDK 2.0-2.1 way
    (deprecated).

    Args:
        *args: `inputs` and `outputs` (also as keywords), as for `keras.Model`.
        gradient_accumulation_count: The number of mini-batches of each weight update.
        gradient_accumulation_dtype: Accepted; the accumulators take the gradients' dtype.
        batch_serialization_iterations: Multiplies the accumulation, as in the original.
        device_mapping: The IPU of each stage (default: stage k on IPU k).
        pipeline_schedule: A `PipelineSchedule` (default Grouped).
        recomputation_mode: A `RecomputationMode`, passed on to the pipelining options.
        **kwargs: The Poplar and offloading options of the original (passed on to the
            pipelining options) and Keras' functional arguments (`name`).

    Raises:
        PipelineStageAssignmentError: a layer has no stage, or uses the outputs of a later
            stage.
    """

    def __init__(self, *args, gradient_accumulation_count, gradient_accumulation_dtype=None,
                 batch_serialization_iterations=1, device_mapping=None,
                 pipeline_schedule=None, recomputation_mode=None, layer_replacement=False,
                 **kwargs):
        options = dict(_pop_poplar_options(kwargs), pipeline_schedule=pipeline_schedule,
                       recomputation_mode=recomputation_mode)
        super().__init__(*args, **kwargs)
        pipelining.validate(self, pipelining.get_pipeline_stage_assignment(self))
        self._set_legacy_options(gradient_accumulation_count, gradient_accumulation_dtype,
                                 batch_serialization_iterations, device_mapping, options)


def _pop_poplar_options(kwargs):
    """The original's Poplar and offloading arguments, taken out of `kwargs`."""
    return {name: kwargs.pop(name, None) for name in _POPLAR}


def _check_stages(stages):
    """The original's checks of `stages`, with its messages."""
    if not isinstance(stages, list) or not stages:
        raise ValueError("An IPU pipeline must take a non-empty list of stages, where each "
                         "stage is a list of Keras Layers. Received: "
                         f"stages={type(stages).__name__}.")
    for stage in stages:
        if not isinstance(stage, list):
            raise ValueError("An IPU pipeline may only contain lists of stages, where each "
                             "stage is a list of Keras Layers. Received: "
                             f"stage={type(stage).__name__}.")
        for layer in stage:
            if not isinstance(layer, Layer):
                raise ValueError("Each list in the `stages` list must contain only Keras "
                                 f"Layers. Received: layer={type(layer).__name__}.")
