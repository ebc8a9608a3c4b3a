"""`model.set_infeed_queue_options` / `set_outfeed_queue_options` (SDK 2.4+).

`prefetch_depth` is honoured: while the device runs, the host has produced exactly
`prefetch_depth` batches beyond those the device took (a counting dataset shows it), and
without the option nothing beyond. Training with a prefetch equals Keras on the CPU. The
keys Graphcore's Keras refused are refused with its texts, as are out-of-range values;
the outfeed options are checked and kept.
"""
import logging
import time

import numpy as np
import pytest
import tensorflow as tf
import keras

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.keras import execution_options
from ipu_keras.errors import ModelOptionError, UnknownOptionError
from tests.keras.common import BATCH, assert_history_equal, build, build_pair, data

STEPS = 2
EXECUTIONS = 3


def _counting_dataset(produced, x, y):
    """Batch i of (x, y), each batch recorded in `produced` when tf.data makes it."""
    def count(i):
        produced.append(int(i))
        return i

    batches = tf.data.Dataset.range(len(x) // BATCH)
    batches = batches.map(lambda i: tf.py_function(count, [i], tf.int64))
    return batches.map(lambda i: (tf.gather(x, tf.range(i * BATCH, (i + 1) * BATCH)),
                                  tf.gather(y, tf.range(i * BATCH, (i + 1) * BATCH))))


class _AheadProbe(keras.callbacks.Callback):
    """After each execution: how many batches the host produced beyond those consumed,
    once tf.data's thread has settled (it stops at the prefetch buffer's size)."""

    def __init__(self, produced, expected_ahead):
        super().__init__()
        self.produced, self.expected_ahead, self.ahead = produced, expected_ahead, []

    def on_train_batch_end(self, batch, logs=None):
        consumed = batch + 1
        deadline = time.monotonic() + 10
        while len(self.produced) - consumed < self.expected_ahead and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)   # had it gone further, it would have by now
        self.ahead.append(len(self.produced) - consumed)


@pytest.mark.parametrize("depth", [None, 1, 3])
def test_prefetch_depth_batches_are_ready_ahead_of_the_device(depth):
    x, y = data(10 * BATCH)
    produced = []
    model = build("mlp", "sequential", "ipu")
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy",
                  steps_per_execution=STEPS)
    if depth is not None:
        model.set_infeed_queue_options(prefetch_depth=depth)
    probe = _AheadProbe(produced, depth or 0)
    model.fit(_counting_dataset(produced, x, y), epochs=1, verbose=0, callbacks=[probe],
              steps_per_epoch=STEPS * EXECUTIONS)
    assert probe.ahead == [depth or 0] * EXECUTIONS


def test_training_with_a_prefetch_equals_keras():
    x, y = data(6 * BATCH)
    batches = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)
    on_ipu, on_cpu = build_pair(steps_per_execution=STEPS)
    on_ipu.set_infeed_queue_options(prefetch_depth=4, optimise_latency=True)
    on_ipu.set_outfeed_queue_options(buffer_depth=2)
    got = on_ipu.fit(batches, epochs=2, verbose=0, validation_data=batches)
    expected = on_cpu.fit(batches, epochs=2, verbose=0, validation_data=batches)
    assert_history_equal(got, expected)
    np.testing.assert_array_equal(on_ipu.predict(x, verbose=0).shape, (len(x), 10))


def test_options_of_a_model_made_in_the_strategy_scope():
    x, _ = data(4 * BATCH)
    with ipu.ipu_strategy.IPUStrategy().scope():
        model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                                  keras.layers.Dense(10, activation="softmax")])
        model.compile(steps_per_execution=4)
        model.set_infeed_queue_options(prefetch_depth=2)
        model.set_outfeed_queue_options(buffer_depth=2)
        got = model.predict(tf.data.Dataset.from_tensor_slices(x).batch(BATCH), verbose=0)
    expected = model(x)   # Keras' call, eagerly on the CPU
    T.FLOAT32.assert_close(got, expected.numpy())


def test_the_options_are_kept_and_replaced_by_the_next_call():
    model = build("mlp", "sequential", "ipu")
    model.set_infeed_queue_options(prefetch_depth=2)
    model.set_outfeed_queue_options(buffer_depth=3, optimise_latency=False)
    assert execution_options.infeed_options(model) == {"prefetch_depth": 2}
    assert execution_options.outfeed_options(model) == {"buffer_depth": 3,
                                                        "optimise_latency": False}
    model.set_infeed_queue_options()
    assert execution_options.infeed_options(model) == {}


@pytest.mark.parametrize("key", ["dataset", "infeed_spec", "element_spec"])
def test_infeed_keys_keras_sets_are_refused(key):
    model = build("mlp", "sequential", "ipu")
    with pytest.raises(ModelOptionError, match=f"Found `{key}` key in `kwargs`. This argument "
                                               "is automatically set by Keras"):
        model.set_infeed_queue_options(**{key: None})


@pytest.mark.parametrize("method,key", [("set_infeed_queue_options", "_internal_id"),
                                        ("set_outfeed_queue_options", "outfeed_mode"),
                                        ("set_outfeed_queue_options", "device_ordinal")])
def test_keys_not_compatible_with_keras_are_refused(method, key):
    model = build("mlp", "sequential", "ipu")
    with pytest.raises(ModelOptionError, match=f"Found `{key}` key in `kwargs`. This argument "
                                               "is not compatible with Keras"):
        getattr(model, method)(**{key: 0})


@pytest.mark.parametrize("depth,message", [
    (0, "prefetch_depth must be greater than zero, but it is 0"),
    (-2, "prefetch_depth must be greater than zero, but it is -2"),
    (256, "prefetch_depth must be less than 256, but it is 256"),
    (2.0, r"prefetch_depth expected an int from 1 to 255. Received: prefetch_depth=2.0"),
])
def test_prefetch_depth_out_of_range_is_refused(depth, message):
    model = build("mlp", "sequential", "ipu")
    model.set_infeed_queue_options(prefetch_depth=2)
    with pytest.raises(ModelOptionError, match=message):
        model.set_infeed_queue_options(prefetch_depth=depth)
    assert execution_options.infeed_options(model) == {"prefetch_depth": 2}   # unchanged


def test_bad_values_and_unknown_keys():
    model = build("mlp", "sequential", "ipu")
    with pytest.raises(ModelOptionError, match="buffer_depth expected an int greater than "
                                               "zero. Received: buffer_depth=0"):
        model.set_outfeed_queue_options(buffer_depth=0)
    with pytest.raises(ModelOptionError, match="optimise_latency expected a bool. Received: "
                                               "optimise_latency='yes'"):
        model.set_infeed_queue_options(optimise_latency="yes")
    with pytest.raises(ModelOptionError, match="device_ordinal expected an int >= 0"):
        model.set_infeed_queue_options(device_ordinal=-1)
    with pytest.raises(UnknownOptionError, match="unexpected keyword argument.*buffer_size"):
        model.set_outfeed_queue_options(buffer_size=2)
    with pytest.raises(TypeError):   # as an unexpected keyword argument is
        model.set_outfeed_queue_options(buffer_size=2)


def test_unknown_infeed_keys_are_ignored_with_a_warning(caplog):
    model = build("mlp", "sequential", "ipu")
    with caplog.at_level(logging.WARNING, logger="ipu_keras"):
        model.set_infeed_queue_options(prefetch_depth=2, data_to_prefetch=3)
    assert "`data_to_prefetch` is not an option of IPUInfeedQueue and is ignored" in caplog.text
