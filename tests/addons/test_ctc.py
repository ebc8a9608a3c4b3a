"""CTCLoss against tf.nn.ctc_loss's batch mean; the beam-search layers on data whose best
labelling is known."""
import numpy as np
import pytest
import tensorflow as tf

from ipu_keras_addons.keras import layers as ipu_layers
from ipu_keras.conformance import tolerances

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
