"""Infeeds and outfeeds in a TensorFlow 1 graph.

An `IPUInfeedQueue` made in graph mode puts an iterator handle op in the user's graph;
`next(queue)` in a compiled function reads it with `IteratorGetNext`. Its
`initializer` is a host op that turns the graph's dataset into an eager iterator (the
one the simulator's infeed thread pulls from); the compiled cluster binds the handle
op to that iterator when it is traced. `IPUOutfeedQueue.dequeue()` in graph mode is a
host op returning what the executions delivered since the last dequeue.
"""
import weakref

import numpy as np
import tensorflow as tf

from ipu_keras.errors import FeedError
from ipu_keras._src.runtime import set_prefetch_depth

_ITERATORS = weakref.WeakValueDictionary()   # (graph id, handle op name) -> GraphInfeed


class GraphInfeed:
    """The graph-mode state of one `IPUInfeedQueue`."""

    def __init__(self, queue, dataset, prefetch_depth):
        self.queue = queue
        self.dataset = dataset
        self.prefetch_depth = prefetch_depth
        spec = dataset.element_spec
        self.flat_specs = tf.nest.flatten(spec)
        with tf.device("cpu"):
            self.handle = tf.raw_ops.IteratorV2(
                    shared_name="", container="",
                    output_types=[s.dtype for s in self.flat_specs],
                    output_shapes=[s.shape for s in self.flat_specs])
        _ITERATORS[(id(self.handle.graph), self.handle.op.name)] = self
        self.iterator = None
        self.initializer_taken = False

    def get_next(self):
        element = tf.raw_ops.IteratorGetNext(
            iterator=self.handle, output_types=[s.dtype for s in self.flat_specs],
            output_shapes=[s.shape for s in self.flat_specs])
        return tf.nest.pack_sequence_as(self.dataset.element_spec, list(element))

    def initializer(self):
        if self.initializer_taken:
            raise ValueError(
                "The IPUInfeedQueue `initializer` function can only be accessed once.")
        self.initializer_taken = True
        with tf.device("cpu"):
            serialized = self.dataset._as_serialized_graph()  # noqa: SLF001
            return tf.group(tf.py_function(self._start, [serialized], []),
                            name="infeed_initializer")

    def deleter(self):
        with tf.device("cpu"):
            return tf.group(tf.py_function(self._stop, [], []), name="infeed_deleter")

    def _stop(self):
        self.iterator = None
        return []

    def _start(self, serialized):
        variant = tf.raw_ops.DatasetFromGraph(graph_def=serialized)
        dataset = tf.data.experimental.from_variant(variant, self.dataset.element_spec)
        self.iterator = iter(dataset)
        set_prefetch_depth(self.iterator._iterator_resource, self.prefetch_depth)  # noqa: SLF001
        return []

    def eager_handle(self):
        if self.iterator is None:
            raise FeedError(
                "The IPUInfeedQueue expected its initializer to have been run before the "
                "compiled function that reads it. Received: a run before "
                "sess.run(infeed_queue.initializer). Run the initializer once first.")
        return self.iterator._iterator_resource  # noqa: SLF001


def queue_of_iterator(graph, op_name):
    """The GraphInfeed whose iterator handle op is `op_name` in `graph`, or None."""
    return _ITERATORS.get((id(graph), op_name))


def dequeue_op(queue):
    """A host op returning the elements `queue` received since its last dequeue."""
    if queue._structure is None:  # noqa: SLF001
        raise FeedError(
            "IPUOutfeedQueue.dequeue expected the queue to have been enqueued to in a "
            "function compiled before. Received: a dequeue of a queue nothing enqueues to. "
            "Create the dequeue op after ipu_compiler.compile.")
    specs = queue._graph_specs  # noqa: SLF001
    last = queue.outfeed_mode.value == "last"

    def take():
        elements = queue._take()  # noqa: SLF001 - under the queue's lock, as dequeue takes
        if last:
            if not elements:
                return [np.zeros(s.shape, s.dtype.as_numpy_dtype) for s in specs]
            return list(elements[-1])
        return [np.stack([e[i] for e in elements]) if elements else
                np.zeros((0,) + tuple(s.shape), s.dtype.as_numpy_dtype)
                for i, s in enumerate(specs)]

    with tf.device("cpu"):
        flat = tf.py_function(take, [], [s.dtype for s in specs], name="outfeed_dequeue")
    flat = list(flat) if isinstance(flat, (list, tuple)) else [flat]
    for tensor, spec in zip(flat, specs):
        tensor.set_shape(spec.shape if last else [None] + list(spec.shape))
    return tf.nest.pack_sequence_as(queue._structure, flat)  # noqa: SLF001
