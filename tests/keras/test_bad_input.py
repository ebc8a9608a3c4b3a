"""Input Keras takes without complaint or refuses clearly gets the same here (issue 30, 6).

Empty data on a fresh model: `fit` and `evaluate` warn that the input ran out and report
no metrics, as Keras on the CPU does; `predict` (where Keras' own loop fails on a batch
that never came) is a designed `FeedError`. A complex input is an
`UnsupportedDTypeError` at the host/device boundary (Keras would drop its imaginary
part silently). Each leaves the weights and the optimizer as they were.
"""
import warnings

import numpy as np
import pytest
import tensorflow as tf

from ipu_keras._src.conformance import tolerances as T
from ipu_keras.errors import FeedError, UnsupportedDTypeError
from tests.keras.common import BATCH, SHAPE, assert_weights_equal, build_pair

EMPTY_X = np.zeros((0,) + SHAPE, np.float32)
EMPTY_Y = np.zeros((0,), np.int32)


def _empty(kind):
    if kind == "arrays":
        return {"x": EMPTY_X, "y": EMPTY_Y}
    return {"x": tf.data.Dataset.from_tensor_slices((EMPTY_X, EMPTY_Y)).batch(BATCH)}


def _call(model, method, data):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if method == "fit":
            result = model.fit(**data, batch_size=None if "y" not in data else BATCH,
                               verbose=0).history
        else:
            result = model.evaluate(**data, verbose=0)
    return result, ["ran out of data" in str(w.message) for w in caught]


@pytest.mark.parametrize("kind", ["arrays", "dataset"])
@pytest.mark.parametrize("method", ["fit", "evaluate"])
def test_empty_data_on_a_fresh_model_reports_what_keras_reports(method, kind):
    # Keras traced (not eager: run eagerly, Keras itself fails on its unbuilt metrics).
    on_ipu, on_cpu = build_pair(run_eagerly=False)
    initial = on_ipu.get_weights()
    got, warned = _call(on_ipu, method, _empty(kind))
    want, keras_warned = _call(on_cpu, method, _empty(kind))
    assert got == want and want in ({}, [])
    assert any(warned) and any(keras_warned)
    assert_weights_equal(on_ipu.get_weights(), initial, tolerance=T.EXACT)
    assert int(on_ipu.optimizer.iterations.numpy()) == 0


@pytest.mark.parametrize("kind", ["arrays", "dataset"])
def test_predict_of_no_data_is_a_designed_error(kind):
    on_ipu, _ = build_pair()
    data = _empty(kind)
    with pytest.raises(FeedError, match="predict expected at least one batch of input"):
        on_ipu.predict(data["x"], verbose=0)


@pytest.mark.parametrize("method", ["fit", "evaluate", "predict"])
def test_a_complex_input_is_refused_before_any_step(method):
    on_ipu, _ = build_pair()
    initial = on_ipu.get_weights()
    x = np.ones((2 * BATCH,) + SHAPE, np.complex64)
    y = np.zeros((2 * BATCH,), np.int32)
    args = (x,) if method == "predict" else (x, y)
    with pytest.raises(UnsupportedDTypeError, match="The IPU has no complex64 type") as info:
        getattr(on_ipu, method)(*args, batch_size=BATCH, verbose=0)
    assert isinstance(info.value, TypeError) and "np.real" in str(info.value)
    assert_weights_equal(on_ipu.get_weights(), initial, tolerance=T.EXACT)
    assert int(on_ipu.optimizer.iterations.numpy()) == 0
