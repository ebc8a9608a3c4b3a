"""Runs catalogue items on the simulated IPU and on the CPU, and compares them.

`run_item(item)` returns a `Result`: "ok" when every history value, the predictions
and every final weight agree within the item's tolerance; "differs" with the largest
disagreement otherwise; "unsupported" with the reason when the tracer refuses an op.
"""
import dataclasses
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


def _build(item, model_class):
    keras.utils.set_random_seed(SEED)
    inputs = keras.Input(item.input_shape, dtype=item.input_dtype, batch_size=None)
    model = model_class(inputs, item.build(inputs))
    model.compile(optimizer=item.optimizer(), loss=item.loss, metrics=item.metrics(),
                  steps_per_execution=STEPS_PER_EXECUTION)
    return model


def _train(item, model_class, x, y, weights=None):
    model = _build(item, model_class)
    if weights is not None:
        model.set_weights(weights)
    keras.utils.set_random_seed(SEED)
    history = model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    predictions = model.predict(x[: 2 * BATCH], batch_size=BATCH, verbose=0)
    return model, history.history, predictions


def _largest_difference(a, b, rtol, atol):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return np.inf, f"shape {a.shape} != {b.shape}"
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if np.any(nan_a != nan_b):
        return np.inf, "NaN in one run but not the other"
    keep = ~nan_b
    excess = np.abs(a[keep] - b[keep]) - (atol + rtol * np.abs(b[keep]))
    return float(np.max(excess, initial=-np.inf)), ""


def compare(item, ipu_run, cpu_run):
    """The first disagreement between the two runs, or "" when they agree."""
    (ipu_model, ipu_history, ipu_pred), (cpu_model, cpu_history, cpu_pred) = ipu_run, cpu_run
    pairs = [(f"history['{k}']", ipu_history.get(k), v) for k, v in cpu_history.items()]
    pairs.append(("predictions", ipu_pred, cpu_pred))
    pairs += [(f"weight {w.path}", a, b) for w, a, b in zip(
        cpu_model.weights, ipu_model.get_weights(), cpu_model.get_weights())]
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
    x, y = x[: item.steps * BATCH - BATCH // 2], y[: item.steps * BATCH - BATCH // 2]
    previous = keras.mixed_precision.global_policy().name
    try:
        if item.policy:
            keras.mixed_precision.set_global_policy(item.policy)
        initial = _build(item, keras.Model).get_weights()
        cpu = _train(item, keras.Model, x, y, initial)
        ipu = _train(item, ipu_keras.Model, x, y, initial)
        problem = compare(item, ipu, cpu)
        return Result(item.name, item.group, "differs" if problem else "ok", problem)
    except UnsupportedOpError as e:
        return Result(item.name, item.group, "unsupported", str(e).split(". Received")[0])
    except Exception as e:  # noqa: BLE001 - the table reports every failure
        last = traceback.extract_tb(e.__traceback__)[-1]
        return Result(item.name, item.group, "error",
                      f"{type(e).__name__}: {e} ({last.filename}:{last.lineno})"[:300])
    finally:
        keras.mixed_precision.set_global_policy(previous)

