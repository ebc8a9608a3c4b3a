"""Threads sharing one model take turns (`_src/keras/locking.py`): concurrent `predict`,
`evaluate` and `fit` calls give the results of some serial order, never an exception."""
import threading

import keras
import numpy as np
import pytest

import ipu_keras

THREADS, CALLS, PREDICT_CALLS = 8, 50, 20


def _model():
    keras.utils.set_random_seed(7)
    model = ipu_keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu"),
                                  keras.layers.Dense(3)])
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse",
                  steps_per_execution=2)
    return model


def _in_threads(work, calls=CALLS):
    """Runs `work(thread, call)` for `calls` calls in each of THREADS threads; returns the
    results by (thread, call) and the exceptions raised."""
    results, errors = {}, []
    start = threading.Barrier(THREADS)

    def thread(t):
        start.wait()
        for c in range(calls):
            try:
                results[t, c] = work(t, c)
            except Exception as e:  # noqa: BLE001 - every failure is the test's finding
                errors.append(e)

    threads = [threading.Thread(target=thread, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors


@pytest.mark.slow
def test_concurrent_predicts_give_the_serial_results():
    model = _model()
    rng = np.random.default_rng(0)
    # Each predict is mostly Keras' own eager work on the host (70 ms), so fewer calls
    # per thread than the other tests: still 160 calls in flight, 8 at a time.
    calls = PREDICT_CALLS
    inputs = {(t, c): rng.standard_normal((4 + c % 3, 6)).astype(np.float32)
              for t in range(THREADS) for c in range(calls)}
    serial = {key: model.predict(x, batch_size=2, verbose=0) for key, x in inputs.items()}
    results, errors = _in_threads(
        lambda t, c: model.predict(inputs[t, c], batch_size=2, verbose=0), calls)
    assert errors == []
    for key, want in serial.items():
        np.testing.assert_array_equal(results[key], want)


@pytest.mark.slow
def test_concurrent_fits_and_evaluates_run_one_at_a_time():
    model = _model()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 6)).astype(np.float32)
    y = rng.standard_normal((8, 3)).astype(np.float32)

    def work(t, c):
        if t % 2:
            return model.evaluate(x, y, batch_size=4, verbose=0)
        return model.fit(x, y, batch_size=4, epochs=1, verbose=0).history["loss"][0]

    results, errors = _in_threads(work, calls=10)
    assert errors == []
    fits = (THREADS // 2) * 10
    # A serial order of the same calls: a fresh model fitted as often gives the same weights.
    twin = _model()
    for _ in range(fits):
        twin.fit(x, y, batch_size=4, epochs=1, verbose=0)
    for ours, theirs in zip(model.get_weights(), twin.get_weights()):
        np.testing.assert_array_equal(ours, theirs)
    assert all(np.isfinite(value) for value in results.values())
