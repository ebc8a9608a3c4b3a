"""The Keras catalogue, item by item: what must train on the simulated IPU exactly as
TensorFlow trains it on the CPU. Each section is a function returning its items; the
sections live in `catalogue_*` modules by theme and `catalogue()` lists them all.
"""
import keras
from keras import layers as L

from ipu_keras._src.conformance import (
    catalogue_conv, catalogue_sequence, catalogue_training,
)
from ipu_keras._src.conformance.item import on


def core():
    return [
        on((6,), lambda x: L.Dense(5, activation="relu")(x), "Dense", "core",
           partial_batch=True),
        on((6,), lambda x: L.Dense(5, use_bias=False)(x), "Dense (no bias)", "core"),
        on((4, 6), lambda x: L.Dense(5)(x), "Dense (rank 3 input)", "core"),
        on((4, 6), lambda x: L.EinsumDense("abc,cd->abd", (4, 5))(x), "EinsumDense", "core"),
        on((4, 6), lambda x: L.EinsumDense("abc,cd->abd", (4, 5), bias_axes="d")(x),
           "EinsumDense (bias)", "core"),
        on((4, 6), lambda x: L.EinsumDense("abc,cde->abde", (4, 2, 3), bias_axes="de")(x),
           "EinsumDense (two output axes)", "core"),
        on((6,), lambda x: L.Identity()(L.Dense(5)(x)), "Identity", "core"),
        on((6,), lambda x: L.Lambda(lambda t: t * 2.0 + 1.0)(L.Dense(5)(x)), "Lambda", "core"),
        on((6,), lambda x: L.Rescaling(0.5, offset=0.25)(L.Dense(5)(x)), "Rescaling", "core"),
    ]


_ACTIVATIONS = (
    "celu", "elu", "exponential", "gelu", "hard_shrink", "hard_sigmoid", "hard_silu",
    "hard_swish", "hard_tanh", "leaky_relu", "linear", "log_sigmoid", "log_softmax", "mish",
    "relu", "relu6", "selu", "sigmoid", "silu", "soft_shrink", "softmax", "softplus",
    "softsign", "sparse_plus", "sparse_sigmoid", "sparsemax", "squareplus", "swish", "tanh",
    "tanh_shrink",
)


def _activation(fn, name):
    return on((6,), lambda x: L.Dense(6, activation=fn)(x), f"activation {name}", "activations")


def activations():
    """Every function in keras.activations (on Dense), then the activation layers."""
    items = [_activation(a, a) for a in _ACTIVATIONS]
    act = keras.activations
    items += [
        _activation(lambda t: act.gelu(t, approximate=True), "gelu (approximate)"),
        _activation(lambda t: act.threshold(t, 0.1, -1.0), "threshold"),
        _activation(lambda t: act.relu(t, negative_slope=0.1, max_value=1.5, threshold=0.2),
                    "relu (slope, max_value, threshold)"),
        _activation(lambda t: act.softmax(t, axis=-1), "softmax (axis)"),
        # glu halves the last axis, which Dense's output spec does not know: a Lambda does.
        on((6,), lambda x: L.Lambda(act.glu)(L.Dense(6)(x)), "activation glu", "activations"),
    ]
    dense = lambda x: L.Dense(6)(x)  # noqa: E731
    for layer, name in (
        (lambda: L.ReLU(), "ReLU"),
        (lambda: L.ReLU(max_value=1.0, negative_slope=0.1, threshold=0.1), "ReLU (options)"),
        (lambda: L.LeakyReLU(0.2), "LeakyReLU"),
        (lambda: L.PReLU(), "PReLU"),
        (lambda: L.ELU(0.5), "ELU"),
        (lambda: L.Softmax(), "Softmax"),
        (lambda: L.Activation("tanh"), "Activation"),
    ):
        items.append(on((6,), lambda x, f=layer: f()(dense(x)), name, "activations"))
    items.append(on((3, 4), lambda x: L.Softmax(axis=1)(L.Dense(4)(x)), "Softmax (axis 1)",
                    "activations"))
    return items


def reshaping():
    g = "reshaping"
    return [
        on((2, 3, 4), lambda x: L.Reshape((6, 4))(x), "Reshape", g),
        on((2, 3, 4), lambda x: L.Flatten()(x), "Flatten", g),
        on((2, 3, 4), lambda x: L.Permute((2, 1, 3))(x), "Permute", g),
        on((6,), lambda x: L.RepeatVector(3)(x), "RepeatVector", g),
        on((8, 3), lambda x: L.Cropping1D((1, 2))(x), "Cropping1D", g),
        on((8, 3), lambda x: L.ZeroPadding1D(2)(x), "ZeroPadding1D", g),
        on((8, 3), lambda x: L.UpSampling1D(2)(x), "UpSampling1D", g),
        on((6, 6, 2), lambda x: L.Cropping2D(((1, 0), (2, 1)))(x), "Cropping2D", g),
        on((5, 5, 2), lambda x: L.ZeroPadding2D((1, 2))(x), "ZeroPadding2D", g),
        on((3, 3, 2), lambda x: L.UpSampling2D(2)(x), "UpSampling2D", g),
        on((3, 3, 2), lambda x: L.UpSampling2D(2, interpolation="bilinear")(x),
           "UpSampling2D (bilinear)", g),
        on((4, 4, 4, 1), lambda x: L.Cropping3D(((1, 0), (0, 1), (1, 1)))(x), "Cropping3D", g),
        on((2, 3, 2, 1), lambda x: L.ZeroPadding3D((1, 0, 1))(x), "ZeroPadding3D", g),
        on((2, 2, 2, 1), lambda x: L.UpSampling3D((2, 1, 2))(x), "UpSampling3D", g),
    ]


def _merge(layer, name, width=4):
    def body(x):
        a, b = L.Dense(4)(x), L.Dense(width, activation="tanh")(x)
        return layer()([a, b])
    return on((6,), body, name, "merging")


def merging():
    items = [_merge(cls, cls.__name__) for cls in (
        L.Add, L.Subtract, L.Multiply, L.Average, L.Maximum, L.Minimum, L.Concatenate)]
    three = lambda x: [L.Dense(4)(x), L.Dense(4)(x), L.Dense(4)(x)]  # noqa: E731
    items += [
        _merge(lambda: L.Concatenate(axis=-1), "Concatenate (unequal widths)", width=2),
        on((6,), lambda x: L.Add()(three(x)), "Add (three inputs)", "merging"),
        on((6,), lambda x: L.Dot(axes=1)([L.Dense(4)(x), L.Dense(4)(x)]), "Dot", "merging"),
        on((6,), lambda x: L.Dot(axes=1, normalize=True)([L.Dense(4)(x), L.Dense(4)(x)]),
           "Dot (normalize)", "merging"),
        on((3, 4), lambda x: L.Dot(axes=(2, 2))([L.Dense(5)(x), L.Dense(5)(x)]),
           "Dot (batched)", "merging"),
    ]
    return items


SECTIONS = (
    core, catalogue_conv.convolution, catalogue_conv.pooling, catalogue_conv.normalization,
    catalogue_conv.regularization, catalogue_sequence.recurrent,
    catalogue_sequence.attention_and_embedding, reshaping, merging, activations,
    catalogue_training.losses, catalogue_training.metrics, catalogue_training.optimizers,
    catalogue_training.mixed_precision,
)


def catalogue():
    """Every item, section by section."""
    return [item for section in SECTIONS for item in section()]
