"""`fit`, `evaluate` and `predict` of ipu_keras models against Keras on the CPU.

For an MLP (Flatten, Dense, Dense) and a small CNN (Conv2D, MaxPooling2D, Flatten, Dense),
in the three forms (Sequential, functional, subclassed) and with SGD and Adam: 3 epochs of
200 samples in batches of 32 (a partial last batch of 8), `steps_per_execution=4` (7 steps
per epoch: a remainder execution of 3 steps) and validation data of 50 samples (a partial
batch too). From the same initial weights, the History, the final weights, `evaluate`
(list and dict) and `predict` equal Keras' within 1e-5 relative. The Keras reference of
each (architecture, optimizer) is computed once, in the Sequential form.
"""
import numpy as np
import pytest
import keras

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T

from tests.keras.common import (
    BATCH, FORMS, OPTIMIZERS, assert_history_equal, assert_logs_equal,
    assert_weights_equal, build, compile_model, train_val,
)

EPOCHS = 3

CASES = [pytest.param((arch, form, opt), id=f"{arch}-{form}-{opt}",
                      marks=[pytest.mark.slow] if arch == "cnn" else [])
         for arch in ("mlp", "cnn") for form in FORMS for opt in OPTIMIZERS]


def _run(model, x, y, val):
    history = model.fit(x, y, epochs=EPOCHS, batch_size=BATCH, shuffle=False,
                        validation_data=val, verbose=0)
    return {
        "history": history.history,
        "weights": model.get_weights(),
        "evaluate": model.evaluate(*val, batch_size=BATCH, verbose=0),
        "evaluate_dict": model.evaluate(*val, batch_size=BATCH, verbose=0, return_dict=True),
        "predict": model.predict(val[0], batch_size=BATCH, verbose=0),
        "model": model,
    }


@pytest.fixture(scope="module")
def references():
    """(arch, optimizer) -> (initial weights, the run of Keras on the CPU)."""
    return {}


@pytest.fixture(scope="module", params=CASES)
def runs(request, references):
    """(on the IPU, on the CPU): one training of each model, shared by the tests below.

    The three forms compute the same thing from the same weights (in the same order), so
    one Keras run, of the Sequential form, is the reference of all three forms.
    """
    arch, form, opt = request.param
    if arch == "cnn" and "Conv2D" not in ipu.supported_ops():
        # Keep the test failing (not skipped): the issue requires the CNN.
        pytest.fail("the CNN needs Conv2D and MaxPool, which ipu_keras.supported_ops() lacks")
    (x, y), val = train_val()
    if (arch, opt) not in references:
        keras.utils.set_random_seed(1)
        on_cpu = compile_model(build(arch, "sequential", "keras"), opt)
        initial = on_cpu.get_weights()
        references[arch, opt] = initial, _run(on_cpu, x, y, val)
    initial, reference = references[arch, opt]
    on_ipu = compile_model(build(arch, form, "ipu"), opt)
    on_ipu.set_weights(initial)
    return _run(on_ipu, x, y, val), reference


def test_model_is_an_ipu_model(runs):
    on_ipu, on_cpu = runs
    assert isinstance(on_ipu["model"], ipu.keras.IPUTrainerMixin)
    assert not isinstance(on_cpu["model"], ipu.keras.IPUTrainerMixin)
    # The device ran the steps: a full and a partial batch signature were compiled.
    assert len(on_ipu["model"].train_function.programs) == 2


def test_history_matches_keras(runs):
    on_ipu, on_cpu = runs
    assert sorted(on_cpu["history"]) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    assert_history_equal(on_ipu["history"], on_cpu["history"])
    assert on_ipu["history"]["loss"][-1] < on_ipu["history"]["loss"][0]  # it really trains


def test_final_weights_match_keras(runs):
    on_ipu, on_cpu = runs
    assert_weights_equal(on_ipu["weights"], on_cpu["weights"])


def test_evaluate_matches_keras(runs):
    on_ipu, on_cpu = runs
    assert isinstance(on_ipu["evaluate"], list) and len(on_ipu["evaluate"]) == 2
    assert_logs_equal(on_ipu["evaluate"], on_cpu["evaluate"])
    assert isinstance(on_ipu["evaluate_dict"], dict)
    assert_logs_equal(on_ipu["evaluate_dict"], on_cpu["evaluate_dict"])
    # The last epoch's validation is the same evaluation as `evaluate` on the same data.
    T.FLOAT32.assert_close(on_ipu["evaluate_dict"]["loss"], on_ipu["history"]["val_loss"][-1])


def test_predict_matches_keras(runs):
    on_ipu, on_cpu = runs
    assert isinstance(on_ipu["predict"], np.ndarray)
    assert on_ipu["predict"].shape == on_cpu["predict"].shape == (50, 10)
    T.FLOAT32.assert_close(on_ipu["predict"], on_cpu["predict"])
