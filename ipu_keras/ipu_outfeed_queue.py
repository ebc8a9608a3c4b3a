"""`IPUOutfeedQueue`: the device-to-host stream a compiled function enqueues to.

`dequeue` returns `tf.Tensor`s, as the original does. The SDK 2.1-2.3 constructor
(`feed_name` first, `outfeed_all_replicas`, `replication_factor`, `io_batch_size`) is
accepted with a DeprecationWarning once per old argument.
"""
import enum
import inspect

import numpy as np
import tensorflow as tf

from ipu_keras._src import compat
from ipu_keras.errors import FeedError
from ipu_keras._src.tf1 import in_graph_mode
from ipu_keras._src.tf1.feeds import dequeue_op
from ipu_keras._src.runtime.outfeeds import register
from ipu_keras._src.tracer import set_outfeed_marker


class IPUOutfeedMode(enum.Enum):
    """ALL: dequeue stacks every enqueue on a new leading axis. LAST: only the last one."""

    ALL = "all"
    LAST = "last"


class IPUOutfeedQueue:
    """A device-to-host FIFO.

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
        if self.outfeed_mode is IPUOutfeedMode.LAST:
            self._elements = elements[-1:]
        else:
            self._elements.extend(elements)

    def dequeue(self):
        """Everything enqueued since the last dequeue, as `tf.Tensor`s in the enqueued structure.

        With mode ALL each leaf is stacked over the enqueues on a new leading axis; with
        LAST the leaves of the last enqueue are returned as they are.
        """
        if in_graph_mode():
            return dequeue_op(self)
        elements, self._elements = self._elements, []
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
