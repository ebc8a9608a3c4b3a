"""How many threads numpy's BLAS uses while the simulator runs, and the products that widen.

During an execution BLAS runs on one thread (`execution()`, entered by the runtime's
session): the simulator's products are mostly small and many, and a multi-threaded
BLAS waking its threads for each of them, beside TensorFlow's own, costs more than it
gains. A product of at least `WIDE_MACS` multiply-accumulates is different: splitting
it over every core the process may use is up to 1.8x faster on two cores (measured per
shape with `python bench/blas_threads.py`). So the kernels whose products can be large
(matmul, convolutions, einsum) call `matmul(a, b)` or enter `wide(macs)`, which lend
BLAS the other cores for that one call when the product is large enough.

Replicas run in threads of their own (`runtime/replicas.py`) and so never widen:
`execution(widen=False)`. Results do not depend on the thread count beyond float32
rounding of the partial sums BLAS splits differently (the same shape always takes the
same path, so a run is reproducible).
"""
import contextlib
import math
import os
import threading

import numpy as np

# Products of at least this many multiply-accumulates use every core: below it, waking
# the second thread costs more than it saves (bench/blas_threads.py, 2 cores).
WIDE_MACS = 4_000_000

_state = threading.local()
_lock = threading.Lock()
_controllers = []


def _blas():
    """threadpoolctl's controllers of the BLAS libraries numpy loaded (created once)."""
    with _lock:
        if not _controllers:
            from threadpoolctl import ThreadpoolController
            _controllers.append(ThreadpoolController().select(user_api="blas").lib_controllers)
    return _controllers[0]


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def set_threads(count):
    """Sets the thread count of every BLAS library numpy loaded."""
    for library in _blas():
        library.set_num_threads(count)


@contextlib.contextmanager
def execution(widen=True):
    """BLAS on one thread for the duration; `widen`: large products may use every core."""
    libraries = _blas()
    before = [library.num_threads for library in libraries]
    previous = getattr(_state, "wide_threads", 1)
    _state.wide_threads = min(_cores(), max(before, default=1)) if widen else 1
    set_threads(1)
    try:
        yield
    finally:
        _state.wide_threads = previous
        for library, count in zip(libraries, before):
            library.set_num_threads(count)


def wide_threads():
    """The threads a wide product gets in this thread now (1 outside `execution()`)."""
    return getattr(_state, "wide_threads", 1)


@contextlib.contextmanager
def wide(macs):
    """Inside `execution()`, lets BLAS use every core for a product of `macs` MACs."""
    threads = wide_threads()
    if threads <= 1 or macs < WIDE_MACS:
        yield
        return
    set_threads(threads)
    try:
        yield
    finally:
        set_threads(1)


def matmul(a, b):
    """`np.matmul(a, b)` of operands of rank >= 2, on every core when it is large."""
    batch = max(math.prod(a.shape[:-2]), math.prod(b.shape[:-2]))
    with wide(batch * a.shape[-2] * a.shape[-1] * b.shape[-1]):
        return np.matmul(a, b)
