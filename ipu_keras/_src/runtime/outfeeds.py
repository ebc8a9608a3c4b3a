"""The live outfeed queues, by id: each `IPUOutfeedQueue` registers itself when made.

The queue stamps its id on the ops it enqueues; the tracer resolves those marks through
`registry()`, which the driver, the Keras program and the TF1 cluster hand it. Queues are
held weakly: a queue the user dropped leaves the registry.
"""
import itertools
import weakref

_ids = itertools.count(1)
_QUEUES = weakref.WeakValueDictionary()


def register(queue):
    """Gives `queue` a new id, remembers it under that id, and returns the id."""
    queue_id = next(_ids)
    _QUEUES[queue_id] = queue
    return queue_id


def registry():
    """Queue id -> IPUOutfeedQueue, for the tracer to resolve enqueue ops."""
    return dict(_QUEUES)
