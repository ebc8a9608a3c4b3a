"""Keras pipelining: stage assignments, `set_pipelining_options` and their rules.

A pipelined Keras model is the same model with the same gradient accumulation
(`keras/accumulation.py`): micro-batches accumulate and the weights update once per
`gradient_accumulation_steps_per_replica` of them. What pipelining adds is placement:
while a pipelined model's step is traced, `placed_layers` wraps each layer's `call` in
`scopes.pipeline_stage(k)` and `scopes.ipu_shard(device_mapping[k])`, so every op of the
layer (and, through the tracer, its gradient) carries its stage and IPU; the compiler's
passes turn the stages into the schedule's program and time. Numerics never depend on
the schedule.

This module owns the stored options and assignments (attributes `_ipu_pipelining` and
`_ipu_pipeline_assignment` on the model), the original's validation rules and messages
(assignment order and dependencies, the keyword rules of `set_pipelining_options`, the
depth rule, the device size) and the assignment summary table. `PipelineStage` and the
assignment records are in `keras/pipeline_stage.py`.
"""
import contextlib
import dataclasses
import functools

import keras
from keras.src.backend.tensorflow.trainer import TensorFlowTrainer
from keras.src.layers.core.input_layer import InputLayer
from keras.src.models.functional import Functional

from ipu_keras._src.device import config as ipu_config
from ipu_keras._src import placement
from ipu_keras.errors import AccumulationStepsError, PipelineStageAssignmentError
from ipu_keras._src.keras.gradient_accumulation import GradientAccumulationReductionMethod
from ipu_keras._src.keras import pipeline_stage as ps

_OPTIONS_ATTR = "_ipu_pipelining"
_ASSIGNMENT_ATTR = "_ipu_pipeline_assignment"
SCHEDULES = placement.SCHEDULES
_EXPLICIT = {"gradient_accumulation_count": "gradient_accumulation_steps_per_replica",
             "device_mapping": "device_mapping", "accumulate_outfeed": "accumulate_outfeed"}
_AUTOMATIC = ("computational_stages", "repeat_count", "inputs", "infeed_queue",
              "outfeed_queue", "optimizer_function")
_INVALID = ("outfeed_loss", "outfeed_mask", "batch_serialization_iterations")


@dataclasses.dataclass
class PipeliningOptions:
    steps: int = None
    device_mapping: list = None
    accumulate_outfeed: bool = None
    reduction_method: GradientAccumulationReductionMethod = (
        GradientAccumulationReductionMethod.SUM)
    kwargs: dict = dataclasses.field(default_factory=dict)

    @property
    def schedule(self):
        """The pipeline schedule's name: 'Grouped' (default), 'Interleaved' or 'Sequential'."""
        return schedule_name(self.kwargs.get("pipeline_schedule"))

    @property
    def recomputation(self):
        """The recomputation mode's name (`placement.RECOMPUTATION_MODES`; default Auto)."""
        return recomputation_name(self.kwargs.get("recomputation_mode"))


def options(model):
    return getattr(model, _OPTIONS_ATTR, None) or PipeliningOptions()


def schedule_name(schedule):
    """The name of a `PipelineSchedule` member, its int value or its name."""
    return _member_name(schedule, SCHEDULES, "pipeline_schedule", "PipelineSchedule",
                        "set_pipelining_options expected")


def recomputation_name(mode):
    """The name of a `RecomputationMode` given as a member, its value or its name (None:
    Auto)."""
    return _member_name(mode, placement.RECOMPUTATION_MODES, "recomputation_mode",
                        "RecomputationMode", "Expected")


def _member_name(given, names, option, enum_name, expected):
    """The one of `names` that `given` is: an enum member, its value (an index into
    `names`) or its name in any case; None is the first.

    Raises:
        ValueError: naming `option`, if `given` is none of them.
    """
    if given is None:
        return names[0]
    name = getattr(given, "name", given)
    if isinstance(name, int) and not isinstance(name, bool) and 0 <= name < len(names):
        return names[name]
    for known in names:
        if isinstance(name, str) and name.lower() == known.lower():
            return known
    raise ValueError(f"{expected} `{option}` to be a {enum_name} ({', '.join(names)}). "
                     f"Received: {option}={given!r}.")


def set_pipelining_options(model, gradient_accumulation_steps_per_replica=None,
                           device_mapping=None, accumulate_outfeed=None,
                           gradient_accumulation_reduction_method="sum", **pipelining_kwargs):
    """Validates and stores the options (see `IPUTrainerMixin.set_pipelining_options`)."""
    stored = dataclasses.replace(options(model))
    stored.reduction_method = GradientAccumulationReductionMethod.parse(
        gradient_accumulation_reduction_method)
    if gradient_accumulation_steps_per_replica is not None:
        stored.steps = positive_steps(gradient_accumulation_steps_per_replica)
    if device_mapping is not None:
        if not isinstance(device_mapping, list) or not all(
                isinstance(x, int) and not isinstance(x, bool) and x >= 0
                for x in device_mapping):
            raise ValueError("Expected `device_mapping` to be a list of integers. "
                             f"Received: device_mapping={device_mapping!r}.")
        stored.device_mapping = list(device_mapping)
    if accumulate_outfeed is not None:
        stored.accumulate_outfeed = bool(accumulate_outfeed)
    if pipelining_kwargs:
        _check_pipelining_kwargs(pipelining_kwargs)
        stored.kwargs = dict(pipelining_kwargs)
    object.__setattr__(model, _OPTIONS_ATTR, stored)
    _reset_functions(model)


def positive_steps(steps):
    """`gradient_accumulation_steps_per_replica`, checked as both option setters do."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(
            "Expected `gradient_accumulation_steps_per_replica` to be a positive integer, but "
            f"got {steps} instead. Received: gradient_accumulation_steps_per_replica={steps!r}."
        )
    return steps


def _check_pipelining_kwargs(kwargs):
    for key, alternative in _EXPLICIT.items():
        if key in kwargs:
            raise ValueError(f"Found `{key}` key in `pipelining_kwargs`. Set the "
                             f"`{alternative}` argument to `set_pipelining_options` instead.")
    for key in _AUTOMATIC:
        if key in kwargs:
            raise ValueError(f"Found `{key}` key in `pipelining_kwargs`. This argument is "
                             "automatically set by Keras.")
    for key in _INVALID:
        if key in kwargs:
            raise ValueError(f"Found `{key}` key in `pipelining_kwargs`. This argument is not "
                             "compatible with Keras.")
    if "experimental_normalize_gradients" in kwargs:
        raise ValueError("Found `experimental_normalize_gradients` argument to "
                         "`set_pipelining_options`. This argument has now been removed, use "
                         "`gradient_accumulation_reduction_method` instead.")
    schedule_name(kwargs.get("pipeline_schedule"))
    recomputation_name(kwargs.get("recomputation_mode"))


def _reset_functions(model):
    model.train_function = model.test_function = model.predict_function = None


# Assignments -----------------------------------------------------------------------------

def _kind(model):
    if isinstance(model, keras.Sequential):
        return "sequential"
    if isinstance(model, Functional):
        return "functional"
    return "model"


def _nodes(model):
    """The functional model's layer calls in execution (post) order, inputs left out."""
    by_depth = model._nodes_by_depth
    return [node for depth in sorted(by_depth, reverse=True) for node in by_depth[depth]
            if not isinstance(node.operation, InputLayer)]


def _recorded_stage(*objects):
    for obj in objects:
        stage = getattr(obj, ps.STAGE_ATTR, None)
        if stage is not None:
            return stage
    return None


def recorded_assignment(model):
    """Assignments from the `PipelineStage` scopes the model was built in (unset: None)."""
    kind = _kind(model)
    if kind == "sequential":
        return [ps.SequentialLayerPipelineStageAssignment(layer, _recorded_stage(layer))
                for layer in model.layers]
    if kind == "functional":
        return [ps.FunctionalLayerPipelineStageAssignment(
            node.operation, node.operation._inbound_nodes.index(node),
            _recorded_stage(node, node.operation)) for node in _nodes(model)]
    layers = model._flatten_layers(include_self=False, recursive=False)
    return [ps.ModelLayerPipelineStageAssignment(layer, 0, _recorded_stage(layer))
            for layer in layers]


def get_pipeline_stage_assignment(model):
    stored = getattr(model, _ASSIGNMENT_ATTR, None)
    if stored:
        return [_copy(a) for a in stored]
    return recorded_assignment(model)


def _copy(assignment):
    copy = object.__new__(type(assignment))
    copy.__dict__.update(assignment.__dict__)
    return copy


def set_pipeline_stage_assignment(model, pipeline_stage_assignment):
    if not isinstance(pipeline_stage_assignment, list):
        raise PipelineStageAssignmentError(
            "`pipeline_stage_assignment` needs to be a list. Received: "
            f"pipeline_stage_assignment={type(pipeline_stage_assignment).__name__}.")
    template = recorded_assignment(model)
    if len(pipeline_stage_assignment) != len(template):
        raise PipelineStageAssignmentError(
            f"The length of the provided `pipeline_stage_assignment` "
            f"({len(pipeline_stage_assignment)}) does not match the number of layers in the "
            f"graph ({len(template)}). Each layer needs to be assigned a pipeline stage "
            "(excluding input layers).")
    assignment = []
    for given, expected in zip(pipeline_stage_assignment, template):
        if isinstance(given, int) and not isinstance(given, bool):
            given = _with_stage(expected, given)
        elif not isinstance(given, type(expected)):
            raise PipelineStageAssignmentError(
                f"The pipeline stage assignment for layer {expected.layer.name} in "
                f"{model.name} must be an instance of `{type(expected).__name__}` (or an int). "
                f"Instead the assignment was of type {type(given).__name__}.")
        elif given.layer is not expected.layer:
            raise PipelineStageAssignmentError(
                "The order of `pipeline_stage_assignment` does not match the post-order "
                f"generated from the graph ({given.layer.name} != {expected.layer.name}).")
        assignment.append(given)
    validate(model, assignment)
    object.__setattr__(model, _ASSIGNMENT_ATTR, [_copy(a) for a in assignment])
    _reset_functions(model)


def _with_stage(assignment, stage):
    assignment = _copy(assignment)
    assignment.pipeline_stage = stage
    return assignment


def reset_pipeline_stage_assignment(model):
    object.__setattr__(model, _ASSIGNMENT_ATTR, [])
    for obj in [a.layer for a in recorded_assignment(model)] + (
            _nodes(model) if _kind(model) == "functional" else []):
        if hasattr(obj, ps.STAGE_ATTR):
            object.__delattr__(obj, ps.STAGE_ATTR)
    _reset_functions(model)


def validate(model, assignment):
    """The original's rules: every layer has a stage; Sequential stages start at 0 and
    step by at most 1; a layer only uses outputs of its own or earlier stages."""
    for a in assignment:
        stage = a.pipeline_stage
        if stage is None:
            raise PipelineStageAssignmentError(
                f"All layers of a pipelined model must have an associated pipeline stage. "
                f"However, {a.layer.name} has not been assigned to one. Pipeline stages can be "
                "assigned when a layer is constructed, or each time a layer is called.")
        if isinstance(stage, bool) or not isinstance(stage, int) or stage < 0:
            raise PipelineStageAssignmentError(
                f"Layer {a.layer.name} expected a non-negative int pipeline stage. Received: "
                f"pipeline_stage={stage!r}.")
    if _kind(model) == "sequential":
        _validate_sequential(assignment)
    elif _kind(model) == "functional":
        _validate_dependencies(model, assignment)


def _validate_sequential(assignment):
    previous = 0
    for i, a in enumerate(assignment):
        if i == 0 and a.pipeline_stage != 0:
            raise PipelineStageAssignmentError(
                "The first layer in a pipelined sequential model needs to be assigned to the "
                f"0th pipeline stage, however it was assigned to {a.pipeline_stage}.")
        if a.pipeline_stage not in (previous, previous + 1):
            raise PipelineStageAssignmentError(
                f"Layer {a.layer.name} has been assigned to pipeline stage {a.pipeline_stage}, "
                f"however the previous layer in the Sequential model was assigned to pipeline "
                f"stage {previous}. A layer in a Sequential model can only be assigned to the "
                "same pipeline stage as the previous layer or to the next pipeline stage.")
        previous = a.pipeline_stage


def _validate_dependencies(model, assignment):
    stage_of = {id(node): a.pipeline_stage for node, a in zip(_nodes(model), assignment)}
    for node, a in zip(_nodes(model), assignment):
        for parent in node.parent_nodes:
            if stage_of.get(id(parent), 0) > a.pipeline_stage:
                raise PipelineStageAssignmentError(
                    f"Layer {a.layer.name} in pipeline stage {a.pipeline_stage} has a "
                    f"dependency from a pipeline stage which has not yet been executed "
                    f"(layer {parent.operation.name}, pipeline stage "
                    f"{stage_of[id(parent)]}). Layers can only use outputs from current or "
                    "previous pipeline stages.")


def assignment_in_use(model):
    """The model's assignment (set, or recorded from PipelineStage scopes); [] if none."""
    stored = getattr(model, _ASSIGNMENT_ATTR, None)
    if stored:
        return stored
    recorded = recorded_assignment(model)
    if any(a.pipeline_stage is not None for a in recorded):
        return recorded
    return []


def is_pipelined(model):
    return bool(assignment_in_use(model))


def stage_count(model):
    return max(a.pipeline_stage for a in assignment_in_use(model)) + 1


def device_mapping(model):
    return options(model).device_mapping or list(range(stage_count(model)))


# Fit, evaluate and predict --------------------------------------------------------------

def check_model(model, kind, accumulation):
    """The rules a pipelined model must meet before its `kind` step is compiled."""
    in_use = assignment_in_use(model)
    current = [a.layer for a in recorded_assignment(model)]
    if [a.layer for a in in_use] != current:
        raise PipelineStageAssignmentError(
            f"The pipeline stage assignment of {model.name} no longer matches its layers "
            f"(layers were added or removed since it was set): expected {len(current)} "
            f"assignments. Received: {len(in_use)}. Call set_pipeline_stage_assignment again.")
    validate(model, in_use)
    _check_overrides(model, kind)
    stages, mapping = stage_count(model), device_mapping(model)
    if len(mapping) != stages:
        raise ValueError(f"Each stage must be mapped to an IPU: {len(mapping)} mappings != "
                         f"{stages} stages. Received: device_mapping={mapping}.")
    _check_device_size(mapping)
    schedule = options(model).schedule
    if kind == "train":
        if accumulation is None or options(model).steps is None:
            raise ValueError(
                "The model which you are attempting to train is pipelined, however "
                "`gradient_accumulation_steps_per_replica` has not been set through "
                "`set_pipelining_options()`. You need to set this value as pipelined models "
                "will perform gradient accumulation when training.")
        check_depth(options(model).steps, overlap_length(schedule, stages, True))
    else:
        check_depth(model.steps_per_execution, overlap_length(schedule, stages, False))


def _check_overrides(model, kind):
    name = f"{kind}_step"
    if getattr(type(model), name) is not getattr(TensorFlowTrainer, name):
        raise AccumulationStepsError(
            f"The function `{name}` for the model {model.name} has been overridden. This is "
            "not supported for pipelined models, expected the Keras step. Received: a custom "
            f"{name}. Either remove the override or reset the pipeline stage assignment.")


def _check_device_size(mapping):
    shards = 1
    while shards < max(mapping) + 1:
        shards *= 2
    requested = ipu_config.get_active_config().auto_select_ipus
    ipus = sum(requested) if isinstance(requested, list) else requested
    ipus = max(1, ipus or 0)
    if shards > ipus:
        raise ValueError(
            f"Current device has {ipus} IPUs attached, however the current model requires a "
            f"multiple of {shards} IPUs. Set `IPUConfig.auto_select_ipus` to a multiple of "
            f"{shards}. Received: auto_select_ipus={requested!r}.")


def overlap_length(schedule, stages, training):
    """How many micro-batches the schedule overlaps: the depth must be a multiple of it."""
    if schedule == "Sequential":
        return 1
    if schedule == "Grouped" and training:
        return 2 * stages
    return stages


def check_depth(depth, length):
    if depth < length or depth % length:
        raise AccumulationStepsError(
            f"The number of iterations of the pipeline must be a multiple of {length} and at "
            f"least {length}, but it is {depth}. This number might be called "
            "`gradient_accumulation_count`, `gradient_accumulation_steps_per_replica` or "
            "`steps_per_execution` depending on the API used. Received: "
            f"depth={depth}.")


def layer_stages(model):
    """{id(layer): (layer, stage)} of a pipelined model; a layer keeps one stage."""
    stages = {}
    for a in assignment_in_use(model):
        known = stages.get(id(a.layer))
        if known is not None and known[1] != a.pipeline_stage:
            raise PipelineStageAssignmentError(
                f"Layer {a.layer.name} is called on pipeline stages {known[1]} and "
                f"{a.pipeline_stage}: expected every call of a layer on one stage here. "
                "Received: a shared layer on two stages; use two layers.")
        stages[id(a.layer)] = (a.layer, a.pipeline_stage)
    return stages


@contextlib.contextmanager
def placed_layers(model):
    """While open, each layer call of `model` runs in its stage's placement scopes."""
    mapping = device_mapping(model)

    @contextlib.contextmanager
    def place(stage):
        with placement.pipeline_stage(stage), placement.ipu_shard(mapping[stage]):
            yield

    patched = []
    try:
        for layer, stage in layer_stages(model).values():
            object.__setattr__(layer, "call", _placed_call(layer.call, place, stage))
            patched.append(layer)
        with ps.placing(place):
            yield
    finally:
        for layer in patched:
            del layer.__dict__["call"]


def _placed_call(call, place, stage):
    @functools.wraps(call)
    def placed(*args, **kwargs):
        with place(stage):
            return call(*args, **kwargs)

    return placed


def print_summary(model, line_length=None, print_fn=None):
    """The assignment table of the original: a row per layer call with its stage."""
    print_fn = print_fn or print
    sequential = _kind(model) == "sequential"
    line_length = line_length or (60 if sequential else 89)
    headers = (["Layer (type)", "Pipeline Stage"] if sequential
               else ["Layer (type) (node index)", "Input Layers", "Pipeline Stage"])
    widths = [.5, 1.] if sequential else [.4, .8, 1.]
    positions = [int(line_length * w) for w in widths]

    def row(fields):
        line = ""
        for i, field in enumerate(fields):
            line = (line[:-1] + " " if i else line) + str(field)
            line = line[:positions[i]].ljust(positions[i])
        print_fn(line.rstrip())

    print_fn(f'Model: "{model.name}"')
    print_fn("_" * line_length)
    row(headers)
    print_fn("=" * line_length)
    assignment = get_pipeline_stage_assignment(model)
    for i, a in enumerate(assignment):
        name = f"{a.layer.name} ({type(a.layer).__name__})"
        if sequential:
            row([name, a.pipeline_stage])
        else:
            inbound = ", ".join(layer.name for layer in a.inbound_layers)
            row([f"{name} ({a.node_index})", inbound, a.pipeline_stage])
        print_fn(("=" if i == len(assignment) - 1 else "_") * line_length)
