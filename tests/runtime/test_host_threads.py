"""The host resources an execution uses: BLAS threads, the heap, the input pipeline.

`ops/cores.py`: one BLAS thread during an execution, large kernels split into a slab
per core, never for replicas; `runtime/host_heap.py`: freed arrays stay on the heap;
`runtime.infeed_dataset`: datasets feeding the device run without tf.data autotuning.
"""
import platform
import threading

import numpy as np
import pytest
import tensorflow as tf

import ipu_keras
from ipu_keras._src.conformance import tolerances
from ipu_keras._src.ops import cores
from ipu_keras._src.ops.registry import get_op
from ipu_keras._src.runtime import host_heap, infeed_dataset


def _slab_sizes(length):
    """The slab lengths `cores` cuts `length` rows into on this machine."""
    count = cores._cores()
    return sorted(length * (i + 1) // count - length * i // count for i in range(count))


def _threads():
    return {library.num_threads for library in cores._blas()}


def test_an_execution_runs_blas_on_one_thread_and_restores_it_after():
    before = _threads()
    with cores.execution():
        assert _threads() == {1}
        assert cores.slabs() == cores._cores()
    assert _threads() == before
    assert cores.slabs() == 1


def test_a_batchwise_kernel_is_split_along_the_batch_and_not_split_again():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 128, 128)).astype(np.float32)
    w = rng.standard_normal((128, 32)).astype(np.float32)   # whole in every slab
    seen = []

    def kernel(x, w):
        seen.append((len(x), cores.slabs()))
        return cores.matmul(x, w)

    with cores.execution():
        got = cores.batchwise(kernel, (x, w), (True, False), (64, 128, 32), np.float32)
    tolerances.float32_sum("batch slabs", 128, 1.0).assert_close(got, x @ w)
    if cores._cores() > 1:
        assert sorted(seen) == [(rows, 1) for rows in _slab_sizes(64)]


def test_a_batchwise_kernel_below_its_min_elements_runs_whole():
    x = np.ones((64, 128, 128), np.float32)
    seen = []

    def kernel(x):
        seen.append((len(x), cores.slabs()))
        return x + 1

    with cores.execution():
        got = cores.batchwise(kernel, (x,), (True,), x.shape, np.float32,
                              min_elements=x.size + 1)
    np.testing.assert_array_equal(got, x + 1)
    assert seen == [(64, cores._cores())]   # one call, in the calling thread's context


def test_a_batchwise_product_of_few_multiply_accumulates_runs_whole():
    x = np.ones((64, 128, 128), np.float32)
    seen = []

    def kernel(x):
        seen.append(len(x))
        return x + 1

    with cores.execution():
        cores.batchwise(kernel, (x,), (True,), x.shape, np.float32, macs=cores.WIDE_MACS - 1)
        assert seen == [64]
        cores.batchwise(kernel, (x,), (True,), x.shape, np.float32, macs=cores.WIDE_MACS)
    if cores._cores() > 1:
        assert sorted(seen[1:]) == _slab_sizes(64)


def _recorded_batch_sum():
    """A float32 sum over a slab's batch, and the list of the slab lengths it was given."""
    slabs_seen = []

    def total(part):
        slabs_seen.append(len(part))
        return part.sum(axis=0, dtype=np.float32)

    return total, slabs_seen


def test_a_batch_sum_adds_one_partial_sum_per_core_in_order():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 4096)).astype(np.float32)
    total, slabs_seen = _recorded_batch_sum()

    with cores.execution():
        got = cores.batch_sum(total, (x,), x.size, cores.WIDE_MACS)
    tolerances.float32_sum("batch partial sums", 64, 1.0).assert_close(got, x.sum(axis=0))
    if cores._cores() > 1:
        assert sorted(slabs_seen) == _slab_sizes(64)
        count = cores._cores()
        parts = [x[i * 64 // count:(i + 1) * 64 // count].sum(axis=0, dtype=np.float32)
                 for i in range(count)]
        np.testing.assert_array_equal(got, sum(parts[1:], parts[0]))


def test_a_batch_sum_of_few_multiply_accumulates_is_one_sum():
    x = np.ones((64, 4096), np.float32)
    total, slabs_seen = _recorded_batch_sum()

    with cores.execution():
        got = cores.batch_sum(total, (x,), x.size, cores.WIDE_MACS - 1)
    assert slabs_seen == [64]
    np.testing.assert_array_equal(got, np.full(4096, 64, np.float32))


def test_replicas_never_split():
    with cores.execution(widen=False):
        assert cores.slabs() == 1


class _Recorder:
    """Wraps a kernel; records the first-axis length of each call's first input."""

    def __init__(self, fn):
        self.fn, self.rows, self.threads = fn, [], set()

    def __call__(self, *xs):
        self.rows.append(np.shape(xs[0])[0])
        self.threads.add(threading.get_ident())
        return self.fn(*xs)


def test_a_large_elementwise_kernel_is_split_into_one_slab_per_core_bitwise_equal():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 64, 64)).astype(np.float32)
    bias = rng.standard_normal((64,)).astype(np.float32)   # broadcast, not cut
    kernel = _Recorder(lambda a, b: np.exp(a) * b)
    with cores.execution():
        got = cores.rowwise(kernel, (x, bias), np.float32)
    np.testing.assert_array_equal(got, np.exp(x) * bias)
    if cores._cores() > 1:
        assert sorted(kernel.rows) == _slab_sizes(64)
        assert len(kernel.threads) >= 2


def test_a_small_kernel_or_one_outside_an_execution_is_not_split():
    x = np.ones((64, 64, 64), np.float32)
    kernel = _Recorder(np.negative)
    cores.rowwise(kernel, (x,), np.float32)                 # outside an execution
    with cores.execution():
        cores.rowwise(kernel, (x[:1, :8],), np.float32)      # small
    assert kernel.rows == [64, 1]


def test_the_workers_trap_as_the_caller_does():
    x = np.zeros((64, 64, 64), np.float32)
    with cores.execution(), np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            cores.rowwise(lambda a: 1 / a, (x,), np.float32)


@pytest.mark.parametrize("a_shape, b_shape", [
    ((700, 300), (300, 200)),            # rows of a
    ((9, 60000), (60000, 32)),           # few rows and columns: not cut
    ((32, 4608), (4608, 512)),           # few rows: columns of b
    ((1, 32, 4608), (1, 4608, 512)),     # one batch of few rows: columns of b
    ((4, 300, 300), (300, 64)),          # batch, b broadcast
    ((1, 300, 300), (6, 300, 64)),       # batch, a broadcast
])
def test_a_split_product_equals_the_one_thread_product(a_shape, b_shape):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    assert max(np.prod(a_shape[:-2]), np.prod(b_shape[:-2])) * np.prod(a_shape[-2:]) \
        * b_shape[-1] >= cores.WIDE_MACS
    with cores.execution():
        split = cores.matmul(a, b)
    with cores.execution(widen=False):
        one = np.matmul(a, b)
    assert split.shape == one.shape and split.dtype == one.dtype
    # The slabs are smaller products: a sum of k unit terms may round differently.
    tolerances.float32_sum("split product", a_shape[-1], 1.0).assert_close(split, one)


@pytest.mark.parametrize("equation, shapes, terms", [
    ("abc,cd->abd", [(16, 128, 256), (256, 64)], 256),
    ("aecd,abcd->acbe", [(8, 64, 4, 32), (8, 64, 4, 32)], 32),
    ("abcd,aecd->acbe", [(8, 64, 4, 32), (1, 64, 4, 32)], 32),   # b broadcast on 'a'
    ("ii->i", [(2048, 2048)], 1),                                # a diagonal: not cut
])
def test_a_split_einsum_equals_numpys(equation, shapes, terms):
    rng = np.random.default_rng(0)
    operands = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    with cores.execution():
        split = cores.einsum(equation, operands, cores.WIDE_MACS, optimize=len(shapes) > 1)
    one = np.einsum(equation, *operands, optimize=len(shapes) > 1)
    assert split.shape == one.shape and split.dtype == one.dtype
    tolerances.float32_sum("split einsum", terms, 1.0).assert_close(split, one)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's thresholds only")
def test_the_heap_keeps_freed_memory_once_per_process():
    assert host_heap.keep_freed_memory() is True
    assert host_heap.keep_freed_memory() is True


def test_a_device_infeed_dataset_runs_without_autotuning():
    dataset = tf.data.Dataset.range(8).batch(2).prefetch(tf.data.AUTOTUNE)
    fed = infeed_dataset(dataset)
    assert fed.options().autotune.enabled is False
    assert [x.numpy().tolist() for x in fed] == [x.numpy().tolist() for x in dataset]


def test_keras_builds_the_input_pipeline_of_an_ipu_model_as_a_device_infeed():
    model = ipu_keras.Sequential([tf.keras.layers.Dense(1)])
    dataset = tf.data.Dataset.range(4)
    fed = model.distribute_strategy.experimental_distribute_dataset(dataset)
    assert fed.options().autotune.enabled is False
    assert model.distribute_strategy.num_replicas_in_sync == 1


_CONV = {"strides": (1, 1), "dilations": (1, 1)}


@pytest.mark.parametrize("x_shape, w_shape, padding", [
    ((64, 20, 20, 8), (3, 3, 8, 16), ((0, 0), (0, 0))),   # the product fills each slab
    ((64, 20, 20, 8), (3, 3, 8, 16), ((1, 1), (1, 1))),   # padded
    ((64, 20, 20, 8), (3, 3, 4, 16), ((0, 0), (0, 0))),   # two groups: copied into it
])
def test_a_split_convolution_fills_its_slabs_as_the_whole_batch_is_computed(
        x_shape, w_shape, padding):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    kernel = get_op("conv").kernel
    with cores.execution():
        split = kernel(x, w, padding=padding, **_CONV)
    one = kernel(x, w, padding=padding, **_CONV)
    assert split.shape == one.shape and split.dtype == one.dtype
    tolerances.float32_sum("split convolution", np.prod(w_shape[:-1]), 1.0).assert_close(
        split, one)


@pytest.mark.parametrize("shape, ksize, strides, padding, dtype", [
    ((64, 26, 26, 32), (2, 2), (2, 2), ((0, 0), (0, 0)), np.float32),   # windows cover it
    ((64, 11, 11, 64), (2, 2), (2, 2), ((0, 0), (0, 0)), np.float32),   # a row uncovered
    ((64, 11, 11, 64), (2, 2), (2, 2), ((0, 1), (0, 1)), np.float32),   # padded
    ((64, 13, 13, 32), (3, 3), (2, 2), ((0, 0), (0, 0)), np.float32),   # overlapping
    ((64, 26, 26, 32), (2, 2), (2, 2), ((0, 0), (0, 0)), np.float16),
])
def test_a_split_max_pool_gradient_fills_its_slabs_with_the_bits_of_the_whole(
        shape, ksize, strides, padding, dtype):
    rng = np.random.default_rng(0)
    # ReLU outputs: windows with ties at zero go to their first maximum.
    x = np.maximum(rng.standard_normal(shape), 0).astype(dtype)
    params = {"ksize": ksize, "strides": strides, "padding": padding}
    y = get_op("max_pool").kernel(x, **params)
    dy = rng.standard_normal(y.shape).astype(dtype)
    kernel = get_op("max_pool_grad").kernel
    with cores.execution():
        split = kernel(x, y, dy, **params)
    one = kernel(x, y, dy, **params)
    assert split.dtype == one.dtype == dtype
    np.testing.assert_array_equal(split.view(f"u{split.itemsize}"), one.view(f"u{one.itemsize}"))


_WORKER_HEAP = """
import importlib.util, resource, sys, threading
import numpy as np
spec = importlib.util.spec_from_file_location("host_heap", sys.argv[1])
host_heap = importlib.util.module_from_spec(spec)
spec.loader.exec_module(host_heap)
assert host_heap.keep_freed_memory()
if sys.argv[2] == "no top pad":   # glibc's default pad, the other settings kept
    import ctypes, ctypes.util
    ctypes.CDLL(ctypes.util.find_library("c")).mallopt(host_heap._M_TOP_PAD, 128 * 1024)
faults = []
def work():   # three 24 MiB arrays at once: more than one of the thread's 64 MiB heaps
    for _ in range(4):
        start = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        arrays = [np.ones(6 << 20, np.float32) for _ in range(3)]
        del arrays
        faults.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - start)
thread = threading.Thread(target=work)
thread.start()
thread.join()
print(faults)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's thresholds only")
@pytest.mark.parametrize("pad", [True, False], ids=["kept", "without the top pad"])
def test_a_worker_threads_freed_heaps_are_kept(pad):
    """A slab worker's arrays come from heaps of its own, which glibc unmaps when free
    unless the top pad keeps them: with it, a worker's next arrays take no page faults."""
    import ast
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _WORKER_HEAP, host_heap.__file__,
                          "top pad" if pad else "no top pad"], capture_output=True,
                         text=True, check=True)
    first, *again = ast.literal_eval(out.stdout.strip())
    assert first > 0
    if pad:
        assert max(again) * 10 < first, (first, again)
    else:   # what the pad is for: without it the freed heaps are unmapped, faulted again
        assert min(again) * 10 >= first, (first, again)
