"""Runs catalogue items on the simulated IPU and on the CPU, and compares them.

`run_item(item)` returns a `Result`: "ok" when every history value, the predictions,
every final weight and every optimizer variable agree within the item's tolerance
(a row of `tolerances`, relative to each tensor's largest magnitude, see `_ratio`), and
the margin: how much of its tolerance the run used; "differs" with the first
disagreement otherwise; "unsupported" with the reason when the tracer
refuses an op; "error" with the exception otherwise. `run_items(items, workers)` runs
several, in worker processes when asked. A mixed-precision item is compared with its
float32 twin on the CPU instead of TensorFlow's float16 run, whose kernels differ
between processors (`Item.reference_policy`, `tolerances.float16_training`).

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
from ipu_keras._src.conformance import tolerances
from ipu_keras.errors import UnsupportedOpError

SEED = 1234
BATCH = 8
STEPS_PER_EXECUTION = 2


@dataclasses.dataclass
class Result:
    """How an item compared.

    Attributes:
        name: The item's name.
        group: The item's catalogue section.
        status: "ok", "differs", "unsupported" or "error".
        detail: The first disagreement, the reason or the exception.
        margin: The largest difference of the IPU run over what its tolerance allows,
            across every compared tensor (<= 1 passes; None when not compared).
        tensorflow_margin: For an item compared with a twin under another policy, the same
            measure for TensorFlow's own run under the item's policy: how much of the bound
            a second implementation of the same float16 arithmetic uses (reported only).
    """

    name: str
    group: str
    status: str
    detail: str = ""
    margin: float = None
    tensorflow_margin: float = None


def _build(item, model_class, steps_per_execution, policy):
    keras.backend.clear_session(free_memory=False)
    if policy:
        keras.mixed_precision.set_global_policy(policy)
    keras.utils.set_random_seed(SEED)
    inputs = keras.Input(item.input_shape, dtype=item.input_dtype, batch_size=None)
    model = model_class(inputs, item.build(inputs))
    # The IPU side is always compiled for the simulator; only the CPU oracle may use XLA.
    jit = item.cpu_xla and model_class is keras.Model
    model.compile(optimizer=item.optimizer(), loss=item.loss, metrics=item.metrics(),
                  steps_per_execution=steps_per_execution, jit_compile=jit)
    return model


def _fit(model, x, y):
    keras.utils.set_random_seed(SEED)
    history = model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    predictions = model.predict(x[: 2 * BATCH], batch_size=BATCH, verbose=0)
    return model, history.history, predictions


def _ratio(a, b, tolerance):
    """How many times `atol + rtol * max|b|` `a` is from `b` (> 1: too far), and a note.

    The tolerance is relative to the tensor's largest magnitude, not to each element:
    TensorFlow's CPU kernels (oneDNN, Eigen) sum in a blocked order the simulator does
    not reproduce, so a sum that cancels to a small value keeps rounding errors of the
    size of its terms. Elementwise, such a value can be 1e-4 off relative to itself
    while 1e-6 off relative to its tensor. Integers must be equal.
    """
    if np.asarray(b).dtype.kind in "biu":
        tolerance = tolerances.EXACT
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
    difference = float(np.max(np.abs(a - b), initial=0.0))
    allowed = tolerance.atol + tolerance.rtol * np.max(np.abs(b), initial=0.0)
    if difference == 0:
        return 0.0, ""
    return (difference / allowed if allowed else np.inf), ""


def _slot_path(variable):
    """A variable's path, with the wrapped optimizer's slots of a mixed-precision run
    ("loss_scale_optimizer/adam/dense_kernel_momentum") named as in its float32 twin."""
    head, _, rest = variable.path.partition("/")
    return rest if head == "loss_scale_optimizer" and "/" in rest else variable.path


def _tensors(run):
    """`{what: value}` of a run: history, predictions, weights, optimizer variables."""
    model, history, predictions = run
    tensors = {f"history['{k}']": v for k, v in history.items()}
    tensors["predictions"] = predictions
    tensors.update((f"weight {w.path}", value)
                   for w, value in zip(model.weights, model.get_weights()))
    tensors.update((f"optimizer variable {_slot_path(v)}", v.numpy())
                   for v in model.optimizer.variables)
    return tensors


def _compare(got, expected, tolerance):
    """(the largest ratio, the first disagreement or "") of `got` against `expected`."""
    margin = 0.0
    for what, value in expected.items():
        if what not in got:
            return np.inf, f"{what} missing"
        ratio, note = _ratio(got[what], value, tolerance)
        if ratio > 1:
            return ratio, f"{what} differs" + (
                f": {note}" if note else f" by {ratio:.3g} times its tolerance "
                f"({tolerance.name})")
        margin = max(margin, ratio)
    return margin, ""


def compare(item, ipu_run, cpu_run, twin_run=None):
    """`(margin, problem, tensorflow_margin)` of the IPU run against TensorFlow's.

    `cpu_run` ran under the item's policy; `twin_run`, when the item names a
    `reference_policy`, under that one: it is then the oracle within the item's tolerance,
    and what the twin lacks (the loss scale state) must equal `cpu_run`'s exactly. The
    predictions must have the dtype TensorFlow gives them under the item's policy.
    """
    got, expected = _tensors(ipu_run), _tensors(cpu_run)
    if np.asarray(ipu_run[2]).dtype != np.asarray(cpu_run[2]).dtype:
        return np.inf, (f"predictions have dtype {np.asarray(ipu_run[2]).dtype}, expected "
                        f"{np.asarray(cpu_run[2]).dtype}"), None
    if twin_run is None:
        return (*_compare(got, expected, item.tolerance), None)
    twin = _tensors(twin_run)
    margin, problem = _compare(got, twin, item.tolerance)
    if not problem:
        extra = {k: v for k, v in expected.items() if k not in twin}
        problem = _compare(got, extra, tolerances.EXACT)[1]
    tensorflow_margin, _ = _compare(expected, twin, item.tolerance)
    return margin, problem, tensorflow_margin


def _runs(item, x, y):
    """The CPU run, the IPU run and (when the item asks for one) the CPU twin run."""
    cpu_model = _build(item, keras.Model, 1, item.policy)
    initial = cpu_model.get_weights()
    cpu = _fit(cpu_model, x, y)
    ipu_model = _build(item, ipu_keras.Model, STEPS_PER_EXECUTION, item.policy)
    ipu_model.set_weights(initial)
    ipu = _fit(ipu_model, x, y)
    if not item.reference_policy:
        return cpu, ipu, None
    twin_model = _build(item, keras.Model, 1, item.reference_policy)
    twin_model.set_weights(initial)
    return cpu, ipu, _fit(twin_model, x, y)


def run_item(item):
    """Trains `item` on both devices and compares; never raises."""
    x, y = item.data()
    samples = item.steps * BATCH - (BATCH // 2 if item.partial_batch else 0)
    x, y = x[:samples], y[:samples]
    previous = keras.mixed_precision.global_policy().name
    try:
        cpu, ipu, twin = _runs(item, x, y)
        margin, problem, tensorflow_margin = compare(item, ipu, cpu, twin)
        return Result(item.name, item.group, "differs" if problem else "ok", problem,
                      margin, tensorflow_margin)
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
        from ipu_keras._src.conformance.catalogue import catalogue

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
