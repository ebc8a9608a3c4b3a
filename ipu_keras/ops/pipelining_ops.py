"""`ipu.pipelining_ops`: Graphcore's `pipeline(...)` and its options.

A pipeline is built here as ordinary TensorFlow, which the tracer imports like any
other code: per pipeline run, a loop over `gradient_accumulation_count` micro-batches
in which stage k's ops are made under `scopes.pipeline_stage(k)` and
`scopes.ipu_shard(device_mapping[k])` (their gradients follow them); in training, the
gradients of each micro-batch are accumulated on the device (SUM, MEAN or
RUNNING_MEAN) and the optimizer's `apply_gradients` runs once per run; `repeat_count`
runs. Results leave only through the outfeed. The rules of the original are checked
here, with its messages; the numerics never depend on the schedule, which only decides
the time (the compiler's `pipeline` analysis).

Accumulation buffers are device variables made on first use (`_Buffers`), so the
program needs no host round trip between micro-batches.
"""
import collections
import enum

import tensorflow as tf

from tensorflow.core.framework import attr_value_pb2

from ipu_keras import scopes
from ipu_keras.errors import PipelineError
from ipu_keras._src.driver.pipeline import OptimizerFunctionOutput
from ipu_keras._src.keras.gradient_accumulation import GradientAccumulationReductionMethod
from ipu_keras._src.keras.pipelining import recomputation_name
from ipu_keras._src.ops.state import CHECKPOINT_ATTR


class PipelineSchedule(enum.IntEnum):
    """How the stages of a pipeline overlap in time.

    * Grouped: all IPUs run forward passes together, then backward passes together.
    * Interleaved: forward and backward passes alternate on each IPU.
    * Sequential: one stage at a time, as sharding (for debugging).
    """

    Grouped = 0
    Interleaved = 1
    Sequential = 2


class RecomputationMode(enum.Enum):
    """When recomputation (`IPUConfig.allow_recompute`) recomputes forward activations."""

    Auto = 0
    RecomputeThenBackpropagate = 1
    RecomputeAndBackpropagateInterleaved = 2


class PipelineStageOptions:
    """Poplar options of one stage: dicts of option strings for its planned ops.

    Args:
        convolution_options: e.g. `{"availableMemoryProportion": "0.3"}`.
        matmul_options: The same for matmuls.
        slice_options: Options of slices (accepted; not modelled).
    """

    def __init__(self, convolution_options=None, matmul_options=None, slice_options=None):
        for name, value in (("convolution_options", convolution_options),
                            ("matmul_options", matmul_options),
                            ("slice_options", slice_options)):
            if value is not None and not isinstance(value, dict):
                raise TypeError(f"PipelineStageOptions expected {name} to be a dict. "
                                f"Received: {name}={value!r}")
        self.convolution_options = dict(convolution_options or {})
        self.matmul_options = dict(matmul_options or {})
        self.slice_options = dict(slice_options or {})

    def get(self):
        """The options as a dict, as Graphcore's class gives them."""
        return {"convOptions": self.convolution_options,
                "matMulOptions": self.matmul_options,
                "sliceOptions": self.slice_options}


def recomputation_checkpoint(tensors, name=None):
    """Marks `tensors` as kept (not recomputed) in the backward pass; returns them.

    With recomputation on (`IPUConfig.allow_recompute`) in a pipeline whose recomputation
    mode is RecomputeAndBackpropagateInterleaved, a stage's backward pass recomputes its
    forward activations from its inputs and these checkpoints, and the last stage
    recomputes what lies before its last checkpoints. Elsewhere it is an identity."""
    def checkpoint(tensor):
        out = tf.identity(tensor, name=name)
        if not tf.executing_eagerly():
            out.op._set_attr(CHECKPOINT_ATTR, attr_value_pb2.AttrValue(b=True))
        return out

    return tf.nest.map_structure(checkpoint, tensors)


_Options = collections.namedtuple("_Options", "stages count repeat mapping schedule training "
                                              "reduction outfeed_loss mask accumulate "
                                              "recomputation")


def pipeline(computational_stages, gradient_accumulation_count=None,
             gradient_accumulation_dtype=None, gradient_accumulation_for_captured_grads=True,
             repeat_count=1, batch_serialization_iterations=1, inputs=None, infeed_queue=None,
             outfeed_queue=None, optimizer_function=None, device_mapping=None,
             pipeline_schedule=None, recomputation_mode=None,
             forward_propagation_stages_poplar_options=None,
             backward_propagation_stages_poplar_options=None,
             weight_update_poplar_options=None, offload_weight_update_variables=None,
             replicated_optimizer_state_sharding=False, offload_activations=None,
             offload_gradient_accumulation_buffers=None, replicated_weight_sharding=None,
             offload_weights=None, continuous_weight_updates=False, outfeed_loss=False,
             accumulate_outfeed=False, accumulate_outfeed_dtype=None, outfeed_mask=None,
             reduction_method=GradientAccumulationReductionMethod.SUM, name=None):
    """Runs `computational_stages` as a pipeline over several IPUs.

    Each pipeline run pushes `gradient_accumulation_count` micro-batches through the
    stages; in training (`optimizer_function` given) their gradients are accumulated and
    applied once per run. `repeat_count` runs are made. Stage 0 receives `inputs` then
    the element dequeued from `infeed_queue`; stage k > 0 receives exactly the outputs
    of stage k - 1. Results leave only through `outfeed_queue`.

    Args:
        computational_stages: Functions, one per stage (at least two).
        gradient_accumulation_count: Micro-batches per pipeline run (required).
        gradient_accumulation_dtype: Accumulator dtype: None (the variable's), a DType.
        gradient_accumulation_for_captured_grads: Accepted (captured gradients are not
            modelled).
        repeat_count: Pipeline runs per execution.
        batch_serialization_iterations: Accepted when 1 (serialisation is not modelled).
        inputs: Tensors passed to the first stage before the infeed element.
        infeed_queue: An `IPUInfeedQueue` read once per micro-batch.
        outfeed_queue: An `IPUOutfeedQueue` receiving the last stage's outputs.
        optimizer_function: `fn(*last stage outputs) -> OptimizerFunctionOutput`, or None
            for inference.
        device_mapping: The IPU of each stage; default `range(len(stages))`.
        pipeline_schedule: A `PipelineSchedule`; default Grouped.
        recomputation_mode: A `RecomputationMode` (default Auto): how the backward
            passes recompute their stages' activations when `IPUConfig.allow_recompute`
            is on (numerics do not depend on it).
        forward_propagation_stages_poplar_options: A `PipelineStageOptions` per stage.
        backward_propagation_stages_poplar_options: A `PipelineStageOptions` per stage.
        weight_update_poplar_options: One `PipelineStageOptions`.
        offload_weight_update_variables, replicated_optimizer_state_sharding,
        offload_activations, offload_gradient_accumulation_buffers,
        replicated_weight_sharding, offload_weights: Memory-placement hints (streaming
            memory, replicated tensor sharding), accepted; the simulator keeps
            everything in tile memory.
        continuous_weight_updates: Accepted when False.
        outfeed_loss: Outfeed only the loss (training).
        accumulate_outfeed: Outfeed the sum of each run's outputs, once per run.
        accumulate_outfeed_dtype: The dtype of that sum (default: the outputs').
        outfeed_mask: Bools, one per last-stage output; True drops it (training).
        reduction_method: SUM, MEAN or RUNNING_MEAN (or their names).
        name: Accepted for compatibility.

    Returns:
        A `tf.Operation` that runs the pipeline.

    Raises:
        PipelineError (a ValueError): when a rule of the original is broken.
    """
    del gradient_accumulation_for_captured_grads, name
    del offload_weight_update_variables, replicated_optimizer_state_sharding
    del offload_activations, offload_gradient_accumulation_buffers
    del replicated_weight_sharding, offload_weights
    options = _check(computational_stages, gradient_accumulation_count, repeat_count,
                     device_mapping, pipeline_schedule, optimizer_function, outfeed_loss,
                     outfeed_mask, accumulate_outfeed, reduction_method,
                     batch_serialization_iterations, continuous_weight_updates)
    options = options._replace(recomputation=recomputation_value(recomputation_mode))
    _check_stage_options(forward_propagation_stages_poplar_options,
                         backward_propagation_stages_poplar_options,
                         weight_update_poplar_options, len(options.stages))
    from ipu_keras._src.driver import pipeline as _pipeline

    stage_options = _stage_options(forward_propagation_stages_poplar_options,
                                   backward_propagation_stages_poplar_options)
    return _pipeline.build(options, list(inputs or []), infeed_queue, outfeed_queue,
                           optimizer_function, gradient_accumulation_dtype,
                           accumulate_outfeed_dtype, stage_options)


def overlap_length(schedule, num_stages, training, device_mapping=None):
    """The number of micro-batches a schedule overlaps (the pipeline-depth unit L)."""
    if schedule == PipelineSchedule.Sequential:
        return 1
    if schedule == PipelineSchedule.Grouped:
        return 2 * num_stages if training else num_stages
    return len(set(device_mapping or range(num_stages)))


def check_depth(depth, schedule, num_stages, training, device_mapping=None):
    """The original's pipeline-depth rule: a multiple of L and at least L."""
    length = overlap_length(schedule, num_stages, training, device_mapping)
    names = ("This number might be called `gradient_accumulation_count`, "
             "`gradient_accumulation_steps_per_replica` or `steps_per_execution` depending "
             "on the API used.")
    if depth < length:
        raise PipelineError(
            f"The number of iterations of the pipeline must be at least {length}, but it is "
            f"{depth}. {names} Received: gradient_accumulation_count={depth}.")
    if depth % length:
        raise PipelineError(
            f"The number of iterations of the pipeline must be a multiple of {length}, but it "
            f"is {depth}. {names} Received: gradient_accumulation_count={depth} with "
            f"{num_stages} stages and the {PipelineSchedule(schedule).name} schedule.")


def _check(stages, count, repeat, mapping, schedule, optimizer_function, outfeed_loss,
           outfeed_mask, accumulate_outfeed, reduction_method, serialization, continuous):
    if not isinstance(stages, (list, tuple)) or len(stages) < 2:
        raise PipelineError("Pipeline requires at least two computational stages. Received: "
                            f"computational_stages={stages!r}")
    if count is None:
        raise PipelineError("The pipeline's gradient_accumulation_count must be specified. "
                            "Received: gradient_accumulation_count=None")
    if tf.is_tensor(count) or isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise PipelineError("The pipeline's gradient_accumulation_count expected a positive "
                            f"Python int. Received: gradient_accumulation_count={count!r}")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise PipelineError(f"pipeline() expected repeat_count to be a positive int. "
                            f"Received: repeat_count={repeat!r}")
    if mapping is None:
        mapping = list(range(len(stages)))
    if not isinstance(mapping, list):
        raise TypeError(f"device_mapping argument needs to be a list. Received: "
                        f"device_mapping={mapping!r}")
    if len(mapping) != len(stages):
        raise PipelineError(f"Each stage must be mapped to an IPU: {len(mapping)} mappings != "
                            f"{len(stages)} stages. Received: device_mapping={mapping!r}")
    schedule = PipelineSchedule.Grouped if schedule is None else PipelineSchedule(schedule)
    training = optimizer_function is not None
    if (schedule == PipelineSchedule.Interleaved and training
            and len(set(mapping)) != len(mapping)):
        raise NotImplementedError(
            "The Interleaved pipeline schedule does not support training with several stages "
            f"on one IPU. Received: device_mapping={mapping!r}. Use the Grouped schedule.")
    if serialization != 1 or continuous:
        raise NotImplementedError(
            "batch_serialization_iterations > 1 and continuous_weight_updates are not "
            f"simulated. Received: batch_serialization_iterations={serialization!r}, "
            f"continuous_weight_updates={continuous!r}")
    check_depth(count, schedule, len(stages), training, mapping)
    if outfeed_mask is not None and (outfeed_loss or not training):
        raise PipelineError(
            "outfeed_mask expected a training pipeline without outfeed_loss. Received: "
            f"outfeed_mask={outfeed_mask!r}, outfeed_loss={outfeed_loss!r}, "
            f"optimizer_function={optimizer_function!r}")
    if outfeed_loss and not training:
        raise PipelineError("outfeed_loss expected a training pipeline (an optimizer_function)."
                            " Received: optimizer_function=None")
    reduction = GradientAccumulationReductionMethod.parse(reduction_method)
    return _Options(list(stages), count, repeat, mapping, schedule, training, reduction,
                    bool(outfeed_loss), outfeed_mask, bool(accumulate_outfeed), 0)


def recomputation_value(mode):
    """The value of a `RecomputationMode` given as a member, its value or its name (None:
    Auto)."""
    try:
        name = recomputation_name(mode)
    except ValueError:
        raise PipelineError("pipeline() expected recomputation_mode to be a "
                            "RecomputationMode. Received: "
                            f"recomputation_mode={mode!r}") from None
    return RecomputationMode[name].value


def _stage_options(forward, backward):
    """{"forward": [{"matmul": {...}, "conv": {...}}, ...], "backward": [...]} for the
    planner (per stage and pass), or None."""
    table = {}
    for name, options in (("forward", forward), ("backward", backward)):
        if options:
            table[name] = [{"matmul": o.matmul_options, "conv": o.convolution_options}
                           for o in options]
    return table or None


def _check_stage_options(forward, backward, weight_update, num_stages):
    for name, options in (("forward_propagation_stages_poplar_options", forward),
                          ("backward_propagation_stages_poplar_options", backward)):
        if options is None:
            continue
        if not isinstance(options, list) or len(options) != num_stages:
            raise PipelineError(
                f"{name} must be a list with one PipelineStageOptions per stage: "
                f"{len(options) if isinstance(options, list) else options!r} != {num_stages} "
                f"stages.")
        if not all(isinstance(o, PipelineStageOptions) for o in options):
            raise TypeError(f"{name} expected PipelineStageOptions. Received: {options!r}")
    if weight_update is not None and not isinstance(weight_update, PipelineStageOptions):
        raise TypeError("weight_update_poplar_options expected a PipelineStageOptions. "
                        f"Received: weight_update_poplar_options={weight_update!r}")


__all__ = [
    "GradientAccumulationReductionMethod", "OptimizerFunctionOutput", "PipelineSchedule",
    "PipelineStageOptions", "RecomputationMode", "pipeline", "recomputation_checkpoint",
]
