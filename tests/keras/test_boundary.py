"""Inputs the IPU does not take natively are converted at the host/device boundary.

float64 becomes float32 and int64 becomes int32 with one warning per dtype, and the
results equal Keras on the CPU fed the float32/int32 data; an int64 value that does not
fit in int32 is a `FeedError`, raised before the execution that would have used it, so
the weights are those of the last completed execution.
"""
import warnings

import numpy as np
import pytest

from ipu_keras._src.conformance import tolerances as T
from ipu_keras.errors import FeedError
from ipu_keras._src.keras import boundary

from tests.keras.common import (
    BATCH, assert_history_equal, assert_weights_equal, build_pair, dataset, train_val,
)

CONVERSION_WARNING = "The IPU has no"


@pytest.fixture
def fresh_warnings(monkeypatch):
    """Forget the conversions already warned about in this process."""
    monkeypatch.setattr(boundary, "_warned", set())


def test_64_bit_inputs_are_converted_with_one_warning(fresh_warnings):
    (x, y), (vx, vy) = train_val()
    on_ipu, on_cpu = build_pair(opt="adam")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = on_ipu.fit(dataset(x.astype(np.float64), y.astype(np.int64)), epochs=2,
                             validation_data=dataset(vx.astype(np.float64), vy.astype(np.int64)),
                             verbose=0)
        predicted = on_ipu.predict(dataset(vx.astype(np.float64), vy), verbose=0)
    messages = [str(w.message) for w in caught if CONVERSION_WARNING in str(w.message)]
    assert len(messages) == 2, messages
    assert any("float64" in m and "float32" in m for m in messages)
    assert any("int64" in m and "int32" in m for m in messages)
    cpu_history = on_cpu.fit(dataset(x, y), epochs=2, validation_data=dataset(vx, vy),
                             verbose=0)
    assert_history_equal(history, cpu_history)
    assert_weights_equal(on_ipu.get_weights(), on_cpu.get_weights())
    T.FLOAT32.assert_close(predicted, on_cpu.predict(dataset(vx, vy), verbose=0))
    assert predicted.dtype == np.float32


def test_an_int64_value_out_of_int32_range_is_a_feed_error():
    (x, y), _ = train_val()
    on_ipu, _ = build_pair()
    initial = on_ipu.get_weights()
    labels = y.astype(np.int64)
    labels[3] = 2**40
    with pytest.raises(FeedError, match="Received:") as info:
        on_ipu.fit(x, labels, batch_size=BATCH, shuffle=False, verbose=0)
    assert str(2**40) in str(info.value)
    assert_weights_equal(on_ipu.get_weights(), initial, tolerance=T.EXACT)
    assert int(on_ipu.optimizer.iterations.numpy()) == 0


def test_a_feed_error_in_a_later_execution_keeps_the_completed_ones():
    (x, y), _ = train_val()
    on_ipu, on_cpu = build_pair()
    labels = y.astype(np.int64)
    labels[5 * BATCH + 1] = -(2**40)  # in the sixth batch: the second execution
    with pytest.raises(FeedError):
        on_ipu.fit(x, labels, batch_size=BATCH, shuffle=False, verbose=0)
    assert int(on_ipu.optimizer.iterations.numpy()) == 4
    on_cpu.fit(x[:4 * BATCH], y[:4 * BATCH], batch_size=BATCH, shuffle=False, verbose=0)
    assert_weights_equal(on_ipu.get_weights(), on_cpu.get_weights())


@pytest.mark.parametrize("element", [
    lambda x, y: (x, y),                        # Keras' (x, y): packed as a tuple
    lambda x, y: x,                             # one tensor: returned as it is
    lambda x, y: {"a": x, "b": (y, x)},         # other structures: by tf.nest
])
def test_batches_are_pulled_in_the_element_structure(element):
    import tensorflow as tf

    from ipu_keras._src.keras.device_function import _fast_pull

    x, y = np.arange(12, dtype=np.float32).reshape(6, 2), np.arange(6, dtype=np.int32)
    ds = tf.data.Dataset.from_tensor_slices(element(x, y)).batch(2)
    pull, expected = _fast_pull(iter(ds)), iter(ds)
    for _ in range(3):
        got, want = pull(), next(expected)
        tf.nest.assert_same_structure(got, want)
        for g, w in zip(tf.nest.flatten(got), tf.nest.flatten(want)):
            np.testing.assert_array_equal(g.numpy(), w.numpy())
