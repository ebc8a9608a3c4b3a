"""Runs catalogue items on the simulated IPU and on the CPU, and compares them.

`run_item(item)` returns a `Result`: "ok" when every history value, the predictions,
every final weight and every optimizer variable agree within the item's tolerance
(relative to each tensor's largest magnitude, see `_largest_difference`); "differs"
with the first disagreement otherwise; "unsupported" with the reason when the tracer
refuses an op; "error" with the exception otherwise. `run_items(items, workers)` runs
several, in worker processes when asked.

Each model is built after `keras.backend.clear_session()`, so the CPU and IPU models
get the same layer and metric names. Keras runs on the CPU one step per call (the
oracle needs no device loop); the IPU runs `STEPS_PER_EXECUTION` steps per execution,
so an item's three steps make one full and one partial execution.
"""
import concurrent.futures
import dataclasses
import multiprocessing
import traceback

import keras
import numpy as np

import ipu_keras
from ipu_keras.errors import UnsupportedOpError

SEED = 1234
BATCH = 8
STEPS_PER_EXECUTION = 2


@dataclasses.dataclass
class Result:
    name: str
    group: str
    status: str
    detail: str = ""


def _build(item, model_class, steps_per_execution):
    keras.backend.clear_session(free_memory=False)
    if item.policy:
        keras.mixed_precision.set_global_policy(item.policy)
    keras.utils.set_random_seed(SEED)
    inputs = keras.Input(item.input_shape, dtype=item.input_dtype, batch_size=None)
    model = model_class(inputs, item.build(inputs))
    model.compile(optimizer=item.optimizer(), loss=item.loss, metrics=item.metrics(),
                  steps_per_execution=steps_per_execution)
    return model


def _fit(model, x, y):
    keras.utils.set_random_seed(SEED)
    history = model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    predictions = model.predict(x[: 2 * BATCH], batch_size=BATCH, verbose=0)
    return model, history.history, predictions


def _largest_difference(a, b, rtol, atol):
    """How far `a` is beyond `atol + rtol * max|b|` from `b` (> 0: too far), and a note.

    The tolerance is relative to the tensor's largest magnitude, not to each element:
    TensorFlow's CPU kernels (oneDNN, Eigen) sum in a blocked order the simulator does
    not reproduce, so a sum that cancels to a small value keeps rounding errors of the
    size of its terms. Elementwise, such a value can be 1e-4 off relative to itself
    while 1e-6 off relative to its tensor.
    """
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return np.inf, f"shape {a.shape} != {b.shape}"
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if np.any(nan_a != nan_b):
        return np.inf, "NaN in one run but not the other"
    inf_b = np.isinf(b)
    if np.any(np.isinf(a) != inf_b) or np.any(a[inf_b] != b[inf_b]):
        return np.inf, "an infinity in one run but not the other"
    a, b = a[np.isfinite(b)], b[np.isfinite(b)]
    scale = np.max(np.abs(b), initial=0.0)
    excess = np.abs(a - b) - (atol + rtol * scale)
    return float(np.max(excess, initial=-np.inf)), ""


def compare(item, ipu_run, cpu_run):
    """The first disagreement between the two runs, or "" when they agree."""
    (ipu_model, ipu_history, ipu_pred), (cpu_model, cpu_history, cpu_pred) = ipu_run, cpu_run
    pairs = [(f"history['{k}']", ipu_history.get(k), v) for k, v in cpu_history.items()]
    pairs.append(("predictions", ipu_pred, cpu_pred))
    pairs += [(f"weight {w.path}", a, b) for w, a, b in zip(
        cpu_model.weights, ipu_model.get_weights(), cpu_model.get_weights())]
    pairs += [(f"optimizer variable {v.path}", a.numpy(), v.numpy()) for v, a in zip(
        cpu_model.optimizer.variables, ipu_model.optimizer.variables)]
    for what, got, expected in pairs:
        if got is None:
            return f"{what} missing"
        excess, note = _largest_difference(got, expected, item.rtol, item.atol)
        if excess > 0:
            return f"{what} differs{': ' + note if note else f' by {excess:.3g} beyond tolerance'}"
    return ""


def run_item(item):
    """Trains `item` on both devices and compares; never raises."""
    x, y = item.data()
    samples = item.steps * BATCH - (BATCH // 2 if item.partial_batch else 0)
    x, y = x[:samples], y[:samples]
    previous = keras.mixed_precision.global_policy().name
    try:
        cpu_model = _build(item, keras.Model, 1)
        initial = cpu_model.get_weights()
        cpu = _fit(cpu_model, x, y)
        ipu_model = _build(item, ipu_keras.Model, STEPS_PER_EXECUTION)
        ipu_model.set_weights(initial)
        ipu = _fit(ipu_model, x, y)
        problem = compare(item, ipu, cpu)
        return Result(item.name, item.group, "differs" if problem else "ok", problem)
    except UnsupportedOpError as e:
        return Result(item.name, item.group, "unsupported", str(e).split(". Received")[0])
    except Exception as e:  # noqa: BLE001 - the table reports every failure
        last = traceback.extract_tb(e.__traceback__)[-1]
        return Result(item.name, item.group, "error",
                      f"{type(e).__name__}: {e} ({last.filename}:{last.lineno})"[:300])
    finally:
        keras.backend.clear_session(free_memory=False)
        keras.mixed_precision.set_global_policy(previous)


_BY_NAME = {}


def _run_named(name):
    """`run_item` of the catalogue item called `name` (in a worker process)."""
    if not _BY_NAME:
        from ipu_keras.conformance.catalogue import catalogue

        _BY_NAME.update((item.name, item) for item in catalogue())
    return run_item(_BY_NAME[name])


def run_items(items, workers=1):
    """Yields `(item, Result)` for each item, in order; `workers` > 1 runs them in that
    many spawned processes (each item looked up there by name in the catalogue)."""
    if workers <= 1 or len(items) <= 1:
        for item in items:
            yield item, run_item(item)
        return
    context = multiprocessing.get_context("spawn")
    pool = concurrent.futures.ProcessPoolExecutor(workers, mp_context=context)
    try:
        futures = [pool.submit(_run_named, item.name) for item in items]
        for item, future in zip(items, futures):
            try:
                result = future.result()
            except Exception as e:  # noqa: BLE001 - a dead worker fails its items, not all
                result = Result(item.name, item.group, "error",
                                f"worker failed: {type(e).__name__}: {e}"[:300])
            yield item, result
    finally:  # a caller that stops early does not wait for the items it will not read
        pool.shutdown(wait=True, cancel_futures=True)
