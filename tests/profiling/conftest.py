"""Keras models trained with reports on, shared by the report tests of a module.

Each fixture fits a small model (one IPU with Adam, a two-stage pipeline over two IPUs,
two replicas) with `profiling.enable_reports` and returns the training report: the
dict of its `report.json` and its folder.
"""
import json
import os

import keras
import numpy as np
import pytest

import ipu_keras as ipu
from ipu_keras import profiling
from tests.conftest import configured


def _fit(model, x, y, directory, batch_size, epochs=1):
    profiling.enable_reports(directory)
    try:
        model.fit(x, y, batch_size=batch_size, epochs=epochs, shuffle=False, verbose=0)
    finally:
        profiling.write_report()
        profiling.disable_reports()
    (path,) = [os.path.join(directory, e) for e in os.listdir(directory)
               if "train" in e]
    with open(os.path.join(path, "report.json")) as f:
        return {"report": json.load(f), "path": path, "model": model}


def one_ipu_cnn(directory, dense=10):
    keras.utils.set_random_seed(1)
    # Named layers: a second model in the process (to compare with) has the same names.
    model = ipu.Sequential([keras.Input((12, 12, 1)),
                            keras.layers.Conv2D(4, 3, activation="relu", name="conv2d"),
                            keras.layers.MaxPooling2D(name="max_pooling2d"),
                            keras.layers.Flatten(name="flatten"),
                            keras.layers.Dense(dense, name="dense")])
    model.compile(keras.optimizers.Adam(0.01),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=4)
    rng = np.random.default_rng(0)
    x = rng.random((32, 12, 12, 1), dtype=np.float32)
    y = rng.integers(0, min(dense, 10), 32).astype(np.int32)
    return _fit(model, x, y, directory, 4)


@pytest.fixture(scope="module")
def one_ipu(tmp_path_factory):
    with configured(1):
        yield one_ipu_cnn(tmp_path_factory.mktemp("one_ipu"))


@pytest.fixture(scope="module")
def pipelined(tmp_path_factory):
    with configured(2):
        keras.utils.set_random_seed(1)
        model = ipu.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"),
                                keras.layers.Dense(64, activation="relu"),
                                keras.layers.Dense(4)])
        model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      steps_per_execution=8)
        model.set_pipeline_stage_assignment([0, 1, 1])
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=4)
        rng = np.random.default_rng(0)
        x = rng.random((64, 32), dtype=np.float32)
        y = rng.integers(0, 4, 64).astype(np.int32)
        yield _fit(model, x, y, tmp_path_factory.mktemp("pipelined"), 8)


@pytest.fixture(scope="module")
def replicated(tmp_path_factory):
    with configured(2):
        keras.utils.set_random_seed(1)
        model = ipu.Sequential([keras.Input((12,)), keras.layers.Dense(16, activation="relu"),
                                keras.layers.Dense(3)])
        model.compile(keras.optimizers.SGD(0.05), "mse", steps_per_execution=2)
        rng = np.random.default_rng(0)
        x = rng.random((32, 12), dtype=np.float32)
        y = rng.random((32, 3), dtype=np.float32)
        yield _fit(model, x, y, tmp_path_factory.mktemp("replicated"), 4)
