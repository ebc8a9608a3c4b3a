"""Out-of-range class labels are refused as TensorFlow on the CPU refuses them (issue 30, 1).

A softmax classifier fitted with `sparse_categorical_crossentropy` and a label outside
[0, classes) (too large, negative, or NaN cast to an integer) used to train to NaN
weights; Keras on the CPU raises InvalidArgumentError and leaves the weights alone. The
simulator's kernel raises `IndexOutOfRangeError` naming the op and where it comes from,
and the execution that saw the label leaves the variables as the last completed one did.
"""
import numpy as np
import pytest
import tensorflow as tf

from ipu_keras._src.conformance import tolerances as T
from ipu_keras.errors import IndexOutOfRangeError
from tests.keras.common import (
    BATCH, STEPS_PER_EXECUTION, assert_weights_equal, build_pair, train_val,
)

BAD = {"too large": 10, "negative": -1, "NaN cast to int": int(np.array(np.nan).astype(np.int32))}


@pytest.mark.parametrize("label", BAD.values(), ids=BAD.keys())
def test_a_bad_label_in_the_first_execution_changes_nothing(label):
    on_ipu, on_cpu = build_pair()
    initial = on_ipu.get_weights()
    (x, y), _ = train_val()
    y = y.copy()
    y[3] = label
    with pytest.raises(tf.errors.InvalidArgumentError, match="outside the valid range"):
        on_cpu.fit(x, y, batch_size=BATCH, shuffle=False, verbose=0)
    with pytest.raises(IndexOutOfRangeError) as info:
        on_ipu.fit(x, y, batch_size=BATCH, shuffle=False, verbose=0)
    message = str(info.value)
    assert f"Received: label={label}" in message and "op 'sparse_softmax_xent'" in message
    assert "TensorFlow node '" in message
    assert_weights_equal(on_ipu.get_weights(), initial, tolerance=T.EXACT)
    assert_weights_equal(on_cpu.get_weights(), initial, tolerance=T.EXACT)
    assert int(on_ipu.optimizer.iterations.numpy()) == 0


def test_a_bad_label_later_keeps_the_last_completed_execution():
    on_ipu, on_cpu = build_pair()
    (x, y), _ = train_val()
    good = STEPS_PER_EXECUTION * BATCH     # one whole execution of good batches
    y = y.copy()
    y[good + 5] = 10
    with pytest.raises(IndexOutOfRangeError):
        on_ipu.fit(x, y, batch_size=BATCH, shuffle=False, verbose=0)
    on_cpu.fit(x[:good], y[:good], batch_size=BATCH, shuffle=False, verbose=0)
    assert_weights_equal(on_ipu.get_weights(), on_cpu.get_weights())
    assert int(on_ipu.optimizer.iterations.numpy()) == STEPS_PER_EXECUTION
    assert all(np.isfinite(w).all() for w in on_ipu.get_weights())


def test_evaluate_refuses_a_bad_label_too():
    on_ipu, _ = build_pair()
    (x, y), _ = train_val()
    y = y.copy()
    y[0] = -3
    with pytest.raises(IndexOutOfRangeError, match="Received: label=-3"):
        on_ipu.evaluate(x, y, batch_size=BATCH, verbose=0)
