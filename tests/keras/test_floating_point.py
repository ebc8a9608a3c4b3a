"""`IPUConfig.floating_point_behaviour`: the IPU's floating-point traps, on a Keras model.

With a trap on (`inv`, `div0`, `oflo`), an execution that produces such a value raises
`FloatingPointTrapError` naming the op and the Keras layer where it first appeared, and
is abandoned like any failed execution: the weights are those of the last completed
one. With the traps off the values propagate, and equal TensorFlow's on the CPU.
"""
import numpy as np
import pytest
import keras
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras.config import reset_ipu_configuration
from ipu_keras.errors import FloatingPointTrapError

from tests.keras.common import assert_weights_equal

WIDTH = 4


@keras.saving.register_keras_serializable(package="ipu_keras_tests")
class Elementwise(keras.layers.Layer):
    """One elementwise function of the layer's input, chosen by name."""

    FUNCTIONS = {
        "log": tf.math.log,                                  # log(0) = -inf: div0
        "ratio": lambda x: x / x,                            # 0/0 = nan: inv
        "reciprocal": lambda x: 1.0 / x,                     # 1/0 = inf: div0
        "exp": tf.math.exp,                                  # exp(100) overflows float32
        "square": lambda x: x * x,                           # 300**2 overflows float16
    }

    def __init__(self, function, **kwargs):
        super().__init__(**kwargs)
        self.function = function

    def call(self, inputs):
        return self.FUNCTIONS[self.function](inputs)

    def get_config(self):
        return {**super().get_config(), "function": self.function}


def _model(function, base, dtype="float32"):
    keras.utils.set_random_seed(3)
    layers = [keras.Input((WIDTH,), dtype=dtype),
              Elementwise(function, name=f"my_{function}", dtype=dtype),
              keras.layers.Dense(2, dtype=dtype, name="head")]
    model = (ipu.Sequential if base == "ipu" else keras.Sequential)(layers)
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse", steps_per_execution=4,
                  run_eagerly=base != "ipu")
    return model


@pytest.fixture
def traps(request):
    """Configures the IPU with the floating-point flags the test asks for."""
    def configure(**flags):
        cfg = ipu.config.IPUConfig()
        for name, value in flags.items():
            setattr(cfg.floating_point_behaviour, name, value)
        cfg.configure_ipu_system()
    yield configure
    reset_ipu_configuration()


# (layer function, trap flag, input value that trips it, dtype)
CASES = [
    ("log", "div0", 0.0, "float32"),
    ("ratio", "inv", 0.0, "float32"),
    ("reciprocal", "div0", 0.0, "float32"),
    ("exp", "oflo", 100.0, "float32"),
    ("square", "oflo", 300.0, "float16"),
]
IDS = [f"{f}-{flag}-{dtype}" for f, flag, _, dtype in CASES]


def _inputs(bad, dtype, n=8):
    x = np.linspace(0.5, 2.0, n * WIDTH, dtype=np.float32).reshape(n, WIDTH)
    x[n // 2 + 1, 2] = bad
    return x.astype(dtype)


@pytest.mark.parametrize("function,flag,bad,dtype", CASES, ids=IDS)
def test_a_trap_names_the_op_and_the_layer(traps, function, flag, bad, dtype):
    traps(**{flag: True})
    model = _model(function, "ipu", dtype)
    with pytest.raises(FloatingPointTrapError) as info:
        model.predict(_inputs(bad, dtype), batch_size=2, verbose=0)
    error = info.value
    assert isinstance(error, FloatingPointError)
    assert error.flag == flag and error.layer == f"my_{function}"
    assert f"Keras layer 'my_{function}'" in str(error) and f"'{error.op}'" in str(error)
    assert f"floating_point_behaviour.{flag}=True" in str(error)


@pytest.mark.parametrize("function,flag,bad,dtype", CASES, ids=IDS)
def test_with_the_traps_off_values_propagate_as_in_tensorflow(traps, function, flag, bad, dtype):
    other = {"inv": "oflo", "div0": "oflo", "oflo": "div0"}[flag]
    traps(**{other: True})  # a trap that this value does not trip stays quiet
    x = _inputs(bad, dtype)
    got = _model(function, "ipu", dtype).predict(x, batch_size=2, verbose=0)
    expected = _model(function, "keras", dtype).predict(x, batch_size=2, verbose=0)
    assert not np.isfinite(expected).all()  # the case really makes inf or NaN
    tolerance = {"float16": 2e-3, "float32": 1e-5}[dtype]
    np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance)


def test_a_trap_in_training_keeps_the_last_completed_execution(traps):
    """The zero reaches the log in step 6 of 8 (execution 2): execution 1 stays applied."""
    traps(div0=True, inv=True, oflo=True)
    x = np.linspace(0.5, 2.0, 64 * WIDTH, dtype=np.float32).reshape(64, WIDTH)
    y = np.stack([x.sum(1), x.prod(1)], axis=1) / 4
    x[5 * 8 + 3, 1] = 0.0
    on_ipu, on_cpu = _model("log", "ipu"), _model("log", "keras")
    on_cpu.set_weights(on_ipu.get_weights())
    with pytest.raises(FloatingPointTrapError, match="my_log"):
        on_ipu.fit(x, y, batch_size=8, shuffle=False, verbose=0)
    assert int(on_ipu.optimizer.iterations.numpy()) == 4
    on_cpu.fit(x[:32], y[:32], batch_size=8, shuffle=False, verbose=0)
    assert_weights_equal(on_ipu.get_weights(), on_cpu.get_weights())


def test_a_normal_model_trains_with_every_trap_on(traps):
    """No kernel trips a trap on values it computes and then discards."""
    traps(inv=True, div0=True, oflo=True)
    keras.utils.set_random_seed(4)
    model = ipu.Sequential([keras.Input((6, 6, 1)), keras.layers.Conv2D(2, 3, activation="relu"),
                            keras.layers.MaxPooling2D(2), keras.layers.Flatten(),
                            keras.layers.Dense(3, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"], steps_per_execution=2)
    rng = np.random.default_rng(0)
    x = rng.random((16, 6, 6, 1), dtype=np.float32)
    y = rng.integers(0, 3, 16).astype(np.int32)
    history = model.fit(x, y, batch_size=4, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
