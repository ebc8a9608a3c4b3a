"""A Keras model never trains with another model's cached program (issue 30, item 3).

Two models alike but for one activation (relu, tanh) fill two caches; the tanh model's
entry copied under the relu model's name must be refused and recompiled, so that the
relu model trains to the weights it trains to without a cache, not to the tanh model's.
"""
import logging
import os
import shutil

import keras
import numpy as np

import ipu_keras as ipu
from ipu_keras._src.compiler.cache import SUFFIX
from tests.keras.common import BATCH, CLASSES, SHAPE, assert_weights_equal, data


def _model(activation, weights=None):
    keras.backend.clear_session()  # the same layer names, hence the same graph and key
    model = ipu.keras.Sequential([keras.Input(SHAPE), keras.layers.Flatten(),
                                  keras.layers.Dense(16, activation=activation),
                                  keras.layers.Dense(CLASSES, activation="softmax")])
    if weights is not None:
        model.set_weights(weights)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy",
                  steps_per_execution=2)
    return model


def _fit(activation, weights, cache_dir, monkeypatch):
    flags = f"--executable_cache_path={cache_dir}" if cache_dir else ""
    monkeypatch.setenv("TF_POPLAR_FLAGS", flags)
    model = _model(activation, weights)
    model.fit(*data(4 * BATCH), batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    return model.get_weights()


def _entry(directory):
    (name,) = [p for p in os.listdir(directory) if p.endswith(SUFFIX)]
    return directory / name


def test_another_models_entry_under_the_key_is_recompiled(tmp_path, monkeypatch, caplog):
    weights = _model("relu").get_weights()
    relu_dir, tanh_dir = tmp_path / "relu", tmp_path / "tanh"
    _fit("relu", weights, relu_dir, monkeypatch)
    tanh_weights = _fit("tanh", weights, tanh_dir, monkeypatch)
    shutil.copyfile(_entry(tanh_dir), _entry(relu_dir))   # B's program under A's key
    caplog.set_level(logging.INFO, logger="ipu_keras")
    got = _fit("relu", weights, relu_dir, monkeypatch)
    assert not [r for r in caplog.records if "Loaded executable" in r.message]
    assert_weights_equal(got, _fit("relu", weights, "", monkeypatch))
    assert not all(np.array_equal(a, b) for a, b in zip(got, tanh_weights))
    (warning,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "not the executable asked for" in warning.message
    caplog.clear()
    assert_weights_equal(_fit("relu", weights, relu_dir, monkeypatch), got)  # replaced
    assert [r for r in caplog.records if "Loaded executable" in r.message]
