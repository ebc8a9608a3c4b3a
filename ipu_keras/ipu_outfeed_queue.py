"""`IPUOutfeedQueue`: the device-to-host stream a compiled function enqueues to.

`dequeue` returns `tf.Tensor`s, as the original does. Iterating over the queue (`for x in
queue`, SDK 2.5+, eager only, mode ALL) yields what was enqueued one enqueue at a time
(`IPUOutfeedQueueIterator`), and stops when the queue is drained. The SDK 2.1-2.3 constructor
(`feed_name` first, `outfeed_all_replicas`, `replication_factor`, `io_batch_size`) is
accepted with a DeprecationWarning once per old argument.
"""
import collections
import collections.abc
import enum
import inspect
import threading

import numpy as np
import tensorflow as tf

from ipu_keras._src import compat
from ipu_keras.errors import FeedError, OutfeedIterationError
from ipu_keras._src.tf1 import in_graph_mode
from ipu_keras._src.tf1.feeds import dequeue_op
from ipu_keras._src.runtime.outfeeds import register
from ipu_keras._src.tracer import set_outfeed_marker


class IPUOutfeedMode(enum.Enum):
    """ALL: dequeue stacks every enqueue on a new leading axis. LAST: only the last one."""

    ALL = "all"
    LAST = "last"


class IPUOutfeedQueue(collections.abc.Iterable):
    """A device-to-host FIFO.

    In eager mode a queue of mode ALL can be iterated over: `for x in queue` yields each
    enqueued structure in turn (see `IPUOutfeedQueueIterator`).

    Args:
        outfeed_mode: `IPUOutfeedMode.ALL` (default) or `IPUOutfeedMode.LAST`.
        device_ordinal: Accepted for compatibility; there is one simulated device.
        buffer_depth: Accepted for compatibility; the simulator's host buffer is unbounded.
        optimise_latency: Accepted for compatibility; no effect on the simulator.
    """

    def __init__(self, *args, **kwargs):
        arguments = _SIGNATURE.bind((self,) + args, kwargs)
        outfeed_mode, buffer_depth = arguments["outfeed_mode"], arguments["buffer_depth"]
        mode = outfeed_mode or IPUOutfeedMode.ALL
        if not isinstance(mode, IPUOutfeedMode):
            raise FeedError(
                f"outfeed_mode expected an IPUOutfeedMode (ALL or LAST). Received: "
                f"outfeed_mode={outfeed_mode!r}"
            )
        self.outfeed_mode = mode
        self.buffer_depth = buffer_depth
        self._id = register(self)
        self._structure = None
        self._elements = []
        self._lock = threading.Lock()

    def enqueue(self, tensors):
        """Enqueue a tensor or nested structure of tensors; call inside a compiled function."""
        if tf.executing_eagerly():
            raise FeedError(
                "IPUOutfeedQueue.enqueue expected to be called inside a function compiled for "
                "the IPU (a tf.function run by IPUStrategy.run or ipu_compiler.compile). "
                "Received: a call in eager mode."
            )
        flat = tf.nest.flatten(tensors)
        outputs = tf.raw_ops.IdentityN(input=[tf.convert_to_tensor(t) for t in flat])
        set_outfeed_marker(outputs[0].op, self._id)
        self._structure = tf.nest.map_structure(lambda _: 0, tensors)
        self._graph_specs = [tf.TensorSpec(t.shape, t.dtype) for t in outputs]
        return outputs[0].op

    def _deliver(self, elements):
        if not elements:
            return
        with self._lock:
            if self.outfeed_mode is IPUOutfeedMode.LAST:
                self._elements = elements[-1:]
            else:
                self._elements.extend(elements)

    def _take(self):
        """Every enqueue delivered since the last take (each a flat list of arrays)."""
        with self._lock:
            elements, self._elements = self._elements, []
        return elements

    def __iter__(self):
        return IPUOutfeedQueueIterator(self)

    def dequeue(self):
        """Everything enqueued since the last dequeue, as `tf.Tensor`s in the enqueued structure.

        With mode ALL each leaf is stacked over the enqueues on a new leading axis; with
        LAST the leaves of the last enqueue are returned as they are.
        """
        if in_graph_mode():
            return dequeue_op(self)
        elements = self._take()
        if self._structure is None:
            return []
        if self.outfeed_mode is IPUOutfeedMode.LAST:
            if not elements:
                return tf.nest.pack_sequence_as(self._structure, [None] * len(
                    tf.nest.flatten(self._structure)))
            flat = list(elements[-1])
        else:
            n = len(tf.nest.flatten(self._structure))
            flat = [np.stack([e[i] for e in elements]) if elements else np.zeros((0,))
                    for i in range(n)]
        return tf.nest.pack_sequence_as(self._structure, [tf.convert_to_tensor(x) for x in flat])


class IPUOutfeedQueueIterator(collections.abc.Iterator):
    """Yields the items of an `IPUOutfeedQueue` one enqueue at a time (SDK 2.5+, TF2 only).

    Each item is the structure given to `enqueue` (a tensor, tuple, list or dict of
    `tf.Tensor`s) with the values of one enqueue, in enqueue order; a replicated program's
    items keep the replica axis first. When nothing is left it looks at the queue once more
    and stops if that is empty too, so a loop ends when the queue is drained at that moment;
    a new `iter(queue)` after the next execution yields the new items. Items it yields are
    gone from the queue, as if dequeued.

    Args:
        outfeed_queue: An `IPUOutfeedQueue` of mode `IPUOutfeedMode.ALL`, in eager mode.
    """

    def __init__(self, outfeed_queue):
        if in_graph_mode():
            raise OutfeedIterationError(
                "IPUOutfeedQueue can only be iterated over in eager mode. Received: an "
                "iteration in a TF1 graph; run the queue's dequeue() op instead.")
        if outfeed_queue.outfeed_mode is not IPUOutfeedMode.ALL:
            raise OutfeedIterationError(
                "IPUOutfeedQueue can only be iterated over if the `outfeed_mode` is set to "
                f"'IPUOutfeedMode.ALL'. Received: outfeed_mode={outfeed_queue.outfeed_mode}")
        self._queue = outfeed_queue
        self._items = collections.deque()

    def __iter__(self):
        return self

    def __next__(self):
        if not self._items:
            structure = self._queue._structure
            for flat in self._queue._take():
                self._items.append(tf.nest.pack_sequence_as(
                    structure, [tf.convert_to_tensor(x) for x in flat]))
        if not self._items:
            raise StopIteration
        return self._items.popleft()


def _current(self, outfeed_mode=None, device_ordinal=None, buffer_depth=1, optimise_latency=False):
    """The constructor's signature since SDK 2.4."""


def _sdk21(self, feed_name=None, outfeed_mode=None, outfeed_all_replicas=False, device_ordinal=0,
           replication_factor=1, io_batch_size=1, buffer_depth=1):
    """The constructor's signature in SDK 2.1-2.3."""


_RENAMED = {
    "feed_name": "IPUOutfeedQueue() without feed_name (names are generated)",
    "outfeed_all_replicas": "IPUOutfeedQueue() (every replica is outfed)",
    "replication_factor": "IPUOutfeedQueue() (the replication factor comes from the model)",
    "io_batch_size": "IPUOutfeedQueue() (accumulate results on the device instead)",
}
_SIGNATURE = compat.LegacySignature(
    "ipu.ipu_outfeed_queue.IPUOutfeedQueue", _current, _sdk21, _RENAMED,
    lambda args, kwargs: len(args) > 1 and isinstance(args[1], str))
IPUOutfeedQueue.__init__.__signature__ = inspect.signature(_current)
