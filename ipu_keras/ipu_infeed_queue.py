"""`IPUInfeedQueue`: a dataset streamed to the device ahead of the steps that read it.

The SDK 2.1-2.3 constructor (`feed_name` second, `replication_factor`,
`data_to_prefetch`) is accepted with a DeprecationWarning once per old argument.
"""
import inspect

import tensorflow as tf

from ipu_keras._src import compat
from ipu_keras.errors import FeedError
from ipu_keras._src.runtime import infeed_dataset, set_prefetch_depth
from ipu_keras._src.tf1 import in_graph_mode
from ipu_keras._src.tf1.feeds import GraphInfeed


class IPUInfeedQueue:
    """Wraps a `tf.data.Dataset` as a host-to-device stream.

    Iterate it (`next(queue)`) inside a compiled function, or pass it to
    `loops.repeat`. Every element must have a fully defined shape: batch with
    `drop_remainder=True`.

    Args:
        dataset: The `tf.data.Dataset` to stream.
        device_ordinal: Accepted for compatibility; there is one simulated device.
        prefetch_depth: How many elements the host thread fetches ahead of the device.
        optimise_latency: Accepted for compatibility; no effect on the simulator.
    """

    def __init__(self, *args, **kwargs):
        arguments = _SIGNATURE.bind((self,) + args, kwargs)
        dataset, prefetch_depth = arguments["dataset"], arguments["prefetch_depth"]
        if not isinstance(dataset, tf.data.Dataset):
            raise FeedError(
                f"IPUInfeedQueue expected a tf.data.Dataset. Received: dataset of type "
                f"{type(dataset).__name__}. Wrap the data with "
                "tf.data.Dataset.from_tensor_slices(...).batch(n, drop_remainder=True).")
        for spec in tf.nest.flatten(dataset.element_spec):
            if not spec.shape.is_fully_defined():
                raise FeedError(
                    "IPUInfeedQueue expected every element of the dataset to have a fully "
                    f"defined shape. Received: shape={spec.shape}. Use "
                    "dataset.batch(n, drop_remainder=True)."
                )
        if prefetch_depth is not None and (not isinstance(prefetch_depth, int)
                                           or prefetch_depth < 1):
            raise FeedError(
                f"prefetch_depth expected a positive int. Received: prefetch_depth="
                f"{prefetch_depth!r}"
            )
        self._dataset = dataset
        self.prefetch_depth = prefetch_depth
        self._graph = None
        if in_graph_mode():
            self._graph = GraphInfeed(self, dataset, prefetch_depth)
            return
        self._iterator = iter(infeed_dataset(dataset))
        set_prefetch_depth(self._iterator._iterator_resource, prefetch_depth)

    @property
    def element_spec(self):
        return self._dataset.element_spec

    def __iter__(self):
        return self

    def __next__(self):
        if self._graph is not None:
            return self._graph.get_next()
        return next(self._iterator)

    def _dequeue(self):
        return next(self)

    @property
    def initializer(self):
        """In a TF1 graph, the op that starts the queue (run it once; access it once).

        Eagerly the queue needs no initialisation and this is None.
        """
        if self._graph is not None:
            return self._graph.initializer()
        return None

    @property
    def deleter(self):
        """In a TF1 graph, the op that releases the queue's iterator; eagerly None."""
        if self._graph is not None:
            return self._graph.deleter()
        return None


def _current(self, dataset, device_ordinal=None, prefetch_depth=None, optimise_latency=False):
    """The constructor's signature since SDK 2.4."""


def _sdk21(self, dataset, feed_name=None, device_ordinal=0, replication_factor=1,
           data_to_prefetch=1, prefetch_depth=None):
    """The constructor's signature in SDK 2.1-2.3."""


_RENAMED = {
    "feed_name": "IPUInfeedQueue(dataset) without feed_name (names are generated)",
    "replication_factor": "IPUInfeedQueue(dataset) (the replication factor comes from the model)",
    "data_to_prefetch": "IPUInfeedQueue(dataset, prefetch_depth=...)",
}
_SIGNATURE = compat.LegacySignature(
    "ipu.ipu_infeed_queue.IPUInfeedQueue", _current, _sdk21, _RENAMED,
    lambda args, kwargs: len(args) > 2 and isinstance(args[2], str))
IPUInfeedQueue.__init__.__signature__ = inspect.signature(_current)
