"""The 'conv' op family (convolutions and their gradients) against TensorFlow.

Also one end-to-end check: a small Keras CNN trained for three SGD steps in a custom
`tf.GradientTape` loop through `IPUStrategy.run`, against the same loop in TensorFlow.
"""
import keras
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras
from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.ops import conv
from tests.ops.harness import case as harness_case
from tests.ops.harness import check_case, f32, grad

raw = tf.raw_ops


def _conv2d(strides=1, padding="VALID", dilations=1, data_format="NHWC"):
    return lambda x, w: tf.nn.conv2d(x, w, strides, padding, data_format, dilations)


def _xla(fn):
    """How Keras 3 runs grouped convolutions: inside a jit-compiled tf.function.

    XLA is also the oracle where TensorFlow's eager CPU kernels depend on the processor:
    NCHW layouts and dilated gradients exist there only where oneDNN provides them
    (AVX-512 machines); XLA's CPU convolution implements every layout and dilation on any
    x86-64, so those cases use it everywhere.
    """
    return tf.function(fn, jit_compile=True)


def case(tf_op, fn, *inputs, tolerance=T.FLOAT32_CONV_81, label=""):
    """A conv case: its outputs are sums of up to 81 products unless it names a larger row."""
    return harness_case(tf_op, fn, *inputs, tolerance=tolerance, label=label)


def _transpose(input_sizes, strides, padding):
    return lambda w, dy: tf.nn.conv2d_transpose(dy, w, input_sizes, strides, padding)


def _conv3d(strides=(1, 1, 1, 1, 1), padding="VALID", dilations=(1, 1, 1, 1, 1)):
    return lambda x, w: tf.nn.conv3d(x, w, strides, padding, dilations=dilations)


def _depthwise(strides=(1, 1, 1, 1), padding="VALID", dilations=(1, 1, 1, 1)):
    return lambda x, w: raw.DepthwiseConv2dNative(
        input=x, filter=w, strides=strides, padding=padding, dilations=dilations)


_EXPLICIT = [[0, 0], [1, 2], [0, 1], [0, 0]]
_EXPLICIT_SAME = [[0, 0], [2, 0], [0, 2], [0, 0]]   # a 3x3 output of the input's size

CONV2D = [
    case("Conv2D", _conv2d(), f32(2, 6, 6, 3), f32(3, 3, 3, 4), label="valid"),
    case("Conv2D", _conv2d(padding="SAME"), f32(2, 5, 5, 3), f32(3, 3, 3, 4), label="same"),
    case("Conv2D", _conv2d(2, "SAME"), f32(2, 7, 6, 3), f32(3, 2, 3, 5), label="same-s2"),
    case("Conv2D", _conv2d((1, 3, 2, 1), "VALID"), f32(1, 8, 7, 2), f32(2, 3, 2, 3),
         label="strides-hw"),
    case("Conv2D", _conv2d(1, "SAME", 2), f32(2, 7, 7, 3), f32(3, 3, 3, 4), label="dilated"),
    case("Conv2D", _conv2d(1, "VALID", (1, 2, 3, 1)), f32(1, 8, 9, 2), f32(2, 2, 2, 3),
         label="dilated-hw"),
    case("Conv2D", _conv2d(2, _EXPLICIT), f32(2, 6, 6, 3), f32(3, 3, 3, 4), label="explicit"),
    case("Conv2D", _xla(_conv2d(1, "SAME", data_format="NCHW")), f32(2, 3, 5, 5),
         f32(3, 3, 3, 4), label="nchw-xla"),
    case("Conv2D", _conv2d(1, "SAME"), f32(2, 5, 5, 4), f32(3, 3, 2, 6), label="groups2"),
    case("Conv2D", _xla(_conv2d(2, "VALID")), f32(2, 7, 7, 8), f32(3, 3, 2, 8),
         label="groups4-xla"),
    case("Conv2D", lambda x, w: tf.nn.conv1d(x, w, 2, "SAME", dilations=1), f32(2, 9, 3),
         f32(3, 3, 4), label="conv1d"),
    case("Conv2D", _conv2d(1, "SAME"), f32(2, 16, 16, 16), f32(3, 3, 16, 16),
         tolerance=T.FLOAT32_CONV_144, label="large"),
    # 1x1 with unit strides and no padding: the input is its own columns (conv._pointwise).
    case("Conv2D", _conv2d(1, "SAME"), f32(2, 5, 5, 8), f32(1, 1, 8, 6), label="pointwise"),
    case("Conv2D", _conv2d(1, "VALID"), f32(2, 5, 5, 3), f32(1, 1, 3, 4),
         label="pointwise-few-channels"),
    case("Conv2D", _conv2d(2, "VALID"), f32(2, 6, 6, 8), f32(1, 1, 8, 4), label="1x1-s2"),
    case("Conv2D", _xla(_conv2d(1, "VALID")), f32(2, 4, 4, 8), f32(1, 1, 4, 6),
         label="pointwise-groups2-xla"),
]

CONV2D_GRADS = [
    case("Conv2DBackpropInput", grad(_conv2d(), 0, 1), f32(2, 6, 6, 3), f32(3, 3, 3, 4)),
    case("Conv2DBackpropInput", grad(_conv2d(2, "SAME"), 0, 1), f32(2, 7, 6, 3),
         f32(3, 3, 3, 2), label="same-s2"),
    case("Conv2DBackpropInput", grad(_conv2d(2, "VALID"), 0, 1), f32(1, 8, 8, 2),
         f32(3, 3, 2, 3), label="valid-s2-leftover"),
    case("Conv2DBackpropInput", _xla(grad(_conv2d(1, "SAME", 2), 0, 1)), f32(2, 7, 7, 2),
         f32(3, 3, 2, 3), label="dilated-xla"),
    case("Conv2DBackpropInput", grad(_conv2d(1, _EXPLICIT), 0, 1), f32(1, 5, 5, 2),
         f32(2, 3, 2, 3), label="explicit"),
    case("Conv2DBackpropInput", _xla(grad(_conv2d(1, "SAME", data_format="NCHW"), 0, 1)),
         f32(2, 2, 5, 5), f32(3, 3, 2, 3), label="nchw-xla"),
    case("Conv2DBackpropInput", _xla(grad(_conv2d(1, "SAME"), 0, 1)), f32(2, 5, 5, 6),
         f32(3, 3, 2, 6), label="groups3-xla"),
    case("Conv2DBackpropInput", _transpose([2, 10, 10, 4], 2, "SAME"), f32(3, 3, 4, 3),
         f32(2, 5, 5, 3), label="conv2d-transpose"),
    case("Conv2DBackpropInput", _transpose([2, 11, 9, 4], 2, "VALID"), f32(3, 3, 4, 3),
         f32(2, 5, 4, 3), label="conv2d-transpose-valid"),
    case("Conv2DBackpropInput", grad(lambda x, w: tf.nn.conv1d(x, w, 1, "VALID"), 0, 1),
         f32(2, 9, 3), f32(3, 3, 4), label="conv1d"),
    case("Conv2DBackpropInput", grad(_conv2d(1, "SAME"), 0, 1), f32(2, 5, 5, 8),
         f32(1, 1, 8, 6), label="pointwise"),
    # Stride 1, output of the input's size ("SAME"): odd and even kernels (even: padding
    # (0, 1)) and explicit asymmetric padding.
    case("Conv2DBackpropInput", grad(_conv2d(1, "SAME"), 0, 1), f32(2, 6, 6, 3),
         f32(3, 3, 3, 4), label="same-s1"),
    case("Conv2DBackpropInput", grad(_conv2d(1, "SAME"), 0, 1), f32(2, 5, 6, 3),
         f32(2, 4, 3, 4), label="same-s1-even"),
    case("Conv2DBackpropInput", grad(_conv2d(1, _EXPLICIT_SAME), 0, 1), f32(2, 5, 5, 8),
         f32(3, 3, 8, 8), label="explicit-same-s1"),
    case("Conv2DBackpropInput", grad(_conv2d(2, "VALID"), 0, 1), f32(2, 6, 6, 8),
         f32(1, 1, 8, 4), label="1x1-s2"),
    case("Conv2DBackpropInput", _xla(grad(_conv2d(1, "VALID"), 0, 1)), f32(2, 4, 4, 8),
         f32(1, 1, 4, 6), label="pointwise-groups2-xla"),
    case("Conv2DBackpropFilter", grad(_conv2d(), 0, 1), f32(2, 6, 6, 3), f32(3, 3, 3, 4)),
    case("Conv2DBackpropFilter", grad(_conv2d(1, "SAME"), 0, 1), f32(2, 5, 5, 8),
         f32(1, 1, 8, 6), label="pointwise"),
    case("Conv2DBackpropFilter", grad(_conv2d(1, "VALID"), 0, 1), f32(2, 5, 5, 3),
         f32(1, 1, 3, 4), label="pointwise-few-channels"),
    case("Conv2DBackpropFilter", grad(_conv2d(2, "SAME"), 0, 1), f32(2, 7, 6, 3),
         f32(3, 3, 3, 2), label="same-s2"),
    case("Conv2DBackpropFilter", _xla(grad(_conv2d(1, "VALID", (1, 2, 1, 1)), 0, 1)),
         f32(1, 8, 6, 2), f32(3, 2, 2, 3), label="dilated-xla"),
    case("Conv2DBackpropFilter", grad(_conv2d(1, _EXPLICIT), 0, 1), f32(1, 5, 5, 2),
         f32(2, 3, 2, 3), label="explicit"),
    case("Conv2DBackpropFilter", _xla(grad(_conv2d(2, "SAME"), 0, 1)), f32(2, 6, 6, 4),
         f32(3, 3, 1, 8), label="groups4-xla"),
    case("Conv2DBackpropFilter", grad(_conv2d(1, "SAME"), 0, 1), f32(4, 12, 12, 8),
         f32(3, 3, 8, 8), tolerance=T.FLOAT32_CONV_FILTER_576, label="large"),
]

CONV3D = [
    case("Conv3D", _conv3d(), f32(2, 5, 5, 5, 2), f32(3, 3, 3, 2, 3)),
    case("Conv3D", _xla(_conv3d((1, 2, 1, 2, 1), "SAME", (1, 1, 2, 1, 1))), f32(1, 6, 5, 4, 2),
         f32(2, 3, 2, 2, 3), label="same-strided-dilated-xla"),
    case("Conv3DBackpropInputV2", grad(_conv3d(), 0, 1), f32(2, 5, 5, 5, 2),
         f32(3, 3, 3, 2, 3)),
    case("Conv3DBackpropInputV2", grad(_conv3d((1, 2, 2, 2, 1), "SAME"), 0, 1),
         f32(1, 5, 4, 5, 2), f32(3, 2, 3, 2, 3), label="same-s2"),
    case("Conv3DBackpropInputV2", grad(_conv3d(padding="SAME"), 0, 1), f32(1, 4, 5, 4, 2),
         f32(3, 3, 3, 2, 3), label="same-s1"),
    case("Conv3DBackpropFilterV2", grad(_conv3d(), 0, 1), f32(2, 5, 5, 5, 2),
         f32(3, 3, 3, 2, 3)),
    case("Conv3DBackpropFilterV2", grad(_conv3d((1, 2, 2, 2, 1), "SAME"), 0, 1),
         f32(1, 5, 4, 5, 2), f32(3, 2, 3, 2, 3), label="same-s2"),
]

DEPTHWISE = [
    case("DepthwiseConv2dNative", _depthwise(), f32(2, 6, 6, 3), f32(3, 3, 3, 2)),
    case("DepthwiseConv2dNative", _depthwise((1, 2, 2, 1), "SAME"), f32(2, 7, 7, 3),
         f32(3, 3, 3, 1), label="same-s2"),
    case("DepthwiseConv2dNative", _xla(_depthwise(padding="SAME", dilations=(1, 2, 2, 1))),
         f32(1, 7, 7, 2), f32(3, 3, 2, 2), label="dilated-xla"),
    case("DepthwiseConv2dNative", _xla(lambda x, w: tf.nn.depthwise_conv2d(x, w, (1, 1, 1, 1),
         "SAME", data_format="NCHW")), f32(1, 3, 5, 5), f32(3, 3, 3, 2), label="nchw-xla"),
    case("DepthwiseConv2dNativeBackpropInput", grad(_depthwise(), 0, 1), f32(2, 6, 6, 3),
         f32(3, 3, 3, 2)),
    case("DepthwiseConv2dNativeBackpropInput", grad(_depthwise((1, 2, 2, 1), "SAME"), 0, 1),
         f32(2, 7, 7, 3), f32(3, 3, 3, 2), label="same-s2"),
    case("DepthwiseConv2dNativeBackpropFilter", grad(_depthwise(), 0, 1), f32(2, 6, 6, 3),
         f32(3, 3, 3, 2)),
    case("DepthwiseConv2dNativeBackpropInput", grad(_depthwise(), 0, 1), f32(2, 5, 5, 3),
         f32(1, 1, 3, 2), label="pointwise"),
    # TensorFlow's CPU kernels of the depthwise backprops ignore dilations (their results
    # differ from TensorFlow's own XLA and from finite differences): XLA is the oracle.
    case("DepthwiseConv2dNativeBackpropInput", _xla(grad(_depthwise(
         padding="SAME", dilations=(1, 2, 2, 1)), 0, 1)), f32(1, 7, 7, 2), f32(3, 3, 2, 2),
         label="dilated-xla"),
    case("DepthwiseConv2dNativeBackpropFilter", _xla(grad(_depthwise(
         padding="SAME", dilations=(1, 2, 2, 1)), 0, 1)), f32(1, 7, 7, 2), f32(3, 3, 2, 2),
         label="dilated-xla"),
]

CASES = CONV2D + CONV2D_GRADS + CONV3D + DEPTHWISE


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_matches_tensorflow(c):
    check_case(c)


def test_every_tf_type_has_a_case():
    assert set(conv.TF_TYPES) <= {c.tf_op for c in CASES}


def test_every_tf_type_is_supported():
    assert set(conv.TF_TYPES) <= set(ipu_keras.supported_ops())


# -- a Keras CNN trained through IPUStrategy ----------------------------------------------


def _cnn():
    L = keras.layers
    return keras.Sequential([
        keras.Input((8, 8, 3)), L.Conv2D(8, 3, padding="same"), L.BatchNormalization(),
        L.ReLU(), L.MaxPooling2D(), L.GlobalAveragePooling2D(), L.Dense(10),
    ])


def _train(run, steps=3):
    """Losses and final weights of `steps` SGD steps of a seeded CNN; `run(fn, args)`."""
    keras.utils.set_random_seed(3)
    model = _cnn()
    optimizer = keras.optimizers.SGD(0.1)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer.build(model.trainable_variables)

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    rng = np.random.default_rng(5)
    losses = []
    for _ in range(steps):
        x = rng.normal(size=(4, 8, 8, 3)).astype(np.float32)
        y = rng.integers(0, 10, 4).astype(np.int32)
        losses.append(float(np.asarray(run(step, [x, y]))))
    return np.array(losses), model.get_weights()


def test_keras_cnn_trains_like_tensorflow():
    expected_losses, expected_weights = _train(lambda fn, args: tf.function(fn)(*args))
    strategy = ipu_keras.ipu_strategy.IPUStrategy()
    with strategy.scope():
        losses, weights = _train(strategy.run)
    T.FLOAT32.assert_close(losses, expected_losses)
    for got, want in zip(weights, expected_weights):
        T.FLOAT32.assert_close(got, want)
