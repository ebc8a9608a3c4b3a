"""`steps_per_execution` given as a tensor (`dataset.cardinality()`, an int64 variable), as
Graphcore's Keras accepted it: the model keeps the int, so every epoch runs (the progress
bar used to fail in the second epoch's first step dividing a time by an int64 tensor),
and training equals Keras trained with the same int. Values that are not a positive
integer are refused naming the value."""
import contextlib
import io

import numpy as np
import pytest
import tensorflow as tf
import keras

import ipu_keras as ipu
from ipu_keras.errors import ModelOptionError
from tests.keras.common import BATCH, assert_history_equal, build, build_pair, data


@pytest.fixture(scope="module")
def batches():
    x, y = data(6 * BATCH)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH, drop_remainder=True)


def test_cardinality_trains_every_epoch_as_keras_does(batches):
    steps = batches.cardinality()
    assert steps.dtype == tf.int64
    on_ipu, on_cpu = build_pair(steps_per_execution=3)
    on_ipu.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy",
                   metrics=["accuracy"], steps_per_execution=steps)
    assert on_ipu.steps_per_execution == 6 and type(on_ipu.steps_per_execution) is int
    assert on_ipu.get_compile_config()["steps_per_execution"] == 6
    with contextlib.redirect_stdout(io.StringIO()) as printed:   # the progress bar, verbose=1
        got = on_ipu.fit(batches, epochs=3, verbose=1, validation_data=batches)
    expected = on_cpu.fit(batches, epochs=3, verbose=0, validation_data=batches)
    assert "Epoch 3/3" in printed.getvalue()
    assert_history_equal(got, expected)
    assert on_ipu.ipu_report()["steps"] == 6   # one execution per epoch
    predictions = on_ipu.predict(batches, verbose=0)
    np.testing.assert_array_equal(predictions.shape, (6 * BATCH, 10))


@pytest.mark.parametrize("value", [tf.Variable(2, dtype=tf.int64), np.int64(2),
                                   np.array(2, np.int32), tf.constant(2, tf.int32)],
                         ids=["int64-variable", "numpy-int64", "numpy-0d", "int32-tensor"])
def test_integer_scalars_become_ints(value):
    model = build("mlp", "sequential", "ipu")
    model.compile(optimizer="sgd", loss="mse", steps_per_execution=value)
    assert model.steps_per_execution == 2 and type(model.steps_per_execution) is int


def test_assignment_after_compile_is_kept_as_int(batches):
    model = build("mlp", "sequential", "ipu")
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    model.steps_per_execution = tf.constant(3, tf.int64)
    assert model.steps_per_execution == 3 and type(model.steps_per_execution) is int
    model.fit(batches, epochs=2, verbose=0)
    assert model.ipu_report()["steps"] == 3


def test_model_made_in_the_strategy_scope_takes_a_tensor(batches):
    with ipu.ipu_strategy.IPUStrategy().scope():
        model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                                  keras.layers.Dense(10)])
        model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(True),
                      steps_per_execution=batches.cardinality())
        history = model.fit(batches, epochs=2, verbose=0)
    assert model.steps_per_execution == 6
    assert len(history.history["loss"]) == 2
    assert model.ipu_report()["steps"] == 6


@pytest.mark.parametrize("value", [2.5, tf.constant(2.0), tf.constant([2, 3], tf.int64), 0, -1,
                                   True, "4"],
                         ids=["float", "float-tensor", "vector", "zero", "negative", "bool",
                              "str"])
def test_bad_values_are_refused_naming_them(value):
    model = build("mlp", "sequential", "ipu")
    with pytest.raises(ModelOptionError, match="steps_per_execution expected a positive "
                                               "integer.*Received: steps_per_execution="):
        model.compile(optimizer="sgd", loss="mse", steps_per_execution=value)
    assert model.steps_per_execution == 1   # unchanged


def test_a_saved_model_keeps_the_int(tmp_path, batches):
    model = build("mlp", "sequential", "ipu")
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy",
                  steps_per_execution=batches.cardinality())
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.steps_per_execution == 6 and type(loaded.steps_per_execution) is int
