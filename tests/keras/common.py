"""Shared helpers of the Keras tests: data, the same model built on ipu_keras and on Keras,
a callback that records every hook it sees, and comparisons against Keras on the CPU.

Every model exists twice: `build(..., base="ipu")` gives an `ipu_keras` model and
`build(..., base="keras")` the plain Keras model of the same architecture, with the same
initial weights (`build_pair` copies them across so that seeding cannot make them drift).
The Keras twin runs eagerly unless told otherwise (no XLA; most runs here are one-shot,
where tracing costs more than it saves): TensorFlow on the CPU is the oracle.
"""
import numpy as np
import keras
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T

SHAPE = (8, 8, 1)
CLASSES = 10
BATCH = 32
N_TRAIN = 200  # 6 full batches of 32 and a partial one of 8
N_VAL = 50  # one batch of 32 and a partial one of 18
STEPS_PER_EXECUTION = 4  # 7 steps per epoch: executions of 4 and 3 steps

FORMS = ("sequential", "functional", "subclassed")
OPTIMIZERS = ("sgd", "adam")


def data(n=N_TRAIN, seed=0):
    """Images in [0, 1) and int32 labels whose class shows in the pixels (so models learn)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, CLASSES, n).astype(np.int32)
    x = rng.random((n,) + SHAPE, dtype=np.float32) * 0.5
    x[np.arange(n), y % 8, y // 8 * 4, 0] += 1.0
    return x, y


def train_val():
    return data(N_TRAIN, 0), data(N_VAL, 1)


def optimizer(name):
    if name == "sgd":
        return keras.optimizers.SGD(learning_rate=0.1)
    if name == "adam":
        return keras.optimizers.Adam(learning_rate=0.01)
    raise ValueError(name)


def _layers(arch):
    if arch == "mlp":
        return [keras.layers.Flatten(), keras.layers.Dense(16, activation="relu"),
                keras.layers.Dense(CLASSES, activation="softmax")]
    if arch == "cnn":
        return [keras.layers.Conv2D(4, 3, activation="relu"), keras.layers.MaxPooling2D(2),
                keras.layers.Flatten(), keras.layers.Dense(CLASSES, activation="softmax")]
    raise ValueError(arch)


class _SubclassedBody:
    """`call` of the subclassed form, shared by the Keras and the ipu_keras class."""

    def __init__(self, arch="mlp", **kwargs):
        super().__init__(**kwargs)
        self.arch = arch
        self.blocks = _layers(arch)

    def call(self, inputs):
        for layer in self.blocks:
            inputs = layer(inputs)
        return inputs

    def get_config(self):
        return {"arch": self.arch, "name": self.name}


@keras.saving.register_keras_serializable(package="ipu_keras_tests")
class KerasSubclassed(_SubclassedBody, keras.Model):
    pass


@keras.saving.register_keras_serializable(package="ipu_keras_tests")
class IPUSubclassed(_SubclassedBody, ipu.Model):
    pass


def build(arch="mlp", form="sequential", base="ipu"):
    """An uncompiled, built model of `arch` in `form` on `base` ("ipu" or "keras")."""
    on_ipu = base == "ipu"
    if form == "sequential":
        cls = ipu.Sequential if on_ipu else keras.Sequential
        return cls([keras.Input(SHAPE)] + _layers(arch))
    if form == "functional":
        cls = ipu.Model if on_ipu else keras.Model
        inputs = keras.Input(SHAPE)
        outputs = inputs
        for layer in _layers(arch):
            outputs = layer(outputs)
        return cls(inputs, outputs)
    if form == "subclassed":
        model = (IPUSubclassed if on_ipu else KerasSubclassed)(arch)
        model(np.zeros((1,) + SHAPE, np.float32))  # builds the layers
        return model
    raise ValueError(form)


def compile_model(model, opt="sgd", steps_per_execution=STEPS_PER_EXECUTION, **kwargs):
    """Sparse categorical cross-entropy and accuracy with `opt`; Keras models run eagerly."""
    if not isinstance(model, ipu.keras.IPUTrainerMixin):
        kwargs.setdefault("run_eagerly", True)
    model.compile(optimizer=optimizer(opt), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"], steps_per_execution=steps_per_execution, **kwargs)
    return model


def build_pair(arch="mlp", form="sequential", opt="sgd", seed=1, **compile_kwargs):
    """(ipu_keras model, Keras model): same architecture, same initial weights, compiled."""
    keras.utils.set_random_seed(seed)
    on_ipu = build(arch, form, "ipu")
    keras.utils.set_random_seed(seed)
    on_cpu = build(arch, form, "keras")
    on_cpu.set_weights(on_ipu.get_weights())
    return (compile_model(on_ipu, opt, **compile_kwargs),
            compile_model(on_cpu, opt, **compile_kwargs))


def assert_weights_equal(got, expected, tolerance=T.FLOAT32):
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        tolerance.assert_close(g, e, err_msg=f"weight {i}")


def assert_history_equal(got, expected, tolerance=T.FLOAT32):
    """History dicts (or `history.history`) equal key by key, epoch by epoch."""
    got = getattr(got, "history", got)
    expected = getattr(expected, "history", expected)
    assert sorted(got) == sorted(expected)
    for key in expected:
        assert len(got[key]) == len(expected[key]), key
        tolerance.assert_close(got[key], expected[key], err_msg=key)


def assert_logs_equal(got, expected, tolerance=T.FLOAT32, where=""):
    """Evaluate results, batch results or callback logs: dicts, lists or scalars."""
    if isinstance(expected, dict):
        assert sorted(got) == sorted(expected), where
        for key in expected:
            assert_logs_equal(got[key], expected[key], tolerance, f"{where}[{key}]")
    elif isinstance(expected, (list, tuple)):
        assert len(got) == len(expected), where
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_logs_equal(g, e, tolerance, f"{where}[{i}]")
    else:
        tolerance.assert_close(np.asarray(got), np.asarray(expected), err_msg=where)


def _snapshot(logs):
    if logs is None:
        return None
    return {k: np.array(v, dtype=np.float64) if not isinstance(v, dict) else _snapshot(v)
            for k, v in logs.items()}


class Recorder(keras.callbacks.Callback):
    """Records (hook, batch or epoch, logs) for every hook Keras calls.

    With `weights=True` it also records, at every epoch and train batch end, the sum of
    each weight of the model: what a callback sees of the weights at that moment.
    """

    def __init__(self, weights=False):
        super().__init__()
        self.events = []
        self.weights = weights
        self.epoch_weights = []

    def _record(self, hook, index, logs):
        entry = {"logs": _snapshot(logs)}
        if self.weights and hook in ("on_epoch_end", "on_train_batch_end"):
            entry["weights"] = [float(np.sum(w)) for w in self.model.get_weights()]
        self.events.append((hook, index, entry))
        if hook == "on_epoch_end":
            self.epoch_weights.append([np.array(w) for w in self.model.get_weights()])

    def names(self):
        return [(hook, index) for hook, index, _ in self.events]


def _hook(name, indexed):
    if indexed:
        def method(self, index, logs=None):
            self._record(name, index, logs)
    else:
        def method(self, logs=None):
            self._record(name, None, logs)
    method.__name__ = name
    return method


for _kind in ("train", "test", "predict"):
    for _when in ("begin", "end"):
        setattr(Recorder, f"on_{_kind}_{_when}", _hook(f"on_{_kind}_{_when}", False))
        setattr(Recorder, f"on_{_kind}_batch_{_when}",
                _hook(f"on_{_kind}_batch_{_when}", True))
for _when in ("begin", "end"):
    setattr(Recorder, f"on_epoch_{_when}", _hook(f"on_epoch_{_when}", True))


def assert_events_equal(got, expected, tolerance=T.FLOAT32):
    """Two recorded hook sequences are the same calls with the same logs (and weights)."""
    assert [(h, i) for h, i, _ in got] == [(h, i) for h, i, _ in expected]
    for (hook, index, g), (_, _, e) in zip(got, expected):
        where = f"{hook}({index})"
        assert (g["logs"] is None) == (e["logs"] is None), where
        if e["logs"] is not None:
            assert_logs_equal(g["logs"], e["logs"], tolerance, where)
        if "weights" in e:
            assert_logs_equal(g["weights"], e["weights"], tolerance, where + " weights")


def events_as_run(events, train_batches, test_batches):
    """Keras' recorded events with each batch end at the last batch that ran. Keras 3
    reports an epoch's last execution as ending at begin + steps_per_execution - 1 even
    when the data ends first (index 7 of 7 batches, `8/7` on its bar); ipu_keras reports
    the last batch that ran, as Keras does at one step per execution
    (tests/keras/test_step_counts.py)."""
    last = {"on_train_batch_end": train_batches - 1, "on_test_batch_end": test_batches - 1}
    return [(h, min(i, last[h]) if h in last else i, e) for h, i, e in events]


def dataset(x, y, batch_size=BATCH, **kwargs):
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size, **kwargs)
