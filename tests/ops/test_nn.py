"""The 'nn' op family (matmul, bias, activations, softmax, losses) against TensorFlow."""
import numpy as np
import pytest
import tensorflow as tf

from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.ops import nn
from tests.ops.harness import case, check_case, f32, grad, i32, positive

raw = tf.raw_ops


def _labels(*shape, classes, dtype=np.int32):
    return np.random.default_rng(7).integers(0, classes, shape).astype(dtype)


def _distribution(*shape):
    p = positive(*shape)
    return p / p.sum(axis=-1, keepdims=True)


def _xent(logits, labels):
    return raw.SoftmaxCrossEntropyWithLogits(features=logits, labels=labels)


def _sparse_xent(logits, labels):
    return raw.SparseSoftmaxCrossEntropyWithLogits(features=logits, labels=labels)


def _v3(tout=None, **adjoint):
    return lambda x, y: raw.BatchMatMulV3(x=x, y=y, Tout=tout or x.dtype, **adjoint)


MATMUL = [
    case("MatMul", lambda a, b: tf.matmul(a, b), f32(4, 3), f32(3, 5)),
    case("MatMul", lambda a, b: tf.matmul(a, b, transpose_a=True), f32(3, 4), f32(3, 5),
         label="ta"),
    case("MatMul", lambda a, b: tf.matmul(a, b, transpose_b=True), f32(4, 3), f32(5, 3),
         label="tb"),
    case("MatMul", lambda a, b: tf.matmul(a, b, transpose_a=True, transpose_b=True),
         f32(3, 4), f32(5, 3), label="ta-tb"),
    case("MatMul", lambda a, b: tf.matmul(a, b), i32(4, 3), i32(3, 2), label="int32"),
    case("MatMul", lambda a, b: tf.matmul(a, b), f32(64, 96), f32(96, 32),
         tolerance=T.FLOAT32_MATMUL_96, label="large"),
    case("BatchMatMul", lambda a, b: raw.BatchMatMul(x=a, y=b, adj_x=True), f32(2, 3, 4),
         f32(2, 3, 5)),
    case("BatchMatMulV2", lambda a, b: tf.matmul(a, b), f32(2, 4, 3), f32(2, 3, 5)),
    case("BatchMatMulV2", lambda a, b: tf.matmul(a, b), f32(2, 1, 4, 3), f32(3, 3, 5),
         label="broadcast"),
    case("BatchMatMulV2", lambda a, b: tf.matmul(a, b), f32(2, 4, 3), f32(3, 5),
         label="rank2-rhs"),
    case("BatchMatMulV2", lambda a, b: tf.matmul(a, b, adjoint_a=True, adjoint_b=True),
         f32(2, 3, 4), f32(2, 5, 3), label="adj"),
    case("BatchMatMulV3", _v3(), f32(2, 4, 3), f32(2, 3, 5)),
    case("BatchMatMulV3", _v3(adj_y=True), f32(1, 4, 3), f32(2, 5, 3),
         label="adj_y"),
    case("BatchMatMulV3", _v3(tf.int32), i32(2, 4, 3).astype(np.int8),
         i32(2, 3, 5).astype(np.int8), label="int8-to-int32"),
    # Found by tests/fuzz: empty products and zero-length contractions (a fill of zeros)
    # crashed the matmul planner.
    case("MatMul", lambda a, b: tf.matmul(a, b), f32(0, 2), f32(2, 4), label="empty-m"),
    case("MatMul", lambda a, b: tf.matmul(a, b), f32(3, 0), f32(0, 4), label="empty-k"),
    case("BatchMatMulV2", lambda a, b: tf.matmul(a, b), f32(0, 4, 3), f32(3, 5),
         label="empty-batch"),
]

BIAS = [
    case("BiasAdd", lambda x, b: tf.nn.bias_add(x, b), f32(4, 3), f32(3)),
    case("BiasAdd", lambda x, b: tf.nn.bias_add(x, b), f32(2, 3, 3, 4), f32(4), label="4d"),
    case("BiasAdd", lambda x, b: tf.nn.bias_add(x, b), i32(2, 5), i32(5), label="int32"),
    case("BiasAdd", lambda x, b: tf.nn.bias_add(x, b, data_format="NCHW"), f32(2, 3, 2, 2),
         f32(3), label="nchw"),
    case("BiasAddV1", lambda x, b: raw.BiasAddV1(value=x, bias=b), f32(2, 3, 4), f32(4)),
    case("BiasAddGrad", grad(tf.nn.bias_add, 0, 1), f32(2, 3, 3, 4), f32(4)),
    case("BiasAddGrad", lambda g: raw.BiasAddGrad(out_backprop=g, data_format="NCHW"),
         f32(2, 3, 4, 5), label="nchw"),
]

ACTIVATIONS = [
    case("Relu", tf.nn.relu, f32(3, 4)),
    case("Relu", tf.nn.relu, i32(3, 4), label="int32"),
    case("ReluGrad", grad(tf.nn.relu, 0), f32(3, 4)),
    case("Relu6", tf.nn.relu6, f32(3, 4, low=-3.0, high=9.0)),
    case("Relu6Grad", grad(tf.nn.relu6, 0), f32(3, 4, low=-3.0, high=9.0)),
    case("Elu", tf.nn.elu, f32(3, 4)),
    case("EluGrad", grad(tf.nn.elu, 0), f32(3, 4)),
    case("Selu", tf.nn.selu, f32(3, 4)),
    case("SeluGrad", grad(tf.nn.selu, 0), f32(3, 4)),
    case("LeakyRelu", tf.nn.leaky_relu, f32(3, 4)),
    case("LeakyRelu", lambda x: tf.nn.leaky_relu(x, alpha=0.01), f32(3, 4), label="alpha"),
    case("LeakyReluGrad", grad(lambda x: tf.nn.leaky_relu(x, alpha=0.3), 0), f32(3, 4)),
    case("Softplus", tf.nn.softplus, f32(3, 4, low=-20.0, high=20.0)),
    case("SoftplusGrad", lambda g, x: raw.SoftplusGrad(gradients=g, features=x), f32(3, 4),
         f32(3, 4, low=-20.0, high=20.0)),
    case("Softsign", tf.nn.softsign, f32(3, 4)),
    case("SoftsignGrad", grad(tf.nn.softsign, 0), f32(3, 4)),
]

SOFTMAX = [
    case("Softmax", tf.nn.softmax, f32(4, 10)),
    case("Softmax", tf.nn.softmax, f32(2, 3, 7, low=-30.0, high=30.0), label="3d-wide"),
    case("LogSoftmax", tf.nn.log_softmax, f32(4, 10)),
    case("LogSoftmax", tf.nn.log_softmax, f32(2, 3, 7, low=-30.0, high=30.0), label="3d-wide"),
    case("SparseSoftmaxCrossEntropyWithLogits", _sparse_xent, f32(6, 5), _labels(6, classes=5)),
    case("SparseSoftmaxCrossEntropyWithLogits", _sparse_xent, f32(6, 5, low=-30.0, high=30.0),
         _labels(6, classes=5, dtype=np.int64), label="int64"),
    case("SparseSoftmaxCrossEntropyWithLogits",
         lambda x, y: tf.nn.sparse_softmax_cross_entropy_with_logits(y, x), f32(2, 3, 4),
         _labels(2, 3, classes=4), label="keras-3d"),
    case("SoftmaxCrossEntropyWithLogits", _xent, f32(6, 5), _distribution(6, 5)),
    case("SoftmaxCrossEntropyWithLogits", _xent, f32(6, 5), _distribution(1, 5),
         label="broadcast"),
    case("L2Loss", tf.nn.l2_loss, f32(5, 7)),
    case("L2Loss", grad(tf.nn.l2_loss, 0), f32(5, 7), label="grad"),
]

TOP_K = [
    case("InTopKV2", lambda p, t: tf.math.in_top_k(t, p, 2),
         np.array([[0.1, 0.5, 0.4], [0.3, 0.3, 0.3], [0.9, 0.05, 0.05], [np.nan, 1, 0]],
                  np.float32), np.array([2, 1, 1, 1], np.int32)),
    case("InTopKV2", lambda p, t: tf.math.in_top_k(t, p, 1), f32(5, 4),
         np.array([0, 1, 2, 3, 4], np.int32), label="out-of-range"),
]

CASES = MATMUL + BIAS + ACTIVATIONS + SOFTMAX + TOP_K


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_matches_tensorflow(c):
    check_case(c)


def test_every_tf_type_has_a_case():
    assert set(nn.TF_TYPES) <= {c.tf_op for c in CASES}
