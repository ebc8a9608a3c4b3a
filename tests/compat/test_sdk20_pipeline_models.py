"""SDK 2.0-2.1's `ipu.keras.PipelineSequential` and `ipu.keras.PipelineModel`.

An SDK 2.1-style script (an MLP over 2 stages, `gradient_accumulation_count=4`, `compile`
without `steps_per_execution`, `fit`) equals the same model built with today's API
(`set_pipeline_stage_assignment` + `set_pipelining_options`) and Keras on the CPU with
batches 4 times larger (SDK 2.1 summed the gradients of a window, so the CPU's SGD has a
learning rate 4 times larger); each class warns once; bad arguments raise the original's
errors.
"""
import warnings

import keras
import numpy as np
import pytest

import ipu_keras as ipu
from tests.conftest import configured_ipus
from ipu_keras.errors import PipelineStageAssignmentError
from ipu_keras._src.keras import sdk20_pipeline

from tests.keras.common import (
    CLASSES, SHAPE, _layers, assert_history_equal, assert_weights_equal, train_val,
)

G, MICRO, LR = 4, 8, 0.05


@pytest.fixture(autouse=True, scope="module")
def two_ipus():
    yield from configured_ipus(2)


@pytest.fixture(scope="module")
def data():
    (x, y), _ = train_val()
    return x[:192], y[:192]  # 24 micro-batches: 6 windows of 4


def _compile(model, lr=LR, **kwargs):
    model.compile(keras.optimizers.SGD(lr), "sparse_categorical_crossentropy", **kwargs)
    return model


def _fit(model, data, batch_size=MICRO):
    return model.fit(*data, epochs=2, batch_size=batch_size, shuffle=False, verbose=0)


def _sequential_stages():
    layers = _layers("mlp")
    return [layers[:-1], layers[-1:]]


def _functional_in_stages(build):
    inputs = keras.Input(SHAPE)
    layers = _layers("mlp")
    with ipu.keras.PipelineStage(0):
        hidden = layers[1](layers[0](inputs))
    with ipu.keras.PipelineStage(1):
        outputs = layers[2](hidden)
    return build(inputs, outputs)


def _assert_same_training(old, new, data):
    """`old` (SDK 2.1 class) equals `new` (today's API) and Keras on the CPU (4x batches)."""
    on_cpu = keras.Sequential([keras.Input(SHAPE)] + _layers("mlp"))
    new.set_weights(old.get_weights())
    on_cpu.set_weights(old.get_weights())
    history = _fit(old, data)
    assert_history_equal(history, _fit(new, data))
    assert_weights_equal(old.get_weights(), new.get_weights())
    _fit(_compile(on_cpu, LR * G), data, MICRO * G)
    assert_weights_equal(old.get_weights(), on_cpu.get_weights())


def test_pipeline_sequential_script_equals_todays_api_and_keras(data, fresh_warnings):
    stages = _sequential_stages()
    stages[0].insert(0, keras.layers.InputLayer(SHAPE))
    with pytest.warns(DeprecationWarning, match="PipelineSequential"):
        old = _compile(ipu.keras.PipelineSequential(stages, gradient_accumulation_count=G))
    assert old.steps_per_execution == G
    assert [a.pipeline_stage for a in old.get_pipeline_stage_assignment()] == [0, 0, 1]
    new = ipu.Sequential([keras.Input(SHAPE)] + _layers("mlp"))
    new.set_pipeline_stage_assignment([0, 0, 1])
    new.set_pipelining_options(gradient_accumulation_steps_per_replica=G)
    _assert_same_training(old, _compile(new, steps_per_execution=G), data)


def test_pipeline_model_script_equals_todays_api_and_keras(data, fresh_warnings):
    with pytest.warns(DeprecationWarning, match="PipelineModel"):
        old = _functional_in_stages(
            lambda i, o: ipu.keras.PipelineModel(inputs=i, outputs=o,
                                                 gradient_accumulation_count=G))
    _compile(old)
    new = _functional_in_stages(ipu.Model)
    new.set_pipelining_options(gradient_accumulation_steps_per_replica=G)
    _assert_same_training(old, _compile(new, steps_per_execution=G), data)


def test_options_come_from_the_constructor():
    model = ipu.keras.PipelineSequential(
        _sequential_stages(), gradient_accumulation_count=2, batch_serialization_iterations=2,
        device_mapping=[1, 0], pipeline_schedule=ipu.pipelining_ops.PipelineSchedule.Sequential,
        offload_activations=False, weight_update_poplar_options=None)
    options = model._ipu_pipelining
    assert options.steps == 4 and options.device_mapping == [1, 0]
    assert options.schedule == "Sequential"
    assert model.gradient_accumulation_count == 2 and model.device_mapping == [1, 0]


def test_each_class_warns_once(fresh_warnings):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            ipu.keras.PipelineSequential(_sequential_stages(), gradient_accumulation_count=G)
            _functional_in_stages(lambda i, o: ipu.keras.PipelineModel(
                i, o, gradient_accumulation_count=G))
    ours = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert [w.filename for w in ours] == [__file__] * 2  # points at the caller's line
    said = [str(w.message) for w in ours]
    assert said[0].startswith("`ipu.keras.PipelineSequential` is deprecated")
    assert "set_pipeline_stage_assignment" in said[0]
    assert said[1].startswith("`ipu.keras.PipelineModel` is deprecated")
    assert "PipelineStage" in said[1] and "set_pipelining_options" in said[1]
    assert ipu.keras.PipelineModel is sdk20_pipeline.PipelineModel


def _unstaged_model():
    inputs = keras.Input(SHAPE)
    with ipu.keras.PipelineStage(0):
        hidden = keras.layers.Flatten()(inputs)
    return ipu.keras.PipelineModel(inputs, keras.layers.Dense(CLASSES)(hidden),
                                   gradient_accumulation_count=G)


def _backwards_model():
    inputs = keras.Input(SHAPE)
    with ipu.keras.PipelineStage(1):
        hidden = keras.layers.Flatten()(inputs)
    with ipu.keras.PipelineStage(0):
        outputs = keras.layers.Dense(CLASSES)(hidden)
    return ipu.keras.PipelineModel(inputs, outputs, gradient_accumulation_count=G)


@pytest.mark.parametrize("build,error,match", [
    (lambda: ipu.keras.PipelineSequential([], gradient_accumulation_count=G), ValueError,
     "must take a non-empty list of stages"),
    (lambda: ipu.keras.PipelineSequential([keras.layers.Dense(2)],
                                          gradient_accumulation_count=G),
     ValueError, "may only contain lists of stages"),
    (lambda: ipu.keras.PipelineSequential([[keras.layers.Dense(2), "relu"]],
                                          gradient_accumulation_count=G),
     ValueError, "must contain only Keras Layers"),
    (lambda: ipu.keras.PipelineSequential(_sequential_stages(),
                                          gradient_accumulation_count=0),
     ValueError, "gradient_accumulation_steps_per_replica` to be a positive integer"),
    (lambda: ipu.keras.PipelineSequential(_sequential_stages()), TypeError,
     "gradient_accumulation_count"),
    (_unstaged_model, PipelineStageAssignmentError, "must have an associated pipeline stage"),
    (_backwards_model, PipelineStageAssignmentError, "has a dependency from a pipeline stage"),
])
def test_bad_arguments_raise_the_originals_errors(build, error, match):
    with pytest.raises(error, match=match):
        build()
