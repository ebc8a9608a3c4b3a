"""How the simulator's kernels use the host's cores during an execution.

During an execution numpy's BLAS runs on one thread (`execution()`, entered by the
runtime's session). Large kernels are split instead: the output is cut along one axis
into one slab per core and each slab computed by its own thread, writing into one
preallocated result (numpy releases the GIL inside its loops and BLAS calls). That is
`rowwise(fn, xs, dtype)` for compute-bound elementwise (and row by row) kernels of at
least `SPLIT_ELEMENTS` outputs (exp, erfc, softmax: memory-bound ones such as add or relu
were no faster split, the two cores sharing one memory bus); `batchwise(...)` for
kernels independent per batch element (convolutions and their input gradients, pooling
gradients: their im2col copies and scatters split too); `batch_sum(...)` for sums over
the batch (convolutions' filter gradients: a partial sum per slab, added in order),
`matmul(a, b)` and `einsum(...)`, each for products of at least `WIDE_MACS`
multiply-accumulates. A slab is never split again. `concurrently(first, second)` runs two
independent kernels at once, each whole on one of two cores (the engine's sibling
products, `simulator/siblings.py`).

Why not BLAS's own threads: OpenBLAS' idle threads spin for a while after each call,
so after one multi-threaded product the next kernel's second thread found its core
taken (a split erfc after a wide matmul: 20 -> 30 ms). The slab workers sleep when idle.

A row slab computes each output element from the same input elements by the
same code, so the result is bitwise the one-thread result; a product's slab is a
smaller product with the same contraction order per element (checked against the
float32 sum bound in tests/runtime/test_host_threads.py). Replicas run in threads of
their own (`runtime/replicas.py`) and never split: `execution(widen=False)`.
Measured per size with `python bench/host_cores.py`.
"""
import concurrent.futures
import contextlib
import functools
import math
import os
import threading

import numpy as np

# Products of at least this many multiply-accumulates are split: a hand-off to a worker
# costs tens of microseconds here (a 4.2M-MAC product ran 99 us whole, 119 us split).
WIDE_MACS = 16_000_000
# ... and along rows if each slab gets this many (fewer rows: no faster split), else along
# columns if each gets MIN_SLAB_COLUMNS: a 3x3 convolution at 2x2 by 512 channels in
# ResNet-50 (32 x 4608 x 512, 75M MACs) ran 2.06 ms whole, 1.27 ms in two column slabs.
MIN_SLAB_ROWS = 32
MIN_SLAB_COLUMNS = 64
# Elementwise kernels with at least this many outputs are split: a slab of a quarter
# million elements is a fraction of a millisecond.
SPLIT_ELEMENTS = 1 << 18

_state = threading.local()
_lock = threading.Lock()
_controllers = []
_pools = []


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


def _pool():
    """The process's slab workers (one per core beyond the calling thread's); a forked
    child, which has none of its parent's threads, makes its own."""
    with _lock:
        if not _pools or _pools[0][0] != os.getpid():
            _pools[:] = [(os.getpid(), concurrent.futures.ThreadPoolExecutor(
                max_workers=max(_cores() - 1, 1), thread_name_prefix="ipu_keras_core"))]
    return _pools[0][1]


@contextlib.contextmanager
def execution(widen=True):
    """BLAS on one thread for the duration; `widen`: large kernels are split over the cores."""
    libraries = _blas()
    before = [library.num_threads for library in libraries]
    previous = slabs()
    _state.slabs = _cores() if widen else 1
    for library in libraries:
        library.set_num_threads(1)
    try:
        yield
    finally:
        _state.slabs = previous
        for library, count in zip(libraries, before):
            library.set_num_threads(count)


def slabs():
    """How many slabs a large kernel is cut into in this thread now (1: not split)."""
    return getattr(_state, "slabs", 1)


def _split(compute, length, count):
    """Runs `compute(rows)` for `count` slices of range(length), the first in this thread."""
    bounds = [length * i // count for i in range(count + 1)]
    _run_parts([functools.partial(compute, slice(lo, hi))
                for lo, hi in zip(bounds, bounds[1:])])


def _run_parts(parts):
    """Runs the callables `parts` at once, the first in this thread and the others in the
    slab workers, each as one slab (not split again); returns when all have run, and
    raises if one failed."""
    errors = np.geterr()   # numpy's error state is per thread: the workers take the caller's

    def run(part):
        previous = slabs()
        _state.slabs = 1   # a slab is not split again
        try:
            with np.errstate(**errors):
                part()
        finally:
            _state.slabs = previous

    others = [_pool().submit(run, part) for part in parts[1:]]
    try:
        run(parts[0])
    finally:
        for other in others:
            other.result()


def concurrently(first, second):
    """Runs the independent kernels `first()` in this thread and `second()` in a slab
    worker at once, each whole on one core, when kernels are split over exactly two cores
    here now; else one after the other (each split as it would be). For two products of
    about equal work: one hand-off to the worker instead of one per product."""
    if slabs() == 2:
        _run_parts([first, second])
    else:
        first()
        second()


def each_slab(compute, length):
    """Runs `compute(rows)` on one slice of range(length) per core, the first in this
    thread, or on the whole range when kernels are not split here now."""
    count = slabs()
    if count <= 1 or length < count:
        compute(slice(0, length))
    else:
        _split(compute, length, count)


def _into(shape, dtype, length, count, write, out=None):
    """An array of `shape` and `dtype` (`out`, or a new one) whose slabs `write(out, rows)`
    fills, split `count` ways along its axis of `length` (the first, or the rows of a
    product)."""
    out = np.empty(shape, dtype) if out is None else out
    _split(lambda rows: write(out, rows), length, count)
    return out


def rows_of(x, shape, rows):
    """An operand's `rows` of a result of `shape` it broadcasts into: cut on the first
    axis if it has the result's rank and spans that axis, else whole (it broadcasts
    there). How a rowwise computation cuts its inputs (here and `simulator/fusion.py`)."""
    return _cut(x, 0 if np.ndim(x) == len(shape) else -1, shape[0], rows)


def _cut(x, axis, length, rows):
    """`x` sliced at `rows` on `axis` if it spans `length` there; else whole (broadcast)."""
    if axis < 0 or np.ndim(x) <= axis or np.shape(x)[axis] != length:
        return x
    return x[(slice(None),) * axis + (rows,)]


def rowwise(fn, xs, dtype):
    """`fn(*xs)` as an array of `dtype`, a slab per core along the output's first axis when
    it is large. `fn` must compute each index of that axis from the same index of the
    (numpy-broadcast) inputs alone: elementwise kernels, or a softmax over a later axis."""
    count = slabs()
    # The largest input gates it cheaply (a kernel's inputs are mostly its output's size).
    if count <= 1 or max(np.size(x) for x in xs) < SPLIT_ELEMENTS:
        return np.asarray(fn(*xs), dtype=dtype)
    shape = np.broadcast_shapes(*(np.shape(x) for x in xs))
    if shape[0] < count:
        return np.asarray(fn(*xs), dtype=dtype)

    def write(out, rows):
        parts = [rows_of(x, shape, rows) for x in xs]
        if isinstance(fn, np.ufunc):
            fn(*parts, out=out[rows], casting="unsafe")
        else:
            out[rows] = fn(*parts)

    return _into(shape, dtype, shape[0], count, write)


def rowwise_kernel(kernel):
    """`kernel(*xs, **params)` as a kernel computed by `rowwise` in the first input's
    dtype: how an op registers a compute-bound elementwise kernel."""
    def run(*xs, **params):
        fn = functools.partial(kernel, **params) if params else kernel
        return rowwise(fn, xs, xs[0].dtype)

    run.__name__ = getattr(kernel, "__name__", "kernel")
    return run


def batchwise(fn, xs, batched, shape, dtype, into=False, min_elements=SPLIT_ELEMENTS,
              macs=None):
    """`fn(*xs)`, of `shape` and `dtype`, a slab per core along the batch when it has at
    least `min_elements` outputs and, for a product (`macs` given), at least `WIDE_MACS`
    multiply-accumulates, as `batch_sum` asks.

    `fn` must compute each index of its output's first axis (the batch) from the same
    index of the first axis of the inputs flagged in `batched` and the whole of the
    others: a convolution (batched input, whole filter), a pooling gradient. `into`:
    `fn` also takes `out=`, the (contiguous) slab of the result to fill, and fills it
    instead of returning a slab that is then copied there. A kernel that makes many
    short numpy calls per slab wants a larger `min_elements`: two threads making them
    take turns at the GIL, and each turn waited for costs a thread wake-up.
    """
    count = slabs()
    if (count <= 1 or math.prod(shape) < min_elements or shape[0] < count
            or (macs is not None and macs < WIDE_MACS)):
        return np.asarray(fn(*xs), dtype=dtype)

    def write(out, rows):
        parts = (x[rows] if cut else x for x, cut in zip(xs, batched))
        if into:
            fn(*parts, out=out[rows])
        else:
            out[rows] = fn(*parts)

    return _into(shape, dtype, shape[0], count, write)


def batch_sum(fn, xs, size, macs):
    """The sum over the batch of `fn(*xs)`, where `fn` sums its inputs' batch (their first
    axis) itself, reading `size` elements and doing `macs` multiply-accumulates in all:
    one partial sum per core over a slab of the batch, added in order, when both are
    large (SPLIT_ELEMENTS, and WIDE_MACS as for a product). With fewer multiply-
    accumulates the hand-off costs more than the split saves (a convolution's filter
    gradient of 12.5M ran 2.0 ms whole, 2.5 ms split in the tutorial CNN's fit). The sum's
    order differs from one call's by those partial sums (a float32 sum bound, like a
    split product)."""
    count = slabs()
    if count <= 1 or size < SPLIT_ELEMENTS or macs < WIDE_MACS or len(xs[0]) < count:
        return fn(*xs)
    partials = {}   # first batch index of a slab -> its partial sum

    def compute(rows):
        partials[rows.start] = fn(*(x[rows] for x in xs))

    _split(compute, len(xs[0]), count)
    first, *others = (partials[start] for start in sorted(partials))
    for partial in others:
        first += partial
    return first


def matmul(a, b, out=None):
    """`np.matmul(a, b, out=out)` of operands of rank >= 2, a slab per core when it is
    large: cut along the leading batch axis if it has a slab per core, else along the rows
    of `a` if each slab gets at least MIN_SLAB_ROWS of them, else along the columns of `b`
    if each gets MIN_SLAB_COLUMNS (a slab writes its columns of the result in place: BLAS
    takes the result's row stride)."""
    count = slabs()
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if count <= 1 or max(math.prod(a.shape[:-2]), math.prod(b.shape[:-2])) * m * k * n \
            < WIDE_MACS:
        return np.matmul(a, b, out=out)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    shape, dtype = batch + (m, n), np.result_type(a, b)
    if batch and batch[0] >= count:
        def write(out, rows):
            np.matmul(*(rows_of(x, shape, rows) for x in (a, b)), out=out[rows])
        return _into(shape, dtype, batch[0], count, write, out)
    if m >= MIN_SLAB_ROWS * count:
        def write(out, rows):
            np.matmul(a[..., rows, :], b, out=out[..., rows, :])
        return _into(shape, dtype, m, count, write, out)
    if n >= MIN_SLAB_COLUMNS * count:   # few rows, many columns: slabs of b's columns
        def write(out, columns):
            np.matmul(a, b[..., columns], out=out[..., columns])
        return _into(shape, dtype, n, count, write, out)
    return np.matmul(a, b, out=out)


def einsum(equation, operands, macs, optimize):
    """`np.einsum(equation, *operands)`, a slab per core when it has `macs` >= WIDE_MACS
    and an explicit output whose first label is a letter: cut along that label."""
    count = slabs()
    inputs, arrow, output = equation.replace(" ", "").partition("->")
    subscripts = inputs.split(",")
    if (count <= 1 or macs < WIDE_MACS or not arrow or not output[:1].isalpha()
            or any("." in s for s in subscripts + [output])):
        return np.einsum(equation, *operands, optimize=optimize)
    label = output[0]
    sizes = {}
    for subscript, x in zip(subscripts, operands):
        if subscript.count(label) > 1:   # a diagonal: not cut
            return np.einsum(equation, *operands, optimize=optimize)
        for name, size in zip(subscript, np.shape(x)):
            if size != 1 or name not in sizes:
                sizes[name] = size
    length = sizes[label]
    if length < count:
        return np.einsum(equation, *operands, optimize=optimize)

    def write(out, rows):
        out[rows] = np.einsum(equation, *(_cut(x, s.find(label), length, rows)
                                          for s, x in zip(subscripts, operands)),
                              optimize=optimize)

    return _into(tuple(sizes[name] for name in output), np.result_type(*operands), length,
                 count, write)
