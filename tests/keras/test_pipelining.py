"""The Keras pipelining API: stage assignments, `PipelineStage`, `set_pipelining_options`.

A pipelined model is the same model with the same accumulation, each layer's ops placed on
its stage's IPU. Two-stage pipelines of the MLP and the CNN, Sequential (set by a list) and
functional (built in `PipelineStage` scopes), micro-batches of 8 accumulated 4 at a time
with MEAN: equal to Keras on the CPU with batches of 32 and to the unpipelined model with
the same accumulation. Every rule of the original, with its message.
"""
import io

import numpy as np
import pytest
import keras

import ipu_keras as ipu
from tests.conftest import configured_ipus
from ipu_keras import scopes
from ipu_keras.errors import AccumulationStepsError, PipelineStageAssignmentError
from ipu_keras._src.conformance import tolerances as T

from tests.keras.common import (
    CLASSES, SHAPE, _layers, assert_history_equal, assert_logs_equal, assert_weights_equal,
    build_pair, compile_model, train_val,
)

G, MICRO = 4, 8


@pytest.fixture(autouse=True, scope="module")
def two_ipus():
    yield from configured_ipus(2)


@pytest.fixture(scope="module")
def data():
    return train_val()


def _functional_in_stages(arch, base="ipu"):
    """The model of `arch`, its last layer called in PipelineStage(1), the rest in stage 0."""
    layers = _layers(arch)
    inputs = keras.Input(SHAPE)
    outputs = inputs
    with ipu.keras.PipelineStage(0):
        for layer in layers[:-1]:
            outputs = layer(outputs)
    with ipu.PipelineStage(1):
        outputs = layers[-1](outputs)
    return (ipu.Model if base == "ipu" else keras.Model)(inputs, outputs)


def _pipelined_pair(arch, form):
    if form == "sequential":
        on_ipu, on_cpu = build_pair(arch, form, "sgd", steps_per_execution=8)
        on_ipu.set_pipeline_stage_assignment([0] * (len(on_ipu.layers) - 1) + [1])
        return on_ipu, on_cpu
    keras.utils.set_random_seed(1)
    on_ipu = compile_model(_functional_in_stages(arch), "sgd", steps_per_execution=8)
    keras.utils.set_random_seed(1)
    on_cpu = compile_model(_functional_in_stages(arch, "keras"), "sgd", steps_per_execution=8)
    on_cpu.set_weights(on_ipu.get_weights())
    return on_ipu, on_cpu


def _configure(num_ipus):
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = num_ipus
    cfg.configure_ipu_system()


def _fit(model, x, y, val, batch_size):
    return model.fit(x, y, epochs=2, batch_size=batch_size, shuffle=False,
                     validation_data=val, verbose=0)


@pytest.mark.parametrize("arch,form", [
    ("mlp", "sequential"), ("mlp", "functional"),
    pytest.param("cnn", "sequential", marks=pytest.mark.slow),
    pytest.param("cnn", "functional", marks=pytest.mark.slow),
])
def test_pipelined_equals_accumulated_and_keras(data, arch, form):
    (x, y), val = data
    pipelined, on_cpu = _pipelined_pair(arch, form)
    pipelined.set_pipelining_options(gradient_accumulation_steps_per_replica=G,
                                     gradient_accumulation_reduction_method="mean")
    accumulated, _ = _pipelined_pair(arch, form)
    accumulated.set_weights(pipelined.get_weights())
    accumulated.reset_pipeline_stage_assignment()
    assert not any(a.pipeline_stage for a in accumulated.get_pipeline_stage_assignment())
    accumulated.set_gradient_accumulation_options(
        gradient_accumulation_steps_per_replica=G, gradient_accumulation_reduction_method="mean")
    history = _fit(pipelined, x, y, val, MICRO)
    assert_history_equal(history, _fit(on_cpu, x, y, val, MICRO * G))
    assert_weights_equal(pipelined.get_weights(), on_cpu.get_weights())
    # On one IPU: on the module's two, the unpipelined model would run as two replicas.
    _configure(1)
    try:
        assert_history_equal(history, _fit(accumulated, x, y, val, MICRO))
    finally:
        _configure(2)
    assert_weights_equal(pipelined.get_weights(), accumulated.get_weights())
    assert_logs_equal(pipelined.evaluate(*val, batch_size=MICRO, verbose=0),
                      on_cpu.evaluate(*val, batch_size=MICRO, verbose=0))
    np.testing.assert_allclose(pipelined.predict(val[0], batch_size=MICRO, verbose=0),
                               on_cpu.predict(val[0], batch_size=MICRO, verbose=0),
                               **T.FLOAT32.kwargs)


class Where(keras.layers.Layer):
    """Identity that records the placement scopes open while it is traced."""

    seen = []

    def call(self, inputs):
        Where.seen.append((scopes.current_stage(), scopes.current_shard()))
        return inputs


def test_each_layer_is_placed_on_its_stage_and_ipu(data):
    (x, y), _ = data
    model = ipu.Sequential([keras.Input(SHAPE), keras.layers.Flatten(), Where(),
                            keras.layers.Dense(CLASSES, activation="softmax"), Where()])
    compile_model(model, "sgd", steps_per_execution=8)
    model.set_pipeline_stage_assignment([0, 0, 1, 1])
    model.set_pipelining_options(gradient_accumulation_steps_per_replica=4,
                                 device_mapping=[1, 0])
    Where.seen.clear()
    model.fit(x[:64], y[:64], batch_size=MICRO, verbose=0)
    assert set(Where.seen) == {(0, 1), (1, 0)}
    Where.seen.clear()
    model(x[:2])  # calling the model directly ignores the assignment
    assert set(Where.seen) == {(None, None)}
    assert "call" not in model.layers[1].__dict__


def test_pipeline_stage_in_a_subclassed_call_places_the_ops(data):
    (x, y), _ = data

    class TwoStages(ipu.Model):
        def __init__(self):
            super().__init__()
            self.first, self.second = keras.layers.Flatten(), keras.layers.Dense(CLASSES)
            self.where = [Where(), Where()]

        def call(self, inputs):
            with ipu.keras.PipelineStage(0):
                h = self.where[0](self.first(inputs))
            with ipu.keras.PipelineStage(1):
                return self.where[1](self.second(h))

    model = TwoStages()
    model(x[:1])
    compile_model(model, "sgd", steps_per_execution=4)
    assert len(model.get_pipeline_stage_assignment()) == 4  # first, second, the Wheres
    model.set_pipeline_stage_assignment([0, 1, 0, 1])
    model.set_pipelining_options(gradient_accumulation_steps_per_replica=4,
                                 pipeline_schedule="Grouped")
    Where.seen.clear()
    model.fit(x[:32], y[:32], batch_size=MICRO, verbose=0)
    assert set(Where.seen) == {(0, 0), (1, 1)}


def test_functional_assignment_round_trip_and_summary():
    model = _functional_in_stages("mlp")
    assignment = model.get_pipeline_stage_assignment()
    assert [a.pipeline_stage for a in assignment] == [0, 0, 1]
    assert isinstance(assignment[0], ipu.keras.FunctionalLayerPipelineStageAssignment)
    assert [a.node_index for a in assignment] == [0, 0, 0]
    assert [layer.name for layer in assignment[1].inbound_layers] == [assignment[0].layer.name]
    assignment[1].pipeline_stage = 1
    model.set_pipeline_stage_assignment(assignment)
    assert [a.pipeline_stage for a in model.get_pipeline_stage_assignment()] == [0, 1, 1]
    lines = []
    model.print_pipeline_stage_assignment_summary(print_fn=lines.append)
    assert lines[0] == f'Model: "{model.name}"'
    assert lines[2].split() == ["Layer", "(type)", "(node", "index)", "Input", "Layers",
                                "Pipeline", "Stage"]
    assert lines[-2].split()[-1] == "1" and len(lines) == 10
    model.reset_pipeline_stage_assignment()
    assert [a.pipeline_stage for a in model.get_pipeline_stage_assignment()] == [None] * 3


def test_call_site_stage_takes_precedence_over_construction():
    inputs = keras.Input(SHAPE)
    with ipu.keras.PipelineStage(0):
        flatten, dense = keras.layers.Flatten(), keras.layers.Dense(4)
    hidden = flatten(inputs)
    with ipu.keras.PipelineStage(1):
        outputs = dense(hidden)
    model = ipu.Model(inputs, outputs)
    assert [a.pipeline_stage for a in model.get_pipeline_stage_assignment()] == [0, 1]


@pytest.mark.parametrize("assignment,error,match", [
    ([0, 1], PipelineStageAssignmentError, r"length .* \(2\) does not match .* \(3\)"),
    ([1, 1, 1], PipelineStageAssignmentError, "first layer .* assigned to 1"),
    ([0, 0, 2], PipelineStageAssignmentError, "assigned to pipeline stage 2, however the "
                                              "previous layer .* stage 0"),
    ("unassigned", PipelineStageAssignmentError, "must have an associated pipeline stage"),
    ("0,1", PipelineStageAssignmentError, "needs to be a list"),
    ([0, "a", 1], PipelineStageAssignmentError, "must be an instance of "
                                                 "`SequentialLayerPipelineStageAssignment`"),
])
def test_sequential_assignment_errors(assignment, error, match):
    model, _ = build_pair()
    if assignment == "unassigned":
        assignment = model.get_pipeline_stage_assignment()
    with pytest.raises(error, match=match):
        model.set_pipeline_stage_assignment(assignment)
    assert model.get_pipeline_stage_assignment()[0].pipeline_stage is None


def test_functional_dependency_error():
    model = _functional_in_stages("mlp")
    with pytest.raises(PipelineStageAssignmentError, match="has a dependency from a pipeline "
                                                           "stage which has not yet been"):
        model.set_pipeline_stage_assignment([1, 0, 1])


def test_functional_with_an_unassigned_layer(data):
    (x, y), _ = data
    inputs = keras.Input(SHAPE)
    with ipu.keras.PipelineStage(0):
        hidden = keras.layers.Flatten()(inputs)
    model = compile_model(ipu.Model(inputs, keras.layers.Dense(CLASSES)(hidden)))
    model.set_pipelining_options(gradient_accumulation_steps_per_replica=4)
    with pytest.raises(PipelineStageAssignmentError, match="dense.* has not been assigned"):
        model.fit(x[:32], y[:32], batch_size=MICRO, verbose=0)


def test_pipeline_stage_scope_errors():
    with pytest.raises(ValueError, match="-1 is not a valid pipeline stage"):
        with ipu.keras.PipelineStage(-1):
            pass
    with pytest.raises(RuntimeError, match="must not be nested"):
        with ipu.keras.PipelineStage(0), ipu.keras.PipelineStage(1):
            pass
    with ipu.keras.PipelineStage(0):  # the failed scope left nothing behind
        pass


@pytest.mark.parametrize("kwargs,match", [
    ({"gradient_accumulation_steps_per_replica": -2}, "positive integer, but got -2"),
    ({"device_mapping": (0, 1)}, "list of integers"),
    ({"gradient_accumulation_count": 4}, "Set the `gradient_accumulation_steps_per_replica`"),
    ({"repeat_count": 2}, "automatically set by Keras"),
    ({"outfeed_mask": [True]}, "not compatible with Keras"),
    ({"experimental_normalize_gradients": True}, "has now been removed"),
    ({"pipeline_schedule": "Zigzag"}, "PipelineSchedule .*Received: pipeline_schedule='Zigzag'"),
    ({"gradient_accumulation_reduction_method": "median"}, "SUM, MEAN, RUNNING_MEAN"),
])
def test_pipelining_option_errors(kwargs, match):
    model, _ = build_pair()
    with pytest.raises(ValueError, match=match):
        model.set_pipelining_options(**kwargs)


def _pipelined_mlp(stages=(0, 0, 1), steps_per_execution=8, **options):
    model, _ = build_pair(steps_per_execution=steps_per_execution)
    model.set_pipeline_stage_assignment(list(stages))
    if options:
        model.set_pipelining_options(**options)
    return model


@pytest.mark.parametrize("setup,error,match", [
    ({}, ValueError, "`gradient_accumulation_steps_per_replica` has not been set"),
    ({"gradient_accumulation_steps_per_replica": 2}, AccumulationStepsError,
     "must be a multiple of 4 and at least 4, but it is 2.*steps_per_execution"),
    ({"gradient_accumulation_steps_per_replica": 6, "steps_per_execution": 12},
     AccumulationStepsError, "multiple of 4 and at least 4, but it is 6"),
    ({"gradient_accumulation_steps_per_replica": 8, "steps_per_execution": 12},
     AccumulationStepsError, r"pipelined model .*\(set to 12\) is not divisible .* \(8\)"),
    ({"gradient_accumulation_steps_per_replica": 4, "device_mapping": [0]}, ValueError,
     "Each stage must be mapped to an IPU: 1 mappings != 2 stages"),
    ({"gradient_accumulation_steps_per_replica": 4, "device_mapping": [0, 2]}, ValueError,
     "has 2 IPUs attached, however the current model requires a multiple of 4 IPUs"),
])
def test_fit_errors(data, setup, error, match):
    (x, y), _ = data
    setup = dict(setup)
    model = _pipelined_mlp(steps_per_execution=setup.pop("steps_per_execution", 8), **setup)
    before = model.get_weights()
    with pytest.raises(error, match=match):
        model.fit(x[:64], y[:64], batch_size=MICRO, verbose=0)
    assert_weights_equal(model.get_weights(), before)


def test_adding_a_layer_invalidates_the_assignment(data):
    (x, y), _ = data
    model = _pipelined_mlp(gradient_accumulation_steps_per_replica=4)
    model.add(keras.layers.Dense(CLASSES, activation="softmax"))
    with pytest.raises(PipelineStageAssignmentError, match="no longer matches its layers.*"
                                                           "expected 4 assignments"):
        model.fit(x[:32], y[:32], batch_size=MICRO, verbose=0)


def test_interleaved_and_sequential_schedules_relax_the_depth(data):
    (x, y), _ = data
    interleaved = _pipelined_mlp(gradient_accumulation_steps_per_replica=2,
                                 steps_per_execution=2, pipeline_schedule="interleaved")
    interleaved.fit(x[:32], y[:32], batch_size=MICRO, verbose=0)
    assert int(interleaved.optimizer.iterations.numpy()) == 2
    sequential = _pipelined_mlp(gradient_accumulation_steps_per_replica=1,
                                steps_per_execution=1, pipeline_schedule=2)
    sequential.fit(x[:16], y[:16], batch_size=MICRO, verbose=0)
    assert int(sequential.optimizer.iterations.numpy()) == 2


def test_inference_depth_is_steps_per_execution(data):
    _, (x, y) = data
    model = _pipelined_mlp(steps_per_execution=3)
    with pytest.raises(AccumulationStepsError, match="multiple of 2 and at least 2, but it is 3"):
        model.evaluate(x, y, batch_size=MICRO, verbose=0)
    model.compile("sgd", "sparse_categorical_crossentropy", steps_per_execution=4)
    model.predict(x, batch_size=MICRO, verbose=0)  # 7 steps: executions of 4 and 3 run


def test_custom_step_of_a_pipelined_model(data):
    (x, y), _ = data

    class Custom(ipu.Sequential):
        def test_step(self, data):
            return super().test_step(data)

    model = Custom([keras.Input(SHAPE)] + _layers("mlp"))
    compile_model(model, steps_per_execution=2)
    model.set_pipeline_stage_assignment([0, 1, 1])
    with pytest.raises(AccumulationStepsError, match="`test_step` for the model .* overridden"):
        model.evaluate(x[:16], y[:16], batch_size=MICRO, verbose=0)
