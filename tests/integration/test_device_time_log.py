"""Keras `fit` prints the simulated device time per epoch, without changing History."""
import re

import keras
import numpy as np

import ipu_keras as ipu


def _fit(verbose, capsys):
    keras.utils.set_random_seed(1)
    model = ipu.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"], steps_per_execution=2)
    x = np.linspace(-1, 1, 40, dtype=np.float32).reshape(10, 4)
    y = np.arange(10, dtype=np.int32) % 3
    capsys.readouterr()
    history = model.fit(x, y, batch_size=4, epochs=2, verbose=verbose)
    return history, capsys.readouterr().out


def test_each_epoch_prints_device_time_after_the_progress_bar(capsys):
    history, out = _fit(2, capsys)
    lines = [line for line in out.splitlines() if "(simulated)" in line]
    assert len(lines) == 2
    assert re.fullmatch(r"ipu2 \(simulated\): [\d.]+ ms/step device, [\d,]+ samples/s; "
                        r"wall [\d.]+ ms/step", lines[0])
    text = out.splitlines()
    # Right under the progress bar's line of the epoch.
    assert "loss:" in text[text.index(lines[0]) - 1]
    assert set(history.history) == {"accuracy", "loss"}


def test_silent_fit_prints_nothing_and_history_is_the_same(capsys):
    loud, _ = _fit(2, capsys)
    quiet, out = _fit(0, capsys)
    assert "(simulated)" not in out
    assert quiet.history == loud.history
