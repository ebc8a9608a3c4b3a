"""`IPUInfeedQueue`: a dataset streamed to the device ahead of the steps that read it."""
import tensorflow as tf

from ipu_keras.errors import FeedError
from ipu_keras.runtime import set_prefetch_depth


class IPUInfeedQueue:
    """Wraps a `tf.data.Dataset` as a host-to-device stream.

    Iterate it (`next(queue)`) inside a compiled function, or pass it to
    `loops.repeat`. Every element must have a fully defined shape: batch with
    `drop_remainder=True`.

    Args:
        dataset: The `tf.data.Dataset` to stream.
        prefetch_depth: How many elements the host thread fetches ahead of the device.
    """

    def __init__(self, dataset, prefetch_depth=None, **_):
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
        self._iterator = iter(dataset)
        self.prefetch_depth = prefetch_depth
        set_prefetch_depth(self._iterator._iterator_resource, prefetch_depth)

    @property
    def element_spec(self):
        return self._dataset.element_spec

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._iterator)

    def _dequeue(self):
        return next(self._iterator)

    @property
    def initializer(self):
        """Kept for compatibility with TF1 code: the queue needs no initialisation."""
        return None

    @property
    def deleter(self):
        return None
