"""The 'reduce' op family (reductions, arg-max/arg-min) against TensorFlow."""
import numpy as np
import pytest
import tensorflow as tf

from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.ops import reduce
from tests.ops.harness import boolean, case, check_case, f32, grad, i32, positive

raw = tf.raw_ops


def _reductions(tf_op, fn, x, **tolerance):
    """One case per axis pattern: all axes, one, negative, several, keep_dims."""
    return [
        case(tf_op, lambda t: fn(t), x, label="all", **tolerance),
        case(tf_op, lambda t: fn(t, axis=1), x, label="axis1", **tolerance),
        case(tf_op, lambda t: fn(t, axis=-1), x, label="axis-1", **tolerance),
        case(tf_op, lambda t: fn(t, axis=[0, 2]), x, label="axes0,2", **tolerance),
        case(tf_op, lambda t: fn(t, axis=[-1, 0], keepdims=True), x, label="keepdims",
             **tolerance),
        case(tf_op, lambda t: fn(t, axis=[]), x, label="no-axis", **tolerance),
    ]


def _raw(tf_type):
    """The raw op with the tf.reduce_* calling convention (no Python-side rewriting)."""
    op = getattr(raw, tf_type)

    def fn(t, axis=None, keepdims=False):
        axis = list(range(len(t.shape))) if axis is None else axis
        return op(input=t, axis=axis, keep_dims=keepdims)

    return fn


CASES = (
    _reductions("Sum", tf.reduce_sum, f32(3, 4, 5))
    + _reductions("Mean", tf.reduce_mean, f32(3, 4, 5))
    + _reductions("Max", tf.reduce_max, f32(3, 4, 5))
    + _reductions("Min", tf.reduce_min, f32(3, 4, 5))
    + _reductions("Prod", tf.reduce_prod, positive(3, 4, 5),
                    tolerance=T.FLOAT32_PROD_60)
    + _reductions("All", tf.reduce_all, boolean(3, 4, 5))
    + _reductions("Any", tf.reduce_any, boolean(3, 4, 5))
    + _reductions("EuclideanNorm", _raw("EuclideanNorm"), f32(3, 4, 5))
    + [
        case("Sum", lambda t: tf.reduce_sum(t, axis=0), i32(6, 3), label="int32"),
        case("Sum", lambda t: tf.reduce_sum(t, axis=0), i32(40, 3, low=100, high=127)
             .astype(np.int8), label="int8-wraps"),
        case("Sum", lambda t: tf.reduce_sum(t, axis=[]), f32(2, 3), label="no-axes"),
        case("Sum", lambda t: tf.reduce_sum(t, axis=1), f32(8, 1000),
             tolerance=T.FLOAT32_SUM_1000, label="long"),
        case("Sum", lambda t: raw.Sum(input=t, axis=np.int64(1)), f32(2, 3), label="int64-axis"),
        case("Mean", lambda t: tf.reduce_mean(t, axis=1), i32(4, 3), label="int32-truncates"),
        case("Mean", lambda t: tf.reduce_mean(t), np.full((2, 2), 2**30, np.int32),
             label="int32-wide-sum"),
        case("Mean", grad(tf.reduce_mean, 0), f32(3, 4), label="grad"),
        case("Max", lambda t: tf.reduce_max(t, axis=1), i32(4, 3), label="int32"),
        case("Max", lambda t: tf.reduce_max(t, axis=0), np.array([[1, np.nan], [np.nan, 2]],
             np.float32), label="nan"),
        case("Min", lambda t: tf.reduce_min(t, axis=0), np.zeros((0, 3), np.float32),
             label="empty"),
        case("Prod", lambda t: tf.reduce_prod(t, axis=0), i32(3, 4), label="int32"),
        case("EuclideanNorm", lambda t: raw.EuclideanNorm(input=t, axis=[1]), i32(3, 4),
             label="int32-truncates"),
        case("ArgMax", lambda t: tf.argmax(t, axis=1), f32(4, 6)),
        case("ArgMax", lambda t: tf.argmax(t, axis=-1, output_type=tf.int32), f32(2, 3, 4),
             label="int32-out"),
        case("ArgMax", lambda t: tf.argmax(t, axis=0), i32(5, 3, low=0, high=2), label="ties"),
        case("ArgMax", lambda t: tf.argmax(t, axis=1), np.array([[np.nan, 1, 3], [2, np.nan, 1]],
             np.float32), label="nan"),
        case("ArgMin", lambda t: tf.argmin(t, axis=0), f32(4, 6)),
        case("ArgMin", lambda t: tf.argmin(t, axis=1, output_type=tf.int32),
             i32(5, 3, low=0, high=2), label="ties-int32"),
        case("TopKV2", lambda t: tuple(tf.math.top_k(t, 3)), f32(4, 6)),
        case("TopKV2", lambda t: tuple(tf.math.top_k(t, 4)), i32(2, 3, 7, low=0, high=3),
             label="ties-int32"),
        case("TopKV2", lambda t: tf.sort(t, direction="DESCENDING"), f32(3, 5), label="sort"),
        case("TopKV2", grad(lambda t: tf.math.top_k(t, 2).values, 0), f32(3, 5), label="grad"),
    ]
)


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_matches_tensorflow(c):
    check_case(c)


def test_every_tf_type_has_a_case():
    assert set(reduce.TF_TYPES) <= {c.tf_op for c in CASES}
