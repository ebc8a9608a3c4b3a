"""The addons optimizers inside ipu_keras' fit: the device's training equals the same
model trained by Keras on the CPU, and float16 slots take half the variables' bytes."""
import numpy as np
import pytest
import keras

import ipu_keras as ipu
from ipu_keras_addons.keras import optimizers as ipu_optimizers
from ipu_keras._src.conformance import tolerances as T

pytestmark = pytest.mark.slow

PARAMS = 16 * 8 + 8 + 8 * 2 + 2

OPTIMIZERS = {
    "adam16": lambda: ipu_optimizers.AdamIpuOptimizer(
        0.01, amsgrad=True, m_dtype="float16", v_dtype="float16", vhat_dtype="float16"),
    "adam32": lambda: ipu_optimizers.AdamIpuOptimizer(0.01, amsgrad=True),
    "lamb": lambda: ipu_optimizers.LAMBIpuOptimizer(
        0.01, weight_decay_rate=0.01, exclude_from_layer_adaptation=["bias"]),
    "sgd": lambda: ipu_optimizers.SGDIpuOptimizer(0.1, 0.9, momentum_accum_dtype="float16"),
}


def _model(cls, opt):
    keras.utils.set_random_seed(5)
    model = cls([keras.Input((16,)), keras.layers.Dense(8, activation="relu"),
                 keras.layers.Dense(2)])
    model.compile(optimizer=OPTIMIZERS[opt](), loss="mse", steps_per_execution=2,
                  **({} if cls is ipu.Sequential else {"run_eagerly": True}))
    return model


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 16)).astype(np.float32)
    return x, np.stack([x[:, :4].sum(1), x[:, 4:8].sum(1)], 1)


@pytest.fixture(scope="module")
def trained(data):
    models = {}
    for opt in OPTIMIZERS:
        on_ipu, on_cpu = _model(ipu.Sequential, opt), _model(keras.Sequential, opt)
        on_cpu.set_weights(on_ipu.get_weights())
        for model in (on_ipu, on_cpu):
            model.fit(*data, batch_size=8, epochs=2, verbose=0)
        models[opt] = on_ipu, on_cpu
    return models


@pytest.mark.parametrize("opt", sorted(OPTIMIZERS))
def test_device_training_equals_keras(trained, opt):
    on_ipu, on_cpu = trained[opt]
    for got, want in zip(on_ipu.get_weights(), on_cpu.get_weights()):
        np.testing.assert_allclose(got, want, **T.FLOAT32.kwargs)
    for got, want in zip(on_ipu.optimizer.variables, on_cpu.optimizer.variables):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), **T.FLOAT32.kwargs)


def test_float16_slots_take_half_the_bytes_on_the_device(trained):
    def variable_bytes(opt):
        return trained[opt][0].train_function.last_program.executable.memory[
            "categories"]["variables"]
    # Three slots (m, v, vhat) per parameter: float16 saves 2 bytes on each.
    assert variable_bytes("adam32") - variable_bytes("adam16") == 3 * 2 * PARAMS


def test_a_model_with_an_addons_optimizer_saves_and_loads(trained, data, tmp_path):
    model = trained["lamb"][0]
    path = str(tmp_path / "lamb.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert type(loaded.optimizer) is ipu_optimizers.LAMBIpuOptimizer
    assert loaded.optimizer.get_config() == model.optimizer.get_config()
    for got, want in zip(loaded.optimizer.variables, model.optimizer.variables):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    loaded.fit(*data, batch_size=8, verbose=0)
