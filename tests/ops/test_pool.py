"""The 'pool' op family (max and average pooling and their gradients) against TensorFlow."""
import numpy as np
import pytest
import tensorflow as tf

from ipu_keras._src.ops import pool
from tests.ops.harness import case, check_case, f32, grad, i32

raw = tf.raw_ops


def ties(*shape):
    """Few distinct values, so that windows hold several equal maxima."""
    return np.random.default_rng(11).integers(0, 3, shape).astype(np.float32)


def _max(ksize, strides, padding="VALID", data_format="NHWC"):
    return lambda x: tf.nn.max_pool2d(x, ksize, strides, padding, data_format)


def _avg(ksize, strides, padding="VALID", data_format="NHWC"):
    return lambda x: tf.nn.avg_pool2d(x, ksize, strides, padding, data_format)


def _xla(fn):
    """XLA as the oracle for NCHW pooling: TensorFlow's eager CPU kernels have it only where
    oneDNN provides them (AVX-512 machines); XLA's CPU pooling has every layout anywhere."""
    return tf.function(fn, jit_compile=True)


_EXPLICIT = [0, 0, 1, 0, 2, 1, 0, 0]


def _max_explicit(x):
    return raw.MaxPool(input=x, ksize=[1, 3, 3, 1], strides=[1, 2, 1, 1], padding="EXPLICIT",
                       explicit_paddings=_EXPLICIT)


def _max_v2(x):
    return raw.MaxPoolV2(input=x, ksize=[1, 3, 2, 1], strides=[1, 2, 2, 1], padding="SAME")


def _max_grad_v2(x, dy):
    y = _max_v2(x)
    return raw.MaxPoolGradV2(orig_input=x, orig_output=y, grad=dy, ksize=[1, 3, 2, 1],
                             strides=[1, 2, 2, 1], padding="SAME")


def _pool3d(kind, ksize, strides, padding="VALID"):
    fn = tf.nn.max_pool3d if kind == "max" else tf.nn.avg_pool3d
    return lambda x: fn(x, ksize, strides, padding)


MAX_POOL = [
    case("MaxPool", _max(2, 2), f32(2, 6, 6, 3), label="valid"),
    case("MaxPool", _max(3, 2, "SAME"), f32(2, 7, 6, 3), label="same"),
    case("MaxPool", _max((2, 3), (1, 2), "SAME"), f32(1, 5, 7, 2), label="rect"),
    case("MaxPool", _max_explicit, f32(1, 6, 5, 2), label="explicit"),
    case("MaxPool", _xla(_max(2, 2, "SAME", "NCHW")), f32(2, 3, 5, 5), label="nchw-xla"),
    case("MaxPool", _max(2, 2), i32(1, 4, 4, 2), label="int32"),
    case("MaxPool", lambda x: tf.nn.max_pool1d(x, 3, 2, "SAME"), f32(2, 9, 3), label="1d"),
    case("MaxPoolV2", _max_v2, f32(2, 7, 6, 3)),
    case("MaxPoolGrad", grad(_max(2, 2), 0), f32(2, 6, 6, 3), label="valid"),
    case("MaxPoolGrad", grad(_max(3, 2, "SAME"), 0), f32(2, 7, 6, 3), label="same"),
    case("MaxPoolGrad", grad(_max(3, 1, "SAME"), 0), ties(2, 5, 5, 2), label="ties"),
    case("MaxPoolGrad", grad(_max(2, 2, "SAME"), 0), ties(1, 5, 5, 2), label="ties-s2"),
    case("MaxPoolGrad", grad(_max_explicit, 0), ties(1, 6, 5, 2), label="explicit"),
    case("MaxPoolGrad", _xla(grad(_max(3, 2, "SAME", "NCHW"), 0)), f32(1, 2, 7, 7),
         label="nchw-xla"),
    case("MaxPoolGradV2", _max_grad_v2, ties(2, 7, 6, 3), f32(2, 4, 3, 3)),
    case("MaxPool3D", _pool3d("max", 2, 2), f32(2, 4, 4, 4, 2)),
    case("MaxPool3D", _pool3d("max", (2, 3, 2), (1, 2, 2), "SAME"), f32(1, 4, 5, 4, 2),
         label="same"),
    case("MaxPool3DGrad", grad(_pool3d("max", 2, 2), 0), f32(2, 4, 4, 4, 2)),
    # MaxPool3DGrad gives every tied maximum the gradient (MaxPoolGrad only the first).
    case("MaxPool3DGrad", grad(_pool3d("max", 3, (1, 2, 2), "SAME"), 0), ties(1, 4, 5, 4, 2),
         label="same-ties"),
]

AVG_POOL = [
    case("AvgPool", _avg(2, 2), f32(2, 6, 6, 3), label="valid"),
    case("AvgPool", _avg(3, 2, "SAME"), f32(2, 7, 6, 3), label="same"),
    case("AvgPool", _avg((3, 2), (1, 3), "SAME"), f32(1, 5, 7, 2), label="rect"),
    case("AvgPool", _xla(_avg(2, 2, "SAME", "NCHW")), f32(2, 3, 5, 5), label="nchw-xla"),
    case("AvgPool", lambda x: tf.nn.avg_pool1d(x, 3, 2, "SAME"), f32(2, 9, 3), label="1d"),
    case("AvgPoolGrad", grad(_avg(2, 2), 0), f32(2, 6, 6, 3), label="valid"),
    case("AvgPoolGrad", grad(_avg(3, 2, "SAME"), 0), f32(2, 7, 6, 3), label="same"),
    case("AvgPoolGrad", grad(_avg(3, 2), 0), f32(1, 8, 7, 2), label="valid-leftover"),
    case("AvgPoolGrad", _xla(grad(_avg(3, 1, "SAME", "NCHW"), 0)), f32(1, 2, 5, 5),
         label="nchw-xla"),
    case("AvgPool3D", _pool3d("avg", 2, 2), f32(2, 4, 4, 4, 2)),
    case("AvgPool3D", _pool3d("avg", 3, (1, 2, 2), "SAME"), f32(1, 4, 5, 4, 2), label="same"),
    case("AvgPool3DGrad", grad(_pool3d("avg", 2, 2), 0), f32(2, 4, 4, 4, 2)),
    case("AvgPool3DGrad", grad(_pool3d("avg", 3, (1, 2, 2), "SAME"), 0), f32(1, 4, 5, 4, 2),
         label="same"),
]

CASES = MAX_POOL + AVG_POOL


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_matches_tensorflow(c):
    check_case(c)


def test_every_tf_type_has_a_case():
    assert set(pool.TF_TYPES) <= {c.tf_op for c in CASES}


def _max_pool_grad_equations(fn, *specs):
    from ipu_keras._src.tracer.trace import trace

    traced = trace(tf.function(fn), [np.zeros(s.shape, s.dtype.as_numpy_dtype) for s in specs])
    return [e for e in traced.graph.walk() if e.op == "max_pool_grad"]


def test_the_gradient_of_a_max_pool_is_told_that_its_output_holds_the_maxima():
    x = tf.TensorSpec((2, 6, 6, 3), tf.float32)

    def of_max_pool(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.nn.max_pool2d(x, 2, 2, "VALID")
        return tape.gradient(y, x)

    def of_another_output(x):   # the raw op given a y that is not the pooling's
        y = tf.nn.max_pool2d(x, 2, 2, "VALID") + 1.0
        return raw.MaxPoolGrad(orig_input=x, orig_output=y, grad=y, ksize=[1, 2, 2, 1],
                               strides=[1, 2, 2, 1], padding="VALID")

    (told,) = _max_pool_grad_equations(of_max_pool, x)
    (not_told,) = _max_pool_grad_equations(of_another_output, x)
    assert told.params["y_is_max"] is True
    assert not_told.params["y_is_max"] is False


@pytest.mark.parametrize("ksize, strides, padding", [
    ((2, 2), (2, 2), ((0, 0), (0, 0))),       # tiled windows: y read, not recomputed
    ((2, 2), (2, 2), ((0, 1), (0, 1))),       # tiled, padded
    ((3, 3), (2, 2), ((1, 1), (1, 1))),       # overlapping: the general path
])
def test_a_max_pool_gradient_from_its_output_equals_one_from_the_input(ksize, strides, padding):
    x = ties(3, 7, 7, 4)
    x[0, 0, 0, 0] = np.nan                     # a NaN window takes the general path
    y = pool._max_pool(x, ksize=ksize, strides=strides, padding=padding)
    dy = np.random.default_rng(0).standard_normal(y.shape).astype(np.float32)
    args = dict(ksize=ksize, strides=strides, padding=padding, ties="first")
    recomputed = pool._max_pool_grad(x, y, dy, y_is_max=False, **args)
    given = pool._max_pool_grad(x, y, dy, y_is_max=True, **args)
    np.testing.assert_array_equal(given.view(np.uint32), recomputed.view(np.uint32))


def _relu_output(*shape):
    """ReLU outputs with many zeros (windows of ties at zero), a NaN window kept apart."""
    return np.maximum(np.random.default_rng(3).integers(-2, 3, shape), 0).astype(np.float32)


@pytest.mark.parametrize("shape, ksize, strides, padding, ties, nan", [
    ((3, 8, 8, 4), (2, 2), (2, 2), ((0, 0), (0, 0)), "first", False),   # tiled: mask pooled
    ((3, 8, 8, 4), (2, 2), (2, 2), ((0, 0), (0, 0)), "first", True),    # a NaN window
    ((3, 7, 7, 4), (2, 2), (2, 2), ((0, 1), (0, 1)), "first", False),   # tiled, padded
    ((3, 9, 9, 4), (2, 2), (2, 2), ((0, 0), (0, 0)), "first", False),   # rows no window covers
    ((3, 7, 7, 4), (3, 3), (2, 2), ((1, 1), (1, 1)), "first", False),   # overlapping
    ((2, 4, 4, 4, 3), (2, 2, 2), (2, 2, 2), ((0, 0),) * 3, "all", True),   # 3-d: every tie
    ((2, 64, 64, 128), (2, 2), (2, 2), ((0, 0), (0, 0)), "first", False),  # split in slabs
])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("y_is_max", [True, False])
def test_the_max_pool_relu_gradient_pair_gives_the_bits_of_its_two_steps(
        shape, ksize, strides, padding, ties, nan, dtype, y_is_max):
    """The ReLU's mask applied to the pooled gradient where windows are tiled and hold no
    NaN; the two steps in turn elsewhere."""
    from ipu_keras._src.ops import cores, nn

    x = _relu_output(*shape).astype(dtype)
    if nan:
        x[(1,) + (0,) * (len(shape) - 1)] = np.nan
    params = dict(ksize=ksize, strides=strides, padding=padding, ties=ties, y_is_max=y_is_max)
    y = pool._max_pool(x, ksize=ksize, strides=strides, padding=padding)
    dy = np.random.default_rng(4).standard_normal(y.shape).astype(dtype)
    dy.flat[::7] = -dy.flat[::7] ** 2         # negative gradients: -0 where the ReLU masks
    dy.flat[5] = np.inf                       # inf * 0: NaN, as the two steps give
    with cores.execution(widen=True), np.errstate(invalid="ignore"):   # as the engine runs
        fused = pool._max_pool_relu_grad(x, y, dy, **params)
        apart = nn.relu_grad(pool._max_pool_grad(x, y, dy, **params), x)
    bits = np.dtype(f"u{x.itemsize}")
    np.testing.assert_array_equal(fused.view(bits), apart.view(bits))
    assert np.count_nonzero(fused) > 0
    if len(shape) == 4:   # 2x2 windows of ReLU outputs: some all zero, masked to -0
        assert np.count_nonzero(np.signbit(fused) & (fused == 0))
