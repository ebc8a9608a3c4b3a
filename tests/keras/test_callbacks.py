"""Callbacks on ipu_keras models against Keras on the CPU.

A `Recorder` logs every hook with its batch or epoch index and logs (and, at epoch and
train batch ends, the weights the callback sees). At the same `steps_per_execution` the
sequence is the one Keras produces, except that an epoch's last batch end names the
last batch that ran (`_as_run`). With `set_asynchronous_callbacks(True)` the batch
ends are replayed once per step with each step's own logs: they equal Keras' at
`steps_per_execution=1`, while every other hook stays as Keras calls it. Also:
EarlyStopping with restore_best_weights, ModelCheckpoint of weights, and callbacks that
stop training.
"""
import numpy as np
import pytest
import keras

from ipu_keras._src.conformance import tolerances as T
from tests.keras.common import (
    BATCH, Recorder, assert_events_equal, assert_history_equal, assert_weights_equal,
    build, build_pair, compile_model, events_as_run, train_val,
)

EPOCHS = 2
STEPS = 7  # per epoch: 200 samples in batches of 32
VAL_STEPS = 2


def _record(model):
    """fit (with validation), evaluate and predict, each with its own Recorder."""
    (x, y), val = train_val()
    fit_rec, eval_rec, pred_rec = Recorder(weights=True), Recorder(), Recorder()
    history = model.fit(x, y, epochs=EPOCHS, batch_size=BATCH, shuffle=False,
                        validation_data=val, callbacks=[fit_rec], verbose=0)
    model.evaluate(*val, batch_size=BATCH, callbacks=[eval_rec], verbose=0)
    model.predict(val[0], batch_size=BATCH, callbacks=[pred_rec], verbose=0)
    return {"history": history.history, "fit": fit_rec, "evaluate": eval_rec,
            "predict": pred_rec, "weights": model.get_weights()}


@pytest.fixture(scope="module")
def runs():
    """Recorded runs: ipu_keras at 4 steps per execution (synchronous and asynchronous
    callbacks), Keras at 4 and at 1 step per execution, all from the same weights."""
    on_ipu, on_cpu = build_pair()
    asynchronous, cpu_per_step = build_pair(steps_per_execution=1)
    compile_model(asynchronous)  # back to 4 steps per execution
    asynchronous.set_asynchronous_callbacks(True)
    initial = on_ipu.get_weights()
    return {"initial": initial, "ipu": _record(on_ipu), "cpu": _record(on_cpu),
            "async": _record(asynchronous), "cpu1": _record(cpu_per_step)}


def _only(recorder, batch_ends):
    return [e for e in recorder.events if e[0].endswith("_batch_end") == batch_ends]


def _as_run(events):
    return events_as_run(events, STEPS, VAL_STEPS)


def test_fit_hooks_and_logs_equal_keras(runs):
    got, expected = runs["ipu"]["fit"], runs["cpu"]["fit"]
    assert_events_equal(got.events, _as_run(expected.events))
    names = got.names()
    # Keras calls batch hooks once per execution: executions of 4 and 3 steps.
    assert [i for h, i in names if h == "on_train_batch_begin"] == [0, 4] * EPOCHS
    assert sum(h == "on_train_batch_end" for h, _ in names) == 2 * EPOCHS
    assert sum(h == "on_test_batch_end" for h, _ in names) == EPOCHS
    assert names[0] == ("on_train_begin", None) and names[-1] == ("on_train_end", None)


def test_callbacks_see_the_trained_weights(runs):
    """Weights are written back after each execution, before the batch-end callbacks."""
    got, expected = runs["ipu"]["fit"], runs["cpu"]["fit"]
    start = [float(np.sum(w)) for w in runs["initial"]]
    first = next(e for h, _, e in got.events if h == "on_train_batch_end")
    assert not np.allclose(first["weights"], start)
    for g, e in zip(got.epoch_weights, expected.epoch_weights):
        assert_weights_equal(g, e)


def test_evaluate_and_predict_hooks_equal_keras(runs):
    assert_events_equal(runs["ipu"]["evaluate"].events, _as_run(runs["cpu"]["evaluate"].events))
    assert_events_equal(runs["ipu"]["predict"].events, runs["cpu"]["predict"].events)
    names = runs["ipu"]["predict"].names()
    assert [h for h, _ in names] == ["on_predict_begin", "on_predict_batch_begin",
                                     "on_predict_batch_end", "on_predict_end"]


def test_asynchronous_callbacks_replay_every_step(runs):
    got, expected = runs["async"]["fit"], runs["cpu1"]["fit"]
    names = got.names()
    assert sum(h == "on_train_batch_end" for h, _ in names) == STEPS * EPOCHS
    assert [i for h, i in names if h == "on_train_batch_end"] == list(range(STEPS)) * EPOCHS
    assert sum(h == "on_test_batch_end" for h, _ in names) == VAL_STEPS * EPOCHS
    # Each step's own logs, as Keras gives them running one step per execution.
    assert_events_equal(_only(got, True), _strip_weights(_only(expected, True)))


def test_asynchronous_callbacks_keep_the_other_hooks(runs):
    got, expected = runs["async"]["fit"], runs["cpu"]["fit"]
    assert_events_equal(_only(got, False), _strip_weights(_only(expected, False)))
    assert_history_equal(runs["async"]["history"], runs["cpu"]["history"])


def test_asynchronous_callbacks_in_evaluate_and_predict(runs):
    for kind in ("evaluate", "predict"):
        got, expected = runs["async"][kind], runs["cpu1"][kind]
        assert_events_equal(_only(got, True), _only(expected, True))
    assert [i for h, i in runs["async"]["predict"].names()
            if h == "on_predict_batch_end"] == [0, 1]


def test_set_asynchronous_callbacks_takes_a_bool():
    with pytest.raises(ValueError, match="Received: asynchronous="):
        build().set_asynchronous_callbacks("yes")


def _strip_weights(events):
    return [(h, i, {"logs": e["logs"]}) for h, i, e in events]


def test_early_stopping_restores_the_best_weights():
    """min_delta=10: epoch 0 is the best, training stops after epoch 1 and goes back."""
    (x, y), _ = train_val()
    results = []
    for model in build_pair():
        stop = keras.callbacks.EarlyStopping(monitor="loss", min_delta=10, patience=1,
                                             restore_best_weights=True)
        rec = Recorder()
        history = model.fit(x, y, epochs=5, batch_size=BATCH, shuffle=False,
                            callbacks=[stop, rec], verbose=0)
        results.append((history.history, rec.epoch_weights, model.get_weights()))
    (history, epoch_weights, weights), (cpu_history, _, cpu_weights) = results
    assert len(history["loss"]) == 2
    assert_history_equal(history, cpu_history)
    assert_weights_equal(weights, epoch_weights[0], tolerance=T.EXACT)
    assert_weights_equal(weights, cpu_weights)
    assert not np.allclose(weights[0], epoch_weights[1][0])


def test_model_checkpoint_weights_round_trip(tmp_path):
    (x, y), _ = train_val()
    on_ipu, on_cpu = build_pair(opt="adam")
    path = str(tmp_path / "w-{epoch}.weights.h5")
    rec = Recorder()
    on_ipu.fit(x, y, epochs=2, batch_size=BATCH, shuffle=False, verbose=0, callbacks=[
        keras.callbacks.ModelCheckpoint(path, save_weights_only=True), rec])
    on_cpu.fit(x, y, epochs=2, batch_size=BATCH, shuffle=False, verbose=0)
    for epoch in (1, 2):
        plain = build(base="keras")
        plain.load_weights(path.format(epoch=epoch))
        assert_weights_equal(plain.get_weights(), rec.epoch_weights[epoch - 1],
                             tolerance=T.EXACT)
    assert_weights_equal(plain.get_weights(), on_cpu.get_weights())


class _Raise(keras.callbacks.Callback):
    """Raises `error` at the end of the first execution of epoch index 1."""

    def __init__(self, error):
        super().__init__()
        self.error = error
        self.epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.epoch == 1:
            raise self.error


@pytest.mark.parametrize("error", [RuntimeError("stop"), KeyboardInterrupt()],
                         ids=["exception", "keyboard-interrupt"])
def test_a_callback_that_raises_leaves_the_last_execution_s_weights(error):
    (x, y), _ = train_val()
    weights = []
    for model in build_pair():
        with pytest.raises(type(error)):
            model.fit(x, y, epochs=3, batch_size=BATCH, shuffle=False, verbose=0,
                      callbacks=[_Raise(error)])
        weights.append(model.get_weights())
        # One epoch of 7 steps, then the first execution (4 steps) of the second.
        assert int(model.optimizer.iterations.numpy()) == 7 + 4
    assert_weights_equal(*weights)
