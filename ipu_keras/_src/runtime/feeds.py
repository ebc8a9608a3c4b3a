"""Host ends of the device's streams: the infeed thread and the outfeed buffer.

An `Infeed` pulls elements from a TensorFlow dataset iterator (through its resource
handle, with `IteratorGetNext` run eagerly) on a host thread, ahead of the device, up
to `prefetch_depth` elements. Elements it fetched but the device did not take stay
queued for the next execution, so no data is lost between executions.

`StreamSet` is what the engine sees during one execution: `pull(feed)` takes the
next element of an infeed; `push(feed, arrays)` records an outfeed enqueue, which is
handed to the outfeed queue only when the execution completes. If the execution fails
or is interrupted, `give_back()` returns the elements it took to the front of their
infeeds, so the next execution reads them again: a failed execution loses nothing.

Lifetimes: the registry of infeeds holds them weakly; the sessions that read an infeed
own it. Its thread holds the queue and the iterator handle but not the `Infeed`, and
stops (within `_POLL_SECONDS`) once the `Infeed` is gone, so a dead iterator leaves no
thread behind.
"""
import collections
import queue
import threading
import weakref

import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context

from ipu_keras.errors import FeedError, InfeedExhaustedError
from ipu_keras._src.ops.registry import get_op

DEFAULT_PREFETCH_DEPTH = 4
_END = object()


class Infeed:
    """Prefetches elements of one dataset iterator on a daemon thread."""

    def __init__(self, handle, types, prefetch_depth=None):
        self.handle = handle
        self.types = list(types)
        self.depth = prefetch_depth or DEFAULT_PREFETCH_DEPTH
        self._queue = queue.Queue(maxsize=self.depth)
        self._returned = collections.deque()
        self._thread = None
        self._stop = threading.Event()
        self._ended = False
        weakref.finalize(self, self._stop.set)

    def _start(self):
        dtypes = [tf.as_dtype(t.dtype) for t in self.types]
        shapes = [t.shape for t in self.types]
        self._thread = threading.Thread(
            target=_fetch, args=(self.handle, dtypes, shapes, self._queue, self._stop),
            daemon=True, name="ipu_keras-infeed")
        self._thread.start()

    def pull(self):
        if self._returned:
            return self._returned.popleft()
        if self._ended:
            raise self._failed() if isinstance(self._ended, Exception) else self._exhausted()
        if self._thread is None:
            self._start()
        element = self._queue.get()
        if element is _END:
            self._ended = True
            raise self._exhausted()
        if isinstance(element, Exception):
            self._ended = element
            raise self._failed()
        return element

    def _failed(self):
        error = self._ended
        message = getattr(error, "message", None) or str(error)
        return FeedError(
            "The infeed expected its dataset to produce the next element. Received: "
            f"error {type(error).__name__}: {message.strip()}. The execution was abandoned "
            "(weights, outfeeds and the elements it took are as before it); fix the "
            "dataset's input pipeline."
        )

    def unread(self, elements):
        """Puts `elements` (taken by a failed execution) back in front of the infeed."""
        self._returned.extendleft(reversed(elements))

    def _exhausted(self):
        return InfeedExhaustedError(
            "The device asked the infeed for another element but its dataset is exhausted. "
            "Expected the dataset to hold as many elements as the steps that read it; "
            "repeat() the dataset or run fewer steps."
        )


def _fetch(handle, dtypes, shapes, elements, stop):
    """The infeed thread: fills `elements` until the dataset ends or `stop` is set."""
    # A new thread starts in graph mode when TF1 behaviour is on (disable_v2_behavior).
    with context.eager_mode():
        _fetch_eagerly(handle, dtypes, shapes, elements, stop)


def _fetch_eagerly(handle, dtypes, shapes, elements, stop):
    def put(item):
        while not stop.is_set():
            try:
                elements.put(item, timeout=_POLL_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    while not stop.is_set():
        try:
            element = tf.raw_ops.IteratorGetNext(
                iterator=handle, output_types=dtypes, output_shapes=shapes)
        except (tf.errors.OutOfRangeError, tf.errors.CancelledError):
            put(_END)
            return
        except Exception as e:  # noqa: BLE001 - handed to the device side
            put(e)
            return
        if not put([np.asarray(e) for e in element]):
            return


_POLL_SECONDS = 0.1
_INFEEDS = weakref.WeakValueDictionary()  # id(handle) -> Infeed, while sessions use it
_PREFETCH_DEPTHS = {}  # id(handle) -> depth, while the handle lives


def infeed_dataset(dataset):
    """`dataset` with the options of a device infeed: tf.data's autotuning off.

    The autotuner's thread models the pipeline from the gaps between `GetNext` calls,
    and a device reads its infeed in bursts, one execution's worth at a time. Once
    executions used the other core too (`ops/cores.py`), destroying the iterator at the
    end of a `fit` waited for that thread for 0.4 to 25 s. Without autotuning,
    `AUTOTUNE` parallelism and buffer sizes take tf.data's fixed defaults.
    """
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def set_prefetch_depth(handle, depth):
    """Record the prefetch depth an `IPUInfeedQueue` asked for its iterator handle."""
    key = id(handle)
    _PREFETCH_DEPTHS[key] = depth
    weakref.finalize(handle, _PREFETCH_DEPTHS.pop, key, None)


def infeed_for(handle, types):
    """The process's one Infeed for an iterator resource handle."""
    key = id(handle)
    infeed = _INFEEDS.get(key)
    if infeed is None or infeed.handle is not handle:
        infeed = _INFEEDS[key] = Infeed(handle, types, _PREFETCH_DEPTHS.get(key))
    return infeed


class StreamSet:
    """The streams of one execution, as the engine sees them."""

    def __init__(self, infeeds, num_outfeeds):
        self.infeeds = infeeds
        self.taken = [[] for _ in infeeds]
        self.enqueued = [[] for _ in range(num_outfeeds)]

    def pull(self, feed):
        element = self.infeeds[feed].pull()
        self.taken[feed].append(element)
        return element

    def give_back(self):
        """After a failed execution: its elements go back to the infeeds that can take them."""
        for infeed, elements in zip(self.infeeds, self.taken):
            if elements and hasattr(infeed, "unread"):
                infeed.unread(elements)
        self.taken = [[] for _ in self.infeeds]

    def push(self, feed, arrays):
        self.enqueued[feed].append([np.array(a) for a in arrays])

    def collective(self, op, values, params):
        """A collective of the only replica: the index is 0, a reduction the value."""
        del params
        index = get_op(op).role == "replica_index"
        return np.int32(0) if index else np.array(values[0], copy=True)
