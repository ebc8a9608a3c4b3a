"""Resource hygiene: 120 short fits on new models in one process stay flat.

Each fit traces, compiles and runs a new model. Once a model is gone, its step
programs, executables, sessions and traced TensorFlow graphs must go too, and no host
thread may stay behind. Measured after a warm-up (TensorFlow and numpy allocate
their caches during the first fits): thread count, live models, live TensorFlow
FuncGraphs, and the resident set size, which may only grow by a bounded amount (the
allocator and TensorFlow's own native caches; plain Keras grows by ~0.7 MB a fit on
the same loop). Run with `-s` to see the figures.
"""
import gc
import threading
import weakref

import keras
import numpy as np
import pytest
from tensorflow.python.framework import func_graph

import ipu_keras as ipu
from ipu_keras.config import reset_ipu_configuration

FITS = 120   # 100 measured after the warm-up: 0.5 MB a fit is 50 MB over them
WARM_UP = 20
MAX_RSS_GROWTH_PER_FIT_MB = 0.5


def _rss_mb():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    pytest.skip("no /proc/self/status on this system")


def _func_graphs():
    return sum(isinstance(o, func_graph.FuncGraph) for o in gc.get_objects())


def _one_fit(x, y):
    model = ipu.Sequential([keras.Input((8,)), keras.layers.Dense(8, activation="relu"),
                            keras.layers.Dense(2)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=2)
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    return weakref.ref(model)


def _figures():
    gc.collect()
    return {"threads": threading.active_count(), "rss_mb": round(_rss_mb(), 1),
            "func_graphs": _func_graphs()}


@pytest.fixture
def small_ipu():
    """A 16-tile IPU: the same work per fit, compiled and accounted in a fraction of the time."""
    cfg = ipu.config.IPUConfig()
    cfg.ipu_model.tiles_per_ipu = 16
    cfg.configure_ipu_system()
    yield
    reset_ipu_configuration()


@pytest.mark.slow
def test_many_fits_on_new_models_keep_threads_and_memory_flat(small_ipu):
    rng = np.random.default_rng(0)
    x = rng.random((32, 8), dtype=np.float32)
    y = (x.sum(1) > 4).astype(np.int32)
    start = _figures()
    models = []
    for i in range(FITS):
        models.append(_one_fit(x, y))
        if i + 1 == WARM_UP:
            warm = _figures()
    end = _figures()
    print(f"\n{FITS} fits: start {start}, after {WARM_UP} {warm}, end {end}")
    assert sum(m() is not None for m in models) == 0  # every model was collected
    assert end["threads"] == warm["threads"]
    assert end["func_graphs"] <= warm["func_graphs"]
    growth = (end["rss_mb"] - warm["rss_mb"]) / (FITS - WARM_UP)
    assert growth < MAX_RSS_GROWTH_PER_FIT_MB, (start, warm, end)
