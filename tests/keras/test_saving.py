"""Saving and loading ipu_keras models.

`model.save("m.keras")` and `keras.models.load_model` give back an ipu_keras model of the
same form with the same predictions (and it still trains on the device);
`save_weights`/`load_weights` interchange with a plain Keras model of the same
architecture, both ways.
"""
import pytest
import keras

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T

from tests.keras.common import (
    BATCH, FORMS, assert_weights_equal, build, compile_model, train_val,
)


@pytest.fixture(scope="module")
def trained():
    """One ipu_keras model per form, trained for a few steps (so it has optimizer state)."""
    (x, y), _ = train_val()
    models = {}
    for form in FORMS:
        keras.utils.set_random_seed(4)
        model = compile_model(build(form=form), "adam")
        model.fit(x[:64], y[:64], batch_size=BATCH, verbose=0)
        models[form] = model
    return models


@pytest.mark.parametrize("form", FORMS)
def test_save_and_load_model_gives_an_ipu_model(trained, form, tmp_path):
    model = trained[form]
    (x, y), (vx, _) = train_val()
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, ipu.keras.IPUTrainerMixin)
    assert type(loaded).__name__ == type(model).__name__
    assert_weights_equal(loaded.get_weights(), model.get_weights(), tolerance=T.EXACT)
    T.FLOAT32.assert_close(loaded.predict(vx, batch_size=len(vx), verbose=0),
                           model.predict(vx, batch_size=len(vx), verbose=0))
    # The loaded model is compiled with its optimizer and runs on the device.
    assert loaded.steps_per_execution == model.steps_per_execution
    loaded.fit(x[:64], y[:64], batch_size=BATCH, verbose=0)
    assert loaded.train_function.programs


@pytest.mark.parametrize("form", FORMS)
def test_ipu_weights_load_into_keras(trained, form, tmp_path):
    model = trained[form]
    path = str(tmp_path / "ipu.weights.h5")
    model.save_weights(path)
    plain = build(form=form, base="keras")
    plain.load_weights(path)
    assert_weights_equal(plain.get_weights(), model.get_weights(), tolerance=T.EXACT)
    _, (vx, _) = train_val()
    compile_model(plain)
    T.FLOAT32.assert_close(plain.predict(vx, batch_size=len(vx), verbose=0),
                           model.predict(vx, batch_size=len(vx), verbose=0))


@pytest.mark.parametrize("form", FORMS)
def test_keras_weights_load_into_ipu(form, tmp_path):
    keras.utils.set_random_seed(11)
    plain = build(form=form, base="keras")
    path = str(tmp_path / "keras.weights.h5")
    plain.save_weights(path)
    model = build(form=form, base="ipu")
    model.load_weights(path)
    assert_weights_equal(model.get_weights(), plain.get_weights(), tolerance=T.EXACT)
