"""`for x in outfeed_queue` (`IPUOutfeedQueueIterator`, SDK 2.5+, TF2 only).

As in the SDK: one item per enqueue, in order, in the enqueued structure (tensor, tuple,
dict) without the stacking axis; a replicated program's items keep the replica axis; the
loop stops when the queue is drained at that moment, and a new loop after the next
execution yields the new items only; items taken by the iterator are gone for `dequeue`.
LAST mode and TF1 graphs are refused with the SDK's texts. Values are checked against
the same computation by TensorFlow on the CPU.
"""
import collections.abc

import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T
from ipu_keras.errors import OutfeedIterationError

STEPS = 10
F32 = np.float32


def _data(n=STEPS, seed=0):
    return np.random.default_rng(seed).standard_normal((n, 3)).astype(F32)


def _body_on_cpu(x):
    return tf.reduce_sum(tf.square(x) - 0.5 * x)


def _run(body, data, strategy=None, steps=None):
    """`loops.repeat(steps, body)` (default: one step per row of `data`) over an infeed of
    `data`, run by IPUStrategy."""
    strategy = strategy or ipu.ipu_strategy.IPUStrategy()
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(tf.data.Dataset.from_tensor_slices(data))
    with strategy.scope():
        strategy.run(tf.function(lambda: ipu.loops.repeat(steps or len(data), body,
                                                          infeed_queue=infeed)))


def test_the_docs_example_sums_the_losses_of_each_execution():
    """Graphcore's outfeed_iterator_example: after each run, `for loss in queue` sums."""
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    assert isinstance(outfeed, collections.abc.Iterable)
    strategy = ipu.ipu_strategy.IPUStrategy()
    for execution in range(2):
        data = _data(seed=execution)
        _run(lambda x: outfeed.enqueue(_body_on_cpu(x)), data, strategy)
        losses = [loss for loss in outfeed]
        assert len(losses) == STEPS                 # this execution's items only
        assert all(isinstance(loss, tf.Tensor) and loss.shape == () for loss in losses)
        expected = [_body_on_cpu(row).numpy() for row in data]
        T.FLOAT32.assert_close(np.array(losses), np.array(expected))
        total = sum(loss for loss in losses)
        T.FLOAT32.assert_close(total.numpy(), np.sum(expected))


def test_tuples_and_dicts_come_back_one_enqueue_at_a_time():
    pairs = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    named = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    data = _data()

    def body(x):
        return tf.group(pairs.enqueue((x, _body_on_cpu(x))),
                        named.enqueue({"double": 2.0 * x, "loss": _body_on_cpu(x)}))

    _run(body, data)
    got_pairs, got_named = list(pairs), list(named)
    assert len(got_pairs) == len(got_named) == STEPS
    for row, pair, entry in zip(data, got_pairs, got_named):
        assert isinstance(pair, tuple) and isinstance(entry, dict)
        T.EXACT.assert_close(pair[0].numpy(), row)
        T.FLOAT32.assert_close(pair[1].numpy(), _body_on_cpu(row).numpy())
        assert sorted(entry) == ["double", "loss"]
        T.EXACT.assert_close(entry["double"].numpy(), 2.0 * row)
        T.FLOAT32.assert_close(entry["loss"].numpy(), _body_on_cpu(row).numpy())


def test_the_iterator_and_dequeue_share_the_queue():
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    data = _data()
    _run(lambda x: outfeed.enqueue(x), data)
    iterator = iter(outfeed)
    assert type(iterator) is ipu.ipu_outfeed_queue.IPUOutfeedQueueIterator
    assert iter(iterator) is iterator
    T.EXACT.assert_close(next(iterator).numpy(), data[0])
    assert outfeed.dequeue().shape[0] == 0          # the iterator took the rest
    rest = np.stack([x.numpy() for x in iterator])
    T.EXACT.assert_close(rest, data[1:])
    with pytest.raises(StopIteration):
        next(iterator)
    assert list(outfeed) == []                      # drained
    _run(lambda x: outfeed.enqueue(x), data[:3])
    T.EXACT.assert_close(outfeed.dequeue().numpy(), data[:3])   # dequeue took them all
    assert list(outfeed) == []


def test_a_queue_never_enqueued_yields_nothing():
    assert list(ipu.ipu_outfeed_queue.IPUOutfeedQueue()) == []


def test_replicated_items_keep_the_replica_axis():
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = 2
    cfg.ipu_model.tiles_per_ipu = 16
    cfg.configure_ipu_system()
    try:
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        data = _data(8)
        _run(lambda x: outfeed.enqueue(x * 3.0), data, steps=4)
        items = list(outfeed)
    finally:
        ipu.config.reset_ipu_configuration()
    assert len(items) == 4 and items[0].shape == (2, 3)
    T.EXACT.assert_close(np.stack([x.numpy() for x in items]), 3.0 * data.reshape(4, 2, 3))


def test_last_mode_is_refused():
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(ipu.ipu_outfeed_queue.IPUOutfeedMode.LAST)
    refusal = "can only be iterated over if the `outfeed_mode` is set to 'IPUOutfeedMode.ALL'"
    with pytest.raises(OutfeedIterationError, match=refusal):
        iter(outfeed)
    with pytest.raises(RuntimeError):    # the SDK's error class
        for _ in outfeed:
            pass


def test_a_tf1_graph_is_refused():
    with tf.Graph().as_default():
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        with pytest.raises(OutfeedIterationError, match="can only be iterated over in eager "
                                                        "mode"):
            iter(outfeed)
