"""The host heap the simulator's arrays live on: freed memory is kept for the next step.

Each kernel allocates its results afresh, and a step of a convolutional model frees and
allocates the same few megabyte-sized arrays again and again. glibc serves such
allocations with fresh `mmap`ed pages and returns them on free, so every step
page-faults its arrays in anew (the Keras tutorial's CNN of `bench/families.py`: 50,875
minor faults over its 60 steps, 17,275 with this; system time 0.27 -> 0.11 s).
`keep_freed_memory()` asks glibc once per process to take allocations up to 32 MiB from
the heap and not to trim it, so a step reuses the pages the previous one freed. A thread
other than the main one (a slab worker, `ops/cores.py`) allocates from heaps of 64 MiB
of its own, and glibc unmaps such a heap as soon as it is free whatever the trim
threshold, unless the top pad is a heap's size: with it, ResNet-50's convolution
gradients computed whole in the worker (`simulator/siblings.py`) faulted 1 to 55 pages
per step instead of 2,605. The resident size then stays at its peak instead of shrinking
between executions. Elsewhere than on glibc this does nothing.
"""
import ctypes
import ctypes.util
import threading

_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024   # glibc's largest (HEAP_MAX_SIZE / 2 on 64 bits)
TRIM_THRESHOLD = 2**31 - 1          # the largest int mallopt takes: never trim
TOP_PAD = 64 * 1024 * 1024          # HEAP_MAX_SIZE: a thread's free heaps are kept

_done = []
_lock = threading.Lock()


def keep_freed_memory():
    """Sets glibc's mmap and trim thresholds and top pad once per process; True if they
    were set."""
    with _lock:
        if not _done:
            _done.append(_set_thresholds())
    return _done[0]


def _set_thresholds():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):   # no C library, or not glibc
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return all([bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)),
                bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)),
                bool(mallopt(_M_TOP_PAD, TOP_PAD))])
