"""`fit` options, input kinds and the `*_on_batch` methods against Keras on the CPU.

One pair of models (ipu_keras and Keras, the MLP with SGD, 4 steps per execution) runs a
list of scenarios (Keras traced, not eager: its functions are reused); before each, both
go back to the same initial weights, so a scenario's result depends on that scenario only
(SGD keeps no state but the step count). Each scenario compares the History and the
final weights with Keras': validation_split, validation_freq, class_weight,
sample_weight, initial_epoch, steps_per_epoch, shuffle=True after seeding both runs
identically, verbose 0/1/2 (the printed lines, timings and numbers aside; ipu_keras may
add one line per epoch with the simulated device time), arguments passed by position,
and numpy arrays, `tf.data.Dataset`, a Python generator with steps_per_epoch and
`keras.utils.PyDataset` as inputs. `train_on_batch`, `test_on_batch` and
`predict_on_batch` (lists and dicts) also equal Keras'.
"""
import contextlib
import io
import re

import numpy as np
import pytest
import keras

from tests.keras.common import (
    BATCH, Recorder, assert_history_equal, assert_logs_equal, assert_weights_equal,
    build_pair, dataset, train_val,
)


def _generator(x, y):
    """Batches of 32 forever (the data wraps around)."""
    i = 0
    while True:
        idx = np.arange(i, i + BATCH) % len(x)
        yield x[idx], y[idx]
        i += BATCH


class _Batches(keras.utils.PyDataset):
    def __init__(self, x, y):
        super().__init__()
        self.x, self.y = x, y

    def __len__(self):
        return -(-len(self.x) // BATCH)

    def __getitem__(self, i):
        s = slice(i * BATCH, (i + 1) * BATCH)
        return self.x[s], self.y[s]


def _scenarios():
    """name -> function(model) running one fit and returning (History, extra results)."""
    (x, y), (vx, vy) = train_val()
    base = dict(batch_size=BATCH, shuffle=False, verbose=0)
    weights = np.linspace(0.5, 2.0, len(x)).astype(np.float32)

    def shuffled(model):
        keras.utils.set_random_seed(5)
        return model.fit(x, y, epochs=2, batch_size=BATCH, shuffle=True, verbose=0)

    def initial_epoch(model):
        rec = Recorder()
        history = model.fit(x, y, epochs=3, initial_epoch=1, callbacks=[rec], **base)
        return history, [i for h, i in rec.names() if h == "on_epoch_begin"]

    def verbose(level):
        def run(model):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                history = model.fit(x, y, epochs=2, validation_data=(vx, vy),
                                    batch_size=BATCH, shuffle=False, verbose=level)
            return history, out.getvalue()
        return run

    return {
        "validation_split": lambda m: m.fit(x, y, epochs=2, validation_split=0.25, **base),
        "validation_freq": lambda m: m.fit(x, y, epochs=3, validation_data=(vx, vy),
                                           validation_freq=2, **base),
        "class_weight": lambda m: m.fit(
            x, y, epochs=2, class_weight={c: 1.0 + c / 5 for c in range(10)}, **base),
        "sample_weight": lambda m: m.fit(x, y, epochs=2, sample_weight=weights, **base),
        "initial_epoch": initial_epoch,
        "steps_per_epoch": lambda m: m.fit(dataset(x, y).repeat(), epochs=2,
                                           steps_per_epoch=5, verbose=0),
        "shuffle": shuffled,
        "dataset": lambda m: m.fit(dataset(x, y), epochs=2, verbose=0,
                                   validation_data=dataset(vx, vy)),
        "generator": lambda m: m.fit(_generator(x, y), epochs=2, steps_per_epoch=5,
                                     verbose=0),
        "py_dataset": lambda m: m.fit(_Batches(x, y), epochs=2, shuffle=False, verbose=0),
        # x, y, batch_size, epochs, verbose, callbacks, validation_split, validation_data,
        # shuffle: passed by position.
        "positional": lambda m: m.fit(x, y, BATCH, 2, 0, None, 0.0, (vx, vy), False),
        "verbose_0": verbose(0),
        "verbose_1": verbose(1),
        "verbose_2": verbose(2),
    }


SCENARIOS = list(_scenarios())
DEVICE_TIME = "(simulated):"  # ipu_keras' line with the device time of an epoch

# The scenarios together take about 5 s.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def results():
    """scenario -> ((History, extra, weights) on the IPU, the same on the CPU)."""
    pair = build_pair(run_eagerly=False)  # Keras traces once for all the scenarios
    initial = pair[0].get_weights()
    out = {}
    for name, run in _scenarios().items():
        per_model = []
        for model in pair:
            model.set_weights(initial)
            result = run(model)
            history, extra = result if isinstance(result, tuple) else (result, None)
            per_model.append((history.history, extra, model.get_weights()))
        out[name] = per_model
    out["models"] = pair
    return out


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_fit_matches_keras(results, scenario):
    (history, _, weights), (cpu_history, _, cpu_weights) = results[scenario]
    assert_history_equal(history, cpu_history)
    assert_weights_equal(weights, cpu_weights)


def test_validation_freq_validates_every_second_epoch(results):
    (history, _, _), _ = results["validation_freq"]
    assert len(history["loss"]) == 3 and len(history["val_loss"]) == 1


def test_initial_epoch_starts_at_its_epoch(results):
    (history, epochs, _), (_, cpu_epochs, _) = results["initial_epoch"]
    assert epochs == cpu_epochs == [1, 2]
    assert len(history["loss"]) == 2


def test_weights_change_the_loss(results):
    (plain, _, _), _ = results["dataset"]
    (weighted, _, _), _ = results["sample_weight"]
    assert not np.allclose(plain["loss"], weighted["loss"])


def _normalise(text, level):
    """The progress output without styling, timings or numbers. The bar's intermediate
    redraws depend on timing, so at verbose=1 only each epoch's final line is kept."""
    text = re.sub(r"\x1b\[[0-9;]*m|\x08", "", text)
    lines = []
    for line in re.split(r"[\r\n]+", text):
        line = re.sub(r"\d+(ms|s|us)(/step)?", "T", line)
        line = re.sub(r"\d+\.\d+(e[-+]\d+)?", "F", line).strip()
        if line and (level != 1 or line.startswith("Epoch") or "val_loss" in line):
            lines.append(line)
    return lines


@pytest.mark.parametrize("level", [0, 1, 2])
def test_verbose_prints_what_keras_prints(results, level):
    (_, text, _), (_, cpu_text, _) = results[f"verbose_{level}"]
    lines = [line for line in _normalise(text, level) if DEVICE_TIME not in line]
    assert lines == _normalise(cpu_text, level)
    assert bool(text.strip()) == (level != 0)
    if level == 2:
        assert "Epoch 2/2" in text and "val_loss" in text


def test_on_batch_methods_match_keras():
    (x, y), _ = train_val()
    results = []
    for model in build_pair(opt="adam"):
        first = model.train_on_batch(x[:32], y[:32])
        second = model.train_on_batch(x[32:64], y[32:64], return_dict=True)
        weighted = model.train_on_batch(x[64:96], y[64:96], class_weight={0: 3.0, 1: 0.5})
        tested = model.test_on_batch(x[:32], y[:32])
        tested_dict = model.test_on_batch(x[:20], y[:20], return_dict=True)
        predicted = model.predict_on_batch(x[:32])
        # evaluate(x, y, batch_size, verbose) and predict(x, batch_size, verbose) by position
        evaluated = model.evaluate(x[:50], y[:50], 16, 0)
        predicted_all = model.predict(x[:50], 16, 0)
        results.append([first, second, weighted, tested, tested_dict, predicted, evaluated,
                        predicted_all, model.get_weights()])
    got, expected = results
    assert isinstance(got[1], dict) and isinstance(got[4], dict)
    assert isinstance(got[0], list) and isinstance(got[5], np.ndarray)
    assert got[7].shape == (50, 10)
    for i, (g, e) in enumerate(zip(got, expected)):
        assert_logs_equal(g, e, where=f"result {i}")


def test_shuffle_changes_the_order(results):
    (shuffled, _, _), _ = results["shuffle"]
    (ordered, _, _), _ = results["dataset"]
    assert not np.allclose(shuffled["loss"], ordered["loss"])
