"""One lock per model: its `fit`, `evaluate`, `predict` and `*_on_batch` calls run one at a time.

A model's compiled step programs stage their batches in an infeed and read every step's
outputs from an outfeed that belong to the program, and Keras' own loop keeps its state
(metrics, the step counter, the data adapter) on the model: two threads running one model
at once would take each other's batches and results. Keras on the CPU runs such calls
side by side; here they run in some serial order, each whole, which gives the results of
that order. The lock is reentrant, so `fit` may call `evaluate` (validation) and a callback
may call `predict` in the same thread. A callback that waits for another thread calling
the same model would wait forever; none of Keras' own does.

Locks are kept beside the models (a weak dictionary), not on them, so that a model's
attributes, config and copies are untouched.
"""
import threading
import weakref

_locks = weakref.WeakKeyDictionary()
_guard = threading.Lock()


def model_lock(model):
    """The reentrant lock of `model`'s executions (made on first use)."""
    with _guard:
        lock = _locks.get(model)
        if lock is None:
            lock = _locks[model] = threading.RLock()
    return lock
