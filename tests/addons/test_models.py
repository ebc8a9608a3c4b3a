"""Models built from addons layers train under ipu_keras' fit like Keras on the CPU, and
save/load through `.keras` files."""
import numpy as np
import pytest
import keras

import ipu_keras as ipu
from ipu_keras_addons.keras import layers as ipu_layers
from ipu_keras._src.conformance import tolerances as T

pytestmark = pytest.mark.slow

STEPS = 2


def _layers():
    return [
        ipu_layers.Embedding(20, 8, serialization_factor=2),
        ipu_layers.LayerNorm(),
        keras.layers.Flatten(),
        ipu_layers.SerialDense(16, 2, "kernel_rows", activation="relu"),
        ipu_layers.GroupNorm(4),
        ipu_layers.Dropout(0.25, seed=[3, 7]),
        ipu_layers.RecomputationCheckpoint(),
        ipu_layers.SerialDense(3, 4, "input_rows_kernel_columns", activation="softmax"),
    ]


def _build(cls):
    inputs = keras.Input((6,), dtype="int32")
    outputs = inputs
    for layer in _layers():
        outputs = layer(outputs)
    model = cls(inputs, outputs)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy",
                  steps_per_execution=STEPS, **({} if cls is ipu.Model else
                                                {"run_eagerly": True}))
    return model


def _data():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 20, (32, 6)).astype(np.int32)
    return x, (x[:, 0] % 3).astype(np.int32)


def train_both(on_ipu, on_cpu, x, y, batch_size, tolerance=T.FLOAT32):
    """Fits both models from the same weights for 2 epochs; asserts equal losses and
    weights within the row `tolerance`."""
    on_cpu.set_weights(on_ipu.get_weights())
    got = on_ipu.fit(x, y, batch_size=batch_size, epochs=2, verbose=0).history
    want = on_cpu.fit(x, y, batch_size=batch_size, epochs=2, verbose=0).history
    np.testing.assert_allclose(got["loss"], want["loss"], **T.FLOAT32.kwargs)
    for g, w in zip(on_ipu.get_weights(), on_cpu.get_weights()):
        tolerance.assert_close(g, w)


@pytest.fixture(scope="module")
def trained():
    keras.utils.set_random_seed(0)
    on_ipu = _build(ipu.Model)
    on_cpu = _build(keras.Model)
    # Embedding gradients summed through LayerNorm: float32 summation order shows.
    train_both(on_ipu, on_cpu, *_data(), batch_size=8,
               tolerance=T.FLOAT32_TRAIN_THROUGH_LAYERNORM)
    return on_ipu, on_cpu


def test_trained_model_predicts_like_keras(trained):
    on_ipu, on_cpu = trained
    x, _ = _data()
    np.testing.assert_allclose(on_ipu.predict(x, batch_size=8, verbose=0),
                               on_cpu.predict(x, batch_size=8, verbose=0),
                               **T.FLOAT32_TRAIN_THROUGH_LAYERNORM.kwargs)


def test_save_and_load(trained, tmp_path):
    model = trained[0]
    path = str(tmp_path / "addons.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, ipu.Model)
    assert [type(layer) for layer in loaded.layers] == [type(layer) for layer in model.layers]
    x, y = _data()
    np.testing.assert_allclose(loaded.predict(x, batch_size=8, verbose=0),
                               model.predict(x, batch_size=8, verbose=0), **T.FLOAT32.kwargs)
    loaded.fit(x, y, batch_size=8, verbose=0)


def _rnn_model(cls, popnn):
    lstm, gru = ((ipu_layers.PopnnLSTM, ipu_layers.PopnnGRU) if popnn
                 else (keras.layers.LSTM, keras.layers.GRU))
    keras.utils.set_random_seed(1)
    inputs = keras.Input((5, 3))
    hidden = lstm(6, return_sequences=True)(inputs)
    outputs = keras.layers.Dense(2)(gru(4)(hidden))
    model = cls(inputs, outputs)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse", steps_per_execution=2,
                  **({} if cls is ipu.Model else {"run_eagerly": True}))
    return model


def test_popnn_rnn_model_trains_like_keras_rnn(tmp_path):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((16, 5, 3)).astype(np.float32)
    y = np.stack([x[:, :, 0].sum(1), x[:, -1, 1]], 1)
    on_ipu, on_cpu = _rnn_model(ipu.Model, True), _rnn_model(keras.Model, False)
    train_both(on_ipu, on_cpu, x, y, batch_size=4)
    path = str(tmp_path / "rnn.keras")
    on_ipu.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_allclose(loaded.predict(x, batch_size=4, verbose=0),
                               on_ipu.predict(x, batch_size=4, verbose=0), **T.FLOAT32.kwargs)


def _ctc_model(cls, batch=4, steps=8, classes=5):
    keras.utils.set_random_seed(2)
    labels = keras.Input((3,), batch_size=batch, dtype="int32")
    data = keras.Input((steps, 6), batch_size=batch)
    label_length = keras.Input((), batch_size=batch, dtype="int32")
    data_length = keras.Input((), batch_size=batch, dtype="int32")
    logits = keras.layers.Dense(classes)(data)
    time_major = keras.layers.Lambda(lambda t: keras.ops.transpose(t, [1, 0, 2]))(logits)
    loss = ipu_layers.CTCLoss(from_logits=True)(labels, time_major, label_length, data_length)
    model = cls((labels, data, label_length, data_length), loss)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=lambda y_true, y_pred: y_pred,
                  steps_per_execution=2, **({} if cls is ipu.Model else {"run_eagerly": True}))
    return model


def test_ctc_loss_model_trains_like_keras():
    rng = np.random.default_rng(3)
    x = (rng.integers(1, 5, (16, 3)).astype(np.int32),
         rng.standard_normal((16, 8, 6)).astype(np.float32),
         rng.integers(1, 4, 16).astype(np.int32), rng.integers(6, 9, 16).astype(np.int32))
    y = np.zeros((16, 1), np.float32)
    on_ipu, on_cpu = _ctc_model(ipu.Model), _ctc_model(keras.Model)
    train_both(on_ipu, on_cpu, x, y, batch_size=4)
