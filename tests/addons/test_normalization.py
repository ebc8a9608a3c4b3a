"""GroupNorm / InstanceNorm / LayerNorm against a numpy transcription and against Keras.

Channel c is in group c % G with strided grouping (the original's default), c // (C/G)
without; there are no moving statistics, so inference normalises with the batch's own.
"""
import numpy as np
import pytest
import keras

from ipu_keras.errors import AddonsArgumentError, AddonsUnsupportedArgumentError
from ipu_keras_addons.keras import layers as ipu_layers
from ipu_keras._src.conformance import tolerances as T

EPS = 1e-3


def numpy_group_norm(x, groups, strided, gamma, beta, channels_axis=-1):
    """Per sample and group: (x - mean) / sqrt(biased var + eps) * gamma + beta."""
    x = np.moveaxis(x.astype(np.float64), channels_axis, -1)
    channels = x.shape[-1]
    group_of = (np.arange(channels) % groups if strided
                else np.arange(channels) // (channels // groups))
    out = np.empty_like(x)
    for g in range(groups):
        sel = x[..., group_of == g]
        axes = tuple(range(1, sel.ndim))
        mean = sel.mean(axis=axes, keepdims=True)
        var = sel.var(axis=axes, keepdims=True)
        out[..., group_of == g] = (sel - mean) / np.sqrt(var + EPS)
    return np.moveaxis(out * gamma + beta, -1, channels_axis)


@pytest.fixture(scope="module")
def images():
    return np.random.default_rng(0).standard_normal((3, 5, 4, 8)).astype(np.float32) * 2 + 1


@pytest.mark.parametrize("groups, strided", [(2, True), (4, True), (2, False), (8, True)])
@pytest.mark.parametrize("training", [True, False])
def test_group_norm_follows_the_grouping(images, groups, strided, training):
    layer = ipu_layers.GroupNorm(groups, strided_channel_grouping=strided)
    out = np.asarray(layer(images, training=training))
    gamma, beta = (np.asarray(w) for w in (layer.gamma, layer.beta))
    want = numpy_group_norm(images, groups, strided, gamma, beta)
    np.testing.assert_allclose(out, want, **T.FLOAT32.kwargs)


def test_strided_and_contiguous_groupings_differ(images):
    kwargs = {"gamma_initializer": "ones", "beta_initializer": "zeros"}
    strided = np.asarray(ipu_layers.GroupNorm(2, **kwargs)(images))
    contiguous = np.asarray(
        ipu_layers.GroupNorm(2, strided_channel_grouping=False, **kwargs)(images))
    assert np.abs(strided - contiguous).max() > 1e-2
    # Re-shuffled so that each strided group is contiguous, they are the contiguous groups.
    order = np.argsort(np.arange(8) % 2, kind="stable")
    reordered = np.asarray(
        ipu_layers.GroupNorm(2, strided_channel_grouping=False, **kwargs)(images[..., order]))
    T.FLOAT32.assert_close(strided[..., order], reordered)


def test_nchw_channels_axis(images):
    nchw = np.ascontiguousarray(np.moveaxis(images, -1, 1))
    layer = ipu_layers.GroupNorm(4, channels_axis=1)
    out = np.asarray(layer(nchw))
    want = numpy_group_norm(nchw, 4, True, np.asarray(layer.gamma), np.asarray(layer.beta),
                            channels_axis=1)
    np.testing.assert_allclose(out, want, **T.FLOAT32.kwargs)


def test_default_initializers_and_no_moving_statistics(images):
    for layer in (ipu_layers.GroupNorm(), ipu_layers.InstanceNorm()):
        layer.build(images.shape)
        assert [w.name for w in layer.weights] == ["gamma", "beta"]
        assert type(layer.gamma_initializer).__name__ == "GlorotUniform"
        assert type(layer.beta_initializer).__name__ == "GlorotUniform"
    layer = ipu_layers.LayerNorm()
    layer.build(images.shape)
    np.testing.assert_array_equal(np.asarray(layer.gamma), 1)
    np.testing.assert_array_equal(np.asarray(layer.beta), 0)


def test_instance_norm_is_one_group_per_channel(images):
    layer = ipu_layers.InstanceNorm()
    out = np.asarray(layer(images))
    want = numpy_group_norm(images, 8, True, np.asarray(layer.gamma), np.asarray(layer.beta))
    np.testing.assert_allclose(out, want, **T.FLOAT32.kwargs)


@pytest.mark.parametrize("axis", [-1, [1, 3], [2, 3], (1, 2, 3)])
def test_layer_norm_weights_interchange_with_keras(images, axis):
    ours = ipu_layers.LayerNorm(axis=axis)
    theirs = keras.layers.LayerNormalization(axis=axis)
    ours.build(images.shape)
    theirs.build(images.shape)
    rng = np.random.default_rng(1)
    theirs.set_weights([rng.standard_normal(w.shape).astype(np.float32)
                        for w in theirs.get_weights()])
    ours.set_weights(theirs.get_weights())
    np.testing.assert_allclose(np.asarray(ours(images)), np.asarray(theirs(images)),
                               **T.FLOAT32.kwargs)


@pytest.mark.parametrize("make, error", [
    (lambda: ipu_layers.GroupNorm(3)(np.zeros((2, 8), np.float32)), AddonsArgumentError),
    (lambda: ipu_layers.GroupNorm(16)(np.zeros((2, 8), np.float32)), AddonsArgumentError),
    (lambda: ipu_layers.GroupNorm(2, channels_axis=2)(np.zeros((2, 4, 4, 8), np.float32)),
     AddonsArgumentError),
    (lambda: ipu_layers.LayerNorm(beta_regularizer="l2"), AddonsUnsupportedArgumentError),
    (lambda: ipu_layers.LayerNorm(axis="x"), AddonsArgumentError),
])
def test_bad_arguments_are_refused(make, error):
    with pytest.raises(error, match="Received"):
        make()


@pytest.mark.parametrize("cls", [ipu_layers.GroupNorm, ipu_layers.InstanceNorm,
                                 ipu_layers.LayerNorm])
def test_config_round_trips(cls):
    layer = cls(epsilon=1e-5)
    clone = cls.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
