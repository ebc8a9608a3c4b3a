"""The host resources an execution uses: BLAS threads, the heap, the input pipeline.

`ops/blas.py`: one BLAS thread during an execution, every core for a product of at least
WIDE_MACS, never for replicas; `runtime/host_heap.py`: freed arrays stay on the heap;
`runtime.infeed_dataset`: datasets feeding the device run without tf.data autotuning.
"""
import platform

import numpy as np
import pytest
import tensorflow as tf

import ipu_keras
from ipu_keras.conformance import tolerances
from ipu_keras.ops import blas
from ipu_keras.runtime import host_heap, infeed_dataset


def _threads():
    return {library.num_threads for library in blas._blas()}


def test_an_execution_runs_blas_on_one_thread_and_restores_it_after():
    before = _threads()
    with blas.execution():
        assert _threads() == {1}
    assert _threads() == before


def test_only_a_large_product_is_widened_and_only_for_its_own_call():
    with blas.execution():
        cores = blas.wide_threads()
        with blas.wide(blas.WIDE_MACS - 1):
            assert _threads() == {1}
        with blas.wide(blas.WIDE_MACS):
            assert _threads() == {cores}
        assert _threads() == {1}


def test_replicas_never_widen():
    with blas.execution(widen=False):
        assert blas.wide_threads() == 1
        with blas.wide(10 * blas.WIDE_MACS):
            assert _threads() == {1}


def test_outside_an_execution_nothing_widens():
    assert blas.wide_threads() == 1


def test_a_widened_product_equals_the_one_thread_product():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 700, 300)).astype(np.float32)
    b = rng.standard_normal((300, 200)).astype(np.float32)
    assert 3 * 700 * 300 * 200 >= blas.WIDE_MACS
    with blas.execution():
        one = np.matmul(a, b)
        wide = blas.matmul(a, b)
    # BLAS splits the products differently over two threads: sums of 300 unit terms.
    tolerances.float32_sum("widened BLAS product", 300, 1.0).assert_close(wide, one)


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
