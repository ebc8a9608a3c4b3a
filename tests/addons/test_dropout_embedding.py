"""Dropout (seed pair, noise_shape, rate checks) and Embedding (serialized lookup)."""
import numpy as np
import pytest
import tensorflow as tf

from ipu_keras.errors import AddonsArgumentError, AddonsUnsupportedArgumentError
from ipu_keras_addons.keras import layers as ipu_layers
from ipu_keras._src.conformance import tolerances as T

X = np.ones((4, 6, 8), np.float32)


def test_a_fixed_seed_repeats_the_mask():
    layer = ipu_layers.Dropout(0.5, seed=[42, 42])
    outs = [np.asarray(layer(X, training=True)) for _ in range(7)]
    for out in outs[1:]:
        np.testing.assert_array_equal(out, outs[0])
    assert set(np.unique(outs[0])) == {0.0, 2.0}
    assert 0.3 < (outs[0] == 0).mean() < 0.7


def test_no_seed_draws_fresh_masks_and_inference_is_identity():
    layer = ipu_layers.Dropout(0.5)
    a, b = (np.asarray(layer(X, training=True)) for _ in range(2))
    assert (a != b).any()
    np.testing.assert_array_equal(np.asarray(layer(X, training=False)), X)


def test_noise_shape_broadcasts_the_mask():
    out = np.asarray(ipu_layers.Dropout(0.5, noise_shape=[4, 1, 8], seed=[1, 2])(
        X, training=True))
    np.testing.assert_array_equal(out, np.broadcast_to(out[:, :1], out.shape))


@pytest.mark.parametrize("kwargs", [
    {"rate": 1.0}, {"rate": -0.1}, {"rate": 0.5, "seed": [1, 2, 3]}, {"rate": 0.5, "seed": 4},
])
def test_bad_dropout_arguments_are_refused(kwargs):
    with pytest.raises(AddonsArgumentError, match="Received"):
        ipu_layers.Dropout(**kwargs)


def test_noise_shape_mismatch_is_refused():
    with pytest.raises(AddonsArgumentError, match="Dimension mismatch"):
        ipu_layers.Dropout(0.5, noise_shape=[4, 3, 8])(X, training=True)


def test_dropout_config_round_trips():
    layer = ipu_layers.Dropout(0.25, noise_shape=[None, 1, 8], seed=[3, 4])
    config = layer.get_config()
    assert {k: config[k] for k in ("rate", "noise_shape", "seed", "ref")} == {
        "rate": 0.25, "noise_shape": [None, 1, 8], "seed": [3, 4], "ref": True}
    assert ipu_layers.Dropout.from_config(config).get_config() == config


@pytest.mark.parametrize("factor", [1, 2, 5])
def test_embedding_equals_a_gather_with_its_gradient(factor):
    ids = np.random.default_rng(0).integers(0, 10, (3, 7)).astype(np.int32)
    layer = ipu_layers.Embedding(10, 4, serialization_factor=factor)
    with tf.GradientTape() as tape:
        out = layer(ids)
        loss = tf.reduce_sum(out * tf.range(4, dtype=tf.float32))
    table = np.asarray(layer.embeddings)
    np.testing.assert_array_equal(np.asarray(out), table[ids])
    want = np.zeros_like(table)
    np.add.at(want, ids, np.arange(4, dtype=np.float32))
    np.testing.assert_allclose(tf.convert_to_tensor(tape.gradient(loss, layer.embeddings)),
                               want, **T.EXACT.kwargs)


@pytest.mark.parametrize("kwargs, error", [
    ({"mask_zero": True}, AddonsUnsupportedArgumentError),
    ({"input_length": 5}, AddonsUnsupportedArgumentError),
    ({"embeddings_regularizer": "l2"}, AddonsUnsupportedArgumentError),
    ({"serialization_factor": 3}, AddonsArgumentError),
    ({"serialization_factor": 0}, AddonsArgumentError),
])
def test_bad_embedding_arguments_are_refused(kwargs, error):
    with pytest.raises(error, match="Received"):
        ipu_layers.Embedding(10, 4, **kwargs)


def test_embedding_wants_rank_2_ids_and_round_trips():
    layer = ipu_layers.Embedding(10, 4, serialization_factor=2)
    with pytest.raises(AddonsArgumentError, match="batch, input_length"):
        layer(np.zeros((2, 3, 4), np.int32))
    clone = ipu_layers.Embedding.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
