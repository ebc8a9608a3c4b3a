"""The progress bar and the callbacks count the batches that ran, as Keras does at one step
per execution, for any `steps_per_execution` and any number of replicas.

The oracle is plain Keras on the CPU running the same batches one step per execution:
its batch-end indices are every batch, and an ipu_keras model's must be among them and
end on the same last batch; the progress bar's target is the number of batches that run
and the bar never counts past it. (Keras 3 itself, at 10 steps per execution on 29
batches, reports a batch end at index 29 and shows `30/29`: checked below, so that the
comparison is known to be with the one-step-per-execution counts.)
"""
import logging
import re
import warnings

import keras
import numpy as np
import pytest

import ipu_keras as ipu
from tests.conftest import configured_ipus
from tests.keras.common import Recorder

B = 8
BATCHES = 29


class _Bar(keras.callbacks.ProgbarLogger):
    """A progress bar that remembers each count it showed and its target."""

    def __init__(self):
        super().__init__()
        self.counts = []

    def _update_progbar(self, batch, logs=None):
        super()._update_progbar(batch, logs)
        self.counts.append((self.seen, self.progbar.target))

    def _finalize_progbar(self, logs):
        super()._finalize_progbar(logs)
        self.counts.append((self.progbar.target, self.progbar.target))


@pytest.fixture
def four_replicas():
    yield from configured_ipus(4)


def _data(batches=BATCHES):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((batches * B, 4)).astype("float32"),
            rng.standard_normal((batches * B, 1)).astype("float32"))


def _fit(cls, spe, x, y, validation=None, **kwargs):
    keras.utils.set_random_seed(1)
    model = cls([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse", steps_per_execution=spe)
    recorder, bar = Recorder(), _Bar()
    model.fit(x, y, batch_size=B, epochs=2, shuffle=False, verbose=1, validation_data=validation,
              callbacks=[recorder, bar], **kwargs)
    return model, recorder, bar


def _ends(recorder, hook="on_train_batch_end"):
    return [i for h, i in recorder.names() if h == hook]


def test_steps_per_execution_counts_as_keras_at_one_step(capsys):
    x, y = _data()
    _, cpu, cpu_bar = _fit(keras.Sequential, 1, x, y)
    _, ipu_rec, ipu_bar = _fit(ipu.Sequential, 10, x, y)
    assert _ends(ipu_rec) == [9, 19, 28] * 2
    assert set(_ends(ipu_rec)) <= set(_ends(cpu))
    assert _ends(ipu_rec)[-1] == _ends(cpu)[-1] == BATCHES - 1
    assert [c for c in ipu_bar.counts if c[0] > c[1]] == []
    assert ipu_bar.counts[-1] == cpu_bar.counts[-1] == (BATCHES, BATCHES)
    text = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    shown = re.findall(r"(\d+)/(\d+) ", text)
    assert ("30", "29") not in shown and ("29", "29") in shown


def test_keras_alone_overshoots_at_ten_steps_per_execution():
    """Why the oracle is Keras at one step per execution (see the module docstring)."""
    x, y = _data()
    _, cpu10, bar = _fit(keras.Sequential, 10, x, y)
    assert _ends(cpu10)[:3] == [9, 19, 29]
    assert (30, 29) in bar.counts


def test_evaluate_and_validation_count_the_batches_that_ran():
    x, y = _data()
    val = _data(7)
    model, rec, _ = _fit(ipu.Sequential, 4, x, y, validation=val)
    assert _ends(rec, "on_test_batch_end") == [3, 6] * 2
    evaluated = Recorder()
    model.evaluate(*val, batch_size=B, callbacks=[evaluated], verbose=0)
    assert _ends(evaluated, "on_test_batch_end") == [3, 6]


@pytest.mark.parametrize("spe", [1, 2])
def test_replicas_count_the_batches_they_ran(four_replicas, spe, caplog):
    """29 batches on 4 replicas: 28 run (7 steps of 4), the 29th is said once, up front."""
    x, y = _data()
    with warnings.catch_warnings(record=True) as caught, \
            caplog.at_level(logging.WARNING, logger="ipu_keras"):
        warnings.simplefilter("always")
        _, rec, bar = _fit(ipu.Sequential, spe, x, y)
    ends = _ends(rec)
    per_epoch = ends[:len(ends) // 2]
    assert per_epoch == list(range(4 * spe - 1, 28, 4 * spe)) + (
        [27] if 28 % (4 * spe) else [])
    assert [c for c in bar.counts if c[0] > c[1]] == []
    assert bar.counts[-1] == (28, 28)
    # Keras at one step per execution on the 28 batches that ran ends on the same batch.
    _, cpu, cpu_bar = _fit(keras.Sequential, 1, x[:28 * B], y[:28 * B])
    assert ends[-1] == _ends(cpu)[-1] and cpu_bar.counts[-1] == bar.counts[-1]
    assert not [w for w in caught if "ran out of data" in str(w.message)]
    said = [r for r in caplog.records if "not run" in r.getMessage()]
    assert len(said) == 1 and "29 batches" in said[0].getMessage()
