"""CTCLoss against tf.nn.ctc_loss's batch mean; the beam-search layers on data whose best
labelling is known."""
import keras
import numpy as np
import pytest
import tensorflow as tf

from ipu_keras_addons.keras import layers as ipu_layers
from ipu_keras._src.conformance import tolerances

T, B, C, L = 12, 3, 5, 4


@pytest.fixture(scope="module")
def batch():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((T, B, C)).astype(np.float32)
    labels = rng.integers(1, C, (B, L)).astype(np.int32)
    return logits, labels, np.array([4, 2, 3], np.int32), np.array([12, 9, 10], np.int32)


@pytest.mark.parametrize("blank_index", [0, C - 1])
@pytest.mark.parametrize("from_logits", [True, False])
def test_ctc_loss_is_the_batch_mean_of_tf_ctc_loss(batch, blank_index, from_logits):
    logits, labels, label_length, data_length = batch
    labels = np.where(labels == blank_index, (blank_index + 1) % C, labels)
    data = logits if from_logits else tf.nn.log_softmax(logits).numpy()
    layer = ipu_layers.CTCLoss(blank_index=blank_index, from_logits=from_logits)
    x = tf.constant(data)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        got = layer(labels, x, label_length, data_length)
        want = tf.reduce_mean(tf.nn.ctc_loss(labels, x, label_length, data_length,
                                             logits_time_major=True,
                                             blank_index=blank_index))
    assert got.shape == (1,)
    np.testing.assert_allclose(got.numpy()[0], want.numpy(), **tolerances.FLOAT32.kwargs)
    np.testing.assert_allclose(tape.gradient(got, x).numpy(), tape.gradient(want, x).numpy(),
                               **tolerances.FLOAT32.kwargs)


def _peaked(paths, blank_index):
    """Log probabilities that strongly favour one class per (time, sample)."""
    data = np.full((T, B, C), -8.0, np.float32)
    for b, path in enumerate(paths):
        for t in range(T):
            data[t, b, path[t] if t < len(path) else blank_index] = 0.0
    return tf.nn.log_softmax(data).numpy()


@pytest.mark.parametrize("blank_index", [0, 2])
def test_beam_search_decodes_the_dominant_labelling(blank_index):
    other = 1 if blank_index != 1 else 3
    paths = [[3, 3, blank_index, 3, 4], [other, blank_index, other], [4]]
    data = _peaked(paths, blank_index)
    lengths = np.full([B], T, np.int32)
    neg, length, decoded = ipu_layers.CTCInferenceLayer(blank_index, beam_width=10,
                                                        top_paths=2)(data, lengths)
    assert decoded.shape == (B, 2, T) and neg.shape == (B, 2)
    assert (np.diff(neg.numpy(), axis=1) >= 0).all()
    want = [[3, 3, 4], [other, other], [4]]
    for b, labels in enumerate(want):
        assert length.numpy()[b, 0] == len(labels)
        assert decoded.numpy()[b, 0, :len(labels)].tolist() == labels
    predictions = ipu_layers.CTCPredictionsLayer(blank_index, beam_width=10, top_paths=2)(
        data, lengths).numpy()
    for b, labels in enumerate(want):
        assert predictions[b].tolist() == labels + [blank_index] * (T - len(labels))


@pytest.mark.parametrize("cls", [ipu_layers.CTCLoss, ipu_layers.CTCInferenceLayer,
                                 ipu_layers.CTCPredictionsLayer])
def test_config_round_trips(cls):
    layer = cls(blank_index=3, from_logits=True)
    assert cls.from_config(layer.get_config()).get_config() == layer.get_config()


def _ctc_model(cls, blank_index):
    """Features [B, T, F] -> Dense -> time-major -> CTCLoss; outputs the mean loss."""
    features = keras.Input((T, 6), batch_size=B, name="features")
    labels = keras.Input((L,), batch_size=B, dtype="int32", name="labels")
    label_length = keras.Input((), batch_size=B, dtype="int32", name="label_length")
    data_length = keras.Input((), batch_size=B, dtype="int32", name="data_length")
    logits = keras.layers.Dense(C, name="logits")(features)
    time_major = keras.ops.transpose(logits, (1, 0, 2))
    loss = ipu_layers.CTCLoss(blank_index=blank_index, from_logits=True)(
        labels, time_major, label_length, data_length)
    model = cls([features, labels, label_length, data_length], loss)
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss=lambda _, y_pred: y_pred,
                  steps_per_execution=2)
    return model


@pytest.mark.slow
def test_a_model_trained_with_ctc_loss_on_the_ipu_equals_keras_on_the_cpu(batch):
    import ipu_keras

    _, labels, label_length, data_length = batch
    labels = np.where(labels == C - 1, 1, labels)   # no label may be the blank
    rng = np.random.default_rng(1)
    n = 4 * B
    inputs = {"features": rng.standard_normal((n, T, 6)).astype(np.float32),
              "labels": np.tile(labels, (4, 1)), "label_length": np.tile(label_length, 4),
              "data_length": np.tile(data_length, 4)}
    dummy = np.zeros((n,), np.float32)
    keras.utils.set_random_seed(0)
    on_ipu = _ctc_model(ipu_keras.Model, C - 1)
    on_cpu = _ctc_model(keras.Model, C - 1)
    on_cpu.set_weights(on_ipu.get_weights())
    got = on_ipu.fit(inputs, dummy, batch_size=B, epochs=2, shuffle=False,
                    verbose=0).history["loss"]
    want = on_cpu.fit(inputs, dummy, batch_size=B, epochs=2, shuffle=False,
                    verbose=0).history["loss"]
    tolerances.FLOAT32.assert_close(got, want)
    assert got[1] < got[0]
    for g, w in zip(on_ipu.get_weights(), on_cpu.get_weights()):
        tolerances.FLOAT32.assert_close(g, w)


def test_the_inference_layers_run_in_an_ipu_model_like_keras_on_the_cpu(batch):
    import ipu_keras

    logits, _, _, data_length = batch

    def build(cls):
        data = keras.Input((B, C), batch_size=T, name="data")   # time-major: T is the batch
        length = keras.Input((), batch_size=B, dtype="int32", name="length")
        neg, lengths, decoded = ipu_layers.CTCInferenceLayer(
            blank_index=2, beam_width=6, top_paths=2, from_logits=True)(data, length)
        best = ipu_layers.CTCPredictionsLayer(blank_index=2, beam_width=6, top_paths=2,
                                              from_logits=True)(data, length)
        return cls([data, length], [neg, lengths, decoded, best])

    inputs = [logits, data_length]
    got = ipu_keras.Model.predict_on_batch(build(ipu_keras.Model), inputs)
    want = build(keras.Model)(inputs)
    tolerances.FLOAT32.assert_close(got[0], np.asarray(want[0]))
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_array_equal(g, np.asarray(w))
