"""Catalogue sections: convolution, pooling, normalization, regularization and noise."""
import keras
from keras import layers as L

from ipu_keras._src.conformance.item import on

# Input shapes: a short sequence, a small image and a small volume, each with channels.
SEQ, IMG, VOL = (9, 4), (7, 7, 4), (5, 5, 5, 2)


def _conv(shape, make, name, group="convolution", **kwargs):
    return on(shape, lambda x: make()(x), name, group, **kwargs)


def convolution():
    items = []
    for dims, shape, conv in ((1, SEQ, L.Conv1D), (2, IMG, L.Conv2D), (3, VOL, L.Conv3D)):
        n = f"Conv{dims}D"
        items += [
            _conv(shape, lambda c=conv: c(3, 3), n),
            _conv(shape, lambda c=conv: c(3, 2, strides=2, padding="same"),
                  f"{n} (strides 2, same)"),
            _conv(shape, lambda c=conv: c(3, 3, padding="same"), f"{n} (same)"),
            _conv(shape, lambda c=conv: c(3, 2, dilation_rate=2), f"{n} (dilation 2)"),
            _conv(shape, lambda c=conv: c(4, 3, groups=2, activation="relu"),
                  f"{n} (groups 2)"),
        ]
    items += [
        _conv(SEQ, lambda: L.Conv1D(3, 3, padding="causal", dilation_rate=2),
              "Conv1D (causal, dilation 2)"),
        _conv(IMG, lambda: L.Conv2D(3, (3, 2), strides=(2, 1)), "Conv2D (strides 2x1)"),
        _conv((4, 6, 6), lambda: L.Conv2D(3, 3, data_format="channels_first"),
              "Conv2D (channels_first)", cpu_xla=True),
    ]
    for dims, shape, conv in ((1, SEQ, L.Conv1DTranspose), (2, IMG, L.Conv2DTranspose),
                              (3, VOL, L.Conv3DTranspose)):
        n = f"Conv{dims}DTranspose"
        items += [
            _conv(shape, lambda c=conv: c(3, 3), n),
            _conv(shape, lambda c=conv: c(3, 3, strides=2, padding="same"),
                  f"{n} (strides 2, same)"),
        ]
    items += [
        _conv(SEQ, lambda: L.Conv1DTranspose(3, 2, dilation_rate=2),
              "Conv1DTranspose (dilation 2)", cpu_xla=True),
        _conv(IMG, lambda: L.Conv2DTranspose(3, 3, strides=2, output_padding=1),
              "Conv2DTranspose (output_padding)"),
        _conv(IMG, lambda: L.Conv2DTranspose(3, 2, dilation_rate=2, padding="same"),
              "Conv2DTranspose (dilation 2, same)", cpu_xla=True),
        _conv(SEQ, lambda: L.DepthwiseConv1D(3), "DepthwiseConv1D"),
        _conv(SEQ, lambda: L.DepthwiseConv1D(3, strides=2, padding="same", depth_multiplier=2),
              "DepthwiseConv1D (strides 2, same, multiplier 2)"),
        _conv(IMG, lambda: L.DepthwiseConv2D(3), "DepthwiseConv2D"),
        _conv(IMG, lambda: L.DepthwiseConv2D(3, strides=2, padding="same", depth_multiplier=2),
              "DepthwiseConv2D (strides 2, same, multiplier 2)"),
        _conv(IMG, lambda: L.DepthwiseConv2D(2, dilation_rate=2), "DepthwiseConv2D (dilation 2)"),
        _conv(SEQ, lambda: L.SeparableConv1D(5, 3), "SeparableConv1D"),
        _conv(SEQ, lambda: L.SeparableConv1D(5, 3, strides=2, padding="same",
                                             depth_multiplier=2),
              "SeparableConv1D (strides 2, same, multiplier 2)"),
        _conv(IMG, lambda: L.SeparableConv2D(5, 3), "SeparableConv2D"),
        _conv(IMG, lambda: L.SeparableConv2D(5, 3, strides=2, padding="same",
                                             depth_multiplier=2),
              "SeparableConv2D (strides 2, same, multiplier 2)"),
        _conv(IMG, lambda: L.SeparableConv2D(5, 2, dilation_rate=2),
              "SeparableConv2D (dilation 2)"),
    ]
    return items


def pooling():
    items = []
    for dims, shape in ((1, SEQ), (2, IMG), (3, VOL)):
        for kind in ("Max", "Average"):
            pool = getattr(L, f"{kind}Pooling{dims}D")
            n = f"{kind}Pooling{dims}D"
            items += [
                _conv(shape, lambda p=pool: p(2), n, "pooling"),
                _conv(shape, lambda p=pool: p(3, strides=2, padding="same"),
                      f"{n} (3, strides 2, same)", "pooling"),
            ]
            glob = getattr(L, f"Global{kind}Pooling{dims}D")
            items.append(_conv(shape, lambda p=glob: p(), f"Global{kind}Pooling{dims}D",
                               "pooling"))
    items += [
        _conv(IMG, lambda: L.MaxPooling2D((2, 3), strides=(1, 2)),
              "MaxPooling2D (2x3, strides 1x2)", "pooling"),
        _conv(IMG, lambda: L.GlobalAveragePooling2D(keepdims=True),
              "GlobalAveragePooling2D (keepdims)", "pooling"),
        _conv(IMG, lambda: L.GlobalMaxPooling2D(keepdims=True),
              "GlobalMaxPooling2D (keepdims)", "pooling"),
        _conv((4, 6, 6), lambda: L.MaxPooling2D(2, data_format="channels_first"),
              "MaxPooling2D (channels_first)", "pooling"),
        _conv((4, 6, 6), lambda: L.GlobalAveragePooling2D(data_format="channels_first"),
              "GlobalAveragePooling2D (channels_first)", "pooling"),
    ]
    return items


def _frozen_batch_norm():
    layer = L.BatchNormalization()
    layer.trainable = False
    return layer


def normalization():
    g = "normalization"
    dense = lambda x: L.Dense(5)(x)  # noqa: E731
    return [
        on((6,), lambda x: L.BatchNormalization()(dense(x)), "BatchNormalization", g,
           partial_batch=True),
        on((6,), lambda x: L.BatchNormalization(momentum=0.5, epsilon=0.01, center=False,
                                                scale=False)(dense(x)),
           "BatchNormalization (momentum, no center/scale)", g),
        _conv(IMG, lambda: L.BatchNormalization(), "BatchNormalization (image)", g),
        _conv((4, 5, 5), lambda: L.BatchNormalization(axis=1),
              "BatchNormalization (axis 1)", g),
        on((6,), lambda x: _frozen_batch_norm()(dense(x)), "BatchNormalization (frozen)", g),
        on((6,), lambda x: L.BatchNormalization()(dense(x), training=False),
           "BatchNormalization (inference)", g),
        on((6,), lambda x: L.LayerNormalization()(dense(x)), "LayerNormalization", g),
        _conv(IMG, lambda: L.LayerNormalization(axis=(1, 2, 3)),
              "LayerNormalization (axes 1-3)", g),
        on((6,), lambda x: L.LayerNormalization(rms_scaling=True)(dense(x)),
           "LayerNormalization (rms_scaling)", g),
        _conv(IMG, lambda: L.GroupNormalization(2), "GroupNormalization", g),
        on((6,), lambda x: L.GroupNormalization(5, center=False)(dense(x)),
           "GroupNormalization (instance)", g),
        on((6,), lambda x: L.UnitNormalization()(dense(x)), "UnitNormalization", g),
        on((6,), lambda x: L.RMSNormalization()(dense(x)), "RMSNormalization", g),
    ]


def _regularized(name, **kwargs):
    return on((6,), lambda x: L.Dense(5, **kwargs)(x), name, "regularization")


def regularization():
    g = "regularization"
    reg, con = keras.regularizers, keras.constraints
    dense = lambda x: L.Dense(5, activation="relu")(x)  # noqa: E731
    return [
        on((6,), lambda x: L.Dropout(0.3)(dense(x)), "Dropout", g),
        on((4, 6), lambda x: L.Dropout(0.5, noise_shape=(None, 1, 5))(L.Dense(5)(x)),
           "Dropout (noise_shape)", g),
        _conv(SEQ, lambda: L.SpatialDropout1D(0.3), "SpatialDropout1D", g),
        _conv(IMG, lambda: L.SpatialDropout2D(0.3), "SpatialDropout2D", g),
        _conv(VOL, lambda: L.SpatialDropout3D(0.3), "SpatialDropout3D", g),
        on((6,), lambda x: L.GaussianNoise(0.2)(dense(x)), "GaussianNoise", g),
        on((6,), lambda x: L.GaussianDropout(0.3)(dense(x)), "GaussianDropout", g),
        on((6,), lambda x: L.AlphaDropout(0.3)(L.Dense(5, activation="selu")(x)),
           "AlphaDropout", g),
        on((6,), lambda x: L.ActivityRegularization(0.01, 0.02)(dense(x)),
           "ActivityRegularization", g),
        _regularized("kernel_regularizer l1", kernel_regularizer=reg.L1(0.01)),
        _regularized("kernel_regularizer l2", kernel_regularizer=reg.L2(0.01)),
        _regularized("kernel_regularizer l1_l2", kernel_regularizer=reg.L1L2(0.01, 0.02)),
        _regularized("kernel_regularizer orthogonal",
                     kernel_regularizer=reg.OrthogonalRegularizer(0.01)),
        _regularized("bias_regularizer l2", bias_regularizer=reg.L2(0.05)),
        _regularized("activity_regularizer l1", activity_regularizer=reg.L1(0.01)),
        _regularized("kernel_constraint max_norm", kernel_constraint=con.MaxNorm(0.5)),
        _regularized("kernel_constraint non_neg", kernel_constraint=con.NonNeg()),
        _regularized("kernel_constraint unit_norm", kernel_constraint=con.UnitNorm()),
        _regularized("kernel_constraint min_max_norm",
                     kernel_constraint=con.MinMaxNorm(0.2, 0.6, rate=0.5)),
        _regularized("bias_constraint non_neg", bias_constraint=con.NonNeg()),
        _conv(IMG, lambda: L.Conv2D(3, 3, kernel_regularizer=reg.L2(0.01),
                                    kernel_constraint=con.MaxNorm(1.0, axis=(0, 1, 2))),
              "Conv2D regularizer and constraint", g),
    ]
