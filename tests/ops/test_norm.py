"""The 'norm' op family (fused batch normalisation and its gradient) against TensorFlow."""
import pytest
import tensorflow as tf

from ipu_keras._src.conformance.tolerances import FLOAT32_BATCH_NORM_GRAD_24 as GRAD_SUM
from ipu_keras._src.ops import norm
from tests.ops.harness import case, check_case, f32, grad, positive

raw = tf.raw_ops
_OPS = {"V1": raw.FusedBatchNorm, "V2": raw.FusedBatchNormV2, "V3": raw.FusedBatchNormV3}


def _train(version="V3", data_format="NHWC", epsilon=1e-3, **attrs):
    """Training-mode batch norm of x with scale and offset, every output."""

    def fn(x, scale, offset):
        empty = tf.zeros((0,), tf.float32)
        return _OPS[version](x=x, scale=scale, offset=offset, mean=empty, variance=empty,
                             epsilon=epsilon, data_format=data_format, is_training=True,
                             **attrs)

    return fn


def _running(factor):
    """Training mode blending the batch statistics into running ones by `factor`."""

    def fn(x, scale, offset, mean, variance):
        return raw.FusedBatchNormV3(x=x, scale=scale, offset=offset, mean=mean,
                                    variance=variance, epsilon=1e-3, is_training=True,
                                    exponential_avg_factor=factor)

    return fn


def _infer(version="V3", data_format="NHWC"):
    def fn(x, scale, offset, mean, variance):
        return _OPS[version](x=x, scale=scale, offset=offset, mean=mean, variance=variance,
                             epsilon=1e-3, data_format=data_format, is_training=False)

    return fn


def _y(fn):
    """Only the normalised output (what a gradient case differentiates)."""
    return lambda *xs: fn(*xs)[0]


def _documented(fn):
    """y, batch_mean and batch_variance: the outputs TensorFlow defines. The reserve spaces
    are each kernel's own business (oneDNN's, Eigen's 4-d and 5-d kernels differ in their
    shapes and contents, uninitialised in inference on some), and only the matching gradient
    op reads them, which the gradient cases below check end to end."""
    return lambda *xs: fn(*xs)[:3]


def _stats(c):
    return f32(c), positive(c)


X, NCHW, X5 = f32(2, 4, 3, 5), f32(2, 5, 4, 3), f32(2, 3, 2, 3, 4)
AFFINE = (positive(5), f32(5))

FORWARD = [
    case("FusedBatchNormV3", _documented(_train()), X, *AFFINE),
    case("FusedBatchNormV3", _documented(_train(epsilon=0.1)), f32(1, 1, 1, 5), *AFFINE,
         label="one-row"),
    case("FusedBatchNormV3", _documented(_train(data_format="NCHW")), NCHW, *AFFINE,
         label="nchw"),
    case("FusedBatchNormV3", _documented(_train(data_format="NDHWC")), X5, positive(4),
         f32(4), label="ndhwc"),
    case("FusedBatchNormV3", _documented(_running(0.3)), X, *AFFINE, *_stats(5),
         label="running"),
    case("FusedBatchNormV3", _documented(_infer()), X, *AFFINE, *_stats(5), label="inference"),
    case("FusedBatchNormV3", _documented(_infer(data_format="NCHW")), NCHW, *AFFINE,
         *_stats(5), label="inference-nchw"),
    case("FusedBatchNorm", _documented(_train("V1")), X, *AFFINE),
    case("FusedBatchNormV2", _documented(_train("V2")), X, *AFFINE),
]

# The gradients sum over a channel's N * H * W = 24 elements: more than the 16 terms the
# plain float32 row covers (see the row's reason).
GRADS = [
    case("FusedBatchNormGradV3", grad(_y(_train()), 0, 1, 2), X, *AFFINE, tolerance=GRAD_SUM),
    case("FusedBatchNormGradV3", grad(_y(_train(data_format="NCHW")), 0, 1, 2), NCHW,
         *AFFINE, tolerance=GRAD_SUM, label="nchw"),
    case("FusedBatchNormGradV3", grad(_y(_infer()), 0, 1, 2), X, *AFFINE, *_stats(5),
         tolerance=GRAD_SUM, label="inference"),
    case("FusedBatchNormGrad", grad(_y(_train("V1")), 0, 1, 2), X, *AFFINE,
         tolerance=GRAD_SUM),
    case("FusedBatchNormGradV2", grad(_y(_train("V2")), 0, 1, 2), X, *AFFINE,
         tolerance=GRAD_SUM),
]

CASES = FORWARD + GRADS


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_matches_tensorflow(c):
    check_case(c)


def test_every_tf_type_has_a_case():
    assert set(norm.TF_TYPES) <= {c.tf_op for c in CASES}


def test_raw_gradient_outputs_match():
    """FusedBatchNormGradV3 called directly, from the saved statistics of the forward op."""
    *_, saved_mean, saved_var, reserve = _train()(tf.constant(X), *AFFINE)

    def fn(dy, x, scale):
        return raw.FusedBatchNormGradV3(y_backprop=dy, x=x, scale=scale,
                                        reserve_space_1=saved_mean, reserve_space_2=saved_var,
                                        reserve_space_3=reserve, epsilon=1e-3)[:3]

    check_case(case("FusedBatchNormGradV3", fn, f32(*X.shape), X, AFFINE[0]))
