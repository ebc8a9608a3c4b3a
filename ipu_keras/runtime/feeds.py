"""Host ends of the device's streams: the infeed thread and the outfeed buffer.

An `Infeed` pulls elements from a TensorFlow dataset iterator (through its resource
handle, with `IteratorGetNext` run eagerly) on a host thread, ahead of the device, up
to `prefetch_depth` elements. Elements it fetched but the device did not take stay
queued for the next execution, so no data is lost between executions.

`StreamSet` is what the engine sees during one execution: `pull(feed)` takes the
next element of an infeed; `push(feed, arrays)` records an outfeed enqueue, which is
handed to the outfeed queue only when the execution completes.
"""
import queue
import threading

import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context

from ipu_keras.errors import FeedError, InfeedExhaustedError

DEFAULT_PREFETCH_DEPTH = 4
_END = object()


class Infeed:
    """Prefetches elements of one dataset iterator on a daemon thread."""

    def __init__(self, handle, types, prefetch_depth=None):
        self.handle = handle
        self.types = list(types)
        self.depth = prefetch_depth or DEFAULT_PREFETCH_DEPTH
        self._queue = queue.Queue(maxsize=self.depth)
        self._thread = None
        self._ended = False

    def _fetch(self):
        # A new thread starts in graph mode when TF1 behaviour is on (disable_v2_behavior).
        with context.eager_mode():
            self._fetch_eagerly()

    def _fetch_eagerly(self):
        dtypes = [tf.as_dtype(t.dtype) for t in self.types]
        shapes = [t.shape for t in self.types]
        while True:
            try:
                element = tf.raw_ops.IteratorGetNext(
                    iterator=self.handle, output_types=dtypes, output_shapes=shapes)
                self._queue.put([np.asarray(e) for e in element])
            except (tf.errors.OutOfRangeError, tf.errors.CancelledError):
                self._queue.put(_END)
                return
            except Exception as e:  # noqa: BLE001 - handed to the device side
                self._queue.put(e)
                return

    def pull(self):
        if self._ended:
            raise self._exhausted()
        if self._thread is None:
            self._thread = threading.Thread(target=self._fetch, daemon=True,
                                            name="ipu_keras-infeed")
            self._thread.start()
        element = self._queue.get()
        if element is _END:
            self._ended = True
            raise self._exhausted()
        if isinstance(element, Exception):
            self._ended = True
            raise FeedError(f"The infeed's dataset failed while producing an element: {element}")
        return element

    def _exhausted(self):
        return InfeedExhaustedError(
            "The device asked the infeed for another element but its dataset is exhausted. "
            "Expected the dataset to hold as many elements as the steps that read it; "
            "repeat() the dataset or run fewer steps."
        )


_INFEEDS = {}
_PREFETCH_DEPTHS = {}


def set_prefetch_depth(handle, depth):
    """Record the prefetch depth an `IPUInfeedQueue` asked for its iterator handle."""
    _PREFETCH_DEPTHS[id(handle)] = (handle, depth)


def infeed_for(handle, types):
    """The process's one Infeed for an iterator resource handle."""
    key = id(handle)
    infeed = _INFEEDS.get(key)
    if infeed is None or infeed.handle is not handle:
        depth = _PREFETCH_DEPTHS.get(key, (None, None))[1]
        infeed = _INFEEDS[key] = Infeed(handle, types, depth)
    return infeed


class StreamSet:
    """The streams of one execution, as the engine sees them."""

    def __init__(self, infeeds, num_outfeeds):
        self.infeeds = infeeds
        self.enqueued = [[] for _ in range(num_outfeeds)]

    def pull(self, feed):
        return self.infeeds[feed].pull()

    def push(self, feed, arrays):
        self.enqueued[feed].append([np.array(a) for a in arrays])
