"""Faults on the low-level path (`IPUStrategy.run` + `loops.repeat` + infeed/outfeed).

An execution that fails, because the dataset raised or the user pressed Ctrl-C, is
abandoned as a whole: the variables are those of the last completed execution, the
outfeed holds nothing of it, and the infeed elements it took are given back, so the
next execution reads them again. The infeed's host thread and the compiled function
are released once the function and iterator that own them are gone.
"""
import gc
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras._src.driver import executor as _executor
from ipu_keras.errors import FeedError
from ipu_keras._src.runtime import feeds
from tests.conftest import interrupt_on_call

STEPS = 4


def _dataset(bad_at=None, n=16):
    values = np.arange(n, dtype=np.float32)
    if bad_at is not None:
        values[bad_at] = np.nan
    data = tf.data.Dataset.from_tensor_slices(values.reshape(n, 1))
    return data.map(lambda x: tf.debugging.check_numerics(x, "the data source broke"))


def _setup(dataset):
    """(strategy, loop, total variable, outfeed, infeed): each step adds its element."""
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        total = tf.Variable(np.zeros(1, np.float32))
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        def body(x):
            total.assign_add(x)
            outfeed.enqueue(x)

        @tf.function
        def loop():
            ipu.loops.repeat(STEPS, body, [], infeed)

    return strategy, loop, total, outfeed, infeed


def _infeed_threads():
    return [t for t in threading.enumerate() if t.name == "ipu_keras-infeed"]


def test_a_dataset_raising_mid_execution_keeps_the_last_completed_one():
    strategy, loop, total, outfeed, _ = _setup(_dataset(bad_at=6))
    strategy.run(loop)
    np.testing.assert_array_equal(total.numpy(), [0 + 1 + 2 + 3])
    np.testing.assert_array_equal(outfeed.dequeue().numpy().ravel(), [0, 1, 2, 3])
    with pytest.raises(FeedError, match="the data source broke") as info:
        strategy.run(loop)  # takes elements 4 and 5, then element 6 fails
    assert "Received: error" in str(info.value)
    np.testing.assert_array_equal(total.numpy(), [6])
    assert outfeed.dequeue().numpy().size == 0
    with pytest.raises(FeedError):  # the dataset stays failed, as a tf.data iterator does
        strategy.run(loop)
    np.testing.assert_array_equal(total.numpy(), [6])


def test_an_interrupt_mid_execution_loses_no_element(monkeypatch):
    strategy, loop, total, outfeed, _ = _setup(_dataset())
    strategy.run(loop)
    outfeed.dequeue()
    interrupt_on_call(monkeypatch, feeds.Infeed, "pull", 3)
    with pytest.raises(KeyboardInterrupt):
        strategy.run(loop)  # elements 4 and 5 taken, interrupted before the third
    np.testing.assert_array_equal(total.numpy(), [6])
    assert outfeed.dequeue().numpy().size == 0
    monkeypatch.undo()
    strategy.run(loop)  # reads 4 and 5 again, then 6 and 7
    np.testing.assert_array_equal(outfeed.dequeue().numpy().ravel(), [4, 5, 6, 7])
    np.testing.assert_array_equal(total.numpy(), [sum(range(8))])


def test_the_thread_and_the_compiled_function_go_with_their_owners():
    """Each run's owners die with it; only the latest compiled function is kept (for
    `last_compiled`), so the runs before it must have left nothing behind."""
    def run_once():
        """Runs a new loop; returns its infeed threads and _executor entries."""
        threads, entries = set(_infeed_threads()), set(_executor._CACHE)
        strategy, loop, total, outfeed, _ = _setup(_dataset(n=64))
        strategy.run(loop)
        assert float(total.numpy()[0]) == 6.0
        return set(_infeed_threads()) - threads, set(_executor._CACHE) - entries

    previous = None
    for _ in range(4):
        threads, entries = run_once()
        assert len(threads) == 1 and len(entries) == 1
        assert not entries & set(_executor._CACHE)  # its owners are gone already
        if previous is not None:
            gc.collect()
            deadline = time.monotonic() + 5
            while any(t.is_alive() for t in previous) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not any(t.is_alive() for t in previous)
        previous = threads
