"""The elementwise math family (`ipu_keras/_src/ops/math.py`) against TensorFlow on the CPU."""
import numpy as np
import pytest
import tensorflow as tf

from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.ops import math as math_ops
from tests.ops.harness import boolean, case, check_case, f32, grad, i32, positive

R = tf.raw_ops


def binary(op):
    """`tf.raw_ops.<op>(x=a, y=b)` as a function of two tensors."""
    return lambda a, b: getattr(R, op)(x=a, y=b)


def unary(op):
    return lambda a: getattr(R, op)(x=a)


def nonzero_i32(*shape):
    x = i32(*shape, low=-6, high=6)
    return np.where(x == 0, 3, x).astype(np.int32)


def away_from_zero(*shape):
    """Floats bounded away from zero, so divisions stay well conditioned."""
    x = f32(*shape)
    return np.where(np.abs(x) < 0.2, 0.7, x).astype(np.float32)


def with_zeros(*shape):
    x = f32(*shape)
    x.flat[::3] = 0.0
    return x


def halves():
    return np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -3.7], np.float32)


def specials():
    return np.array([0.0, -1.0, np.inf, -np.inf, np.nan, 3.5], np.float32)


ARITHMETIC = [
    case("AddV2", lambda a, b: a + b, f32(2, 3), f32(3)),
    case("AddV2", lambda a, b: a + b, i32(4, 1), i32(1, 5), label="int32"),
    case("Add", binary("Add"), f32(3, 1), f32(1, 4)),
    case("Sub", lambda a, b: a - b, f32(2, 3), f32(2, 1)),
    case("Sub", lambda a, b: a - b, i32(5), i32(), label="int32"),
    case("Mul", lambda a, b: a * b, f32(2, 3), f32(3)),
    case("Mul", lambda a, b: a * b, i32(2, 3), i32(2, 3), label="int32"),
    case("RealDiv", lambda a, b: a / b, f32(2, 3), away_from_zero(3)),
    case("Div", binary("Div"), f32(4), away_from_zero(4)),
    case("Div", binary("Div"), i32(3, 4, low=-20, high=20), nonzero_i32(4), label="int32"),
    case("DivNoNan", tf.math.divide_no_nan, f32(2, 3), with_zeros(2, 3)),
    case("MulNoNan", tf.math.multiply_no_nan, specials(), with_zeros(6)),
    case("FloorDiv", lambda a, b: a // b, f32(3, 4, low=-9, high=9), away_from_zero(4)),
    case("FloorDiv", lambda a, b: a // b, i32(3, 4, low=-20, high=20), nonzero_i32(4),
         label="int32"),
    case("FloorMod", lambda a, b: a % b, f32(3, 4, low=-9, high=9), away_from_zero(4)),
    case("FloorMod", lambda a, b: a % b, i32(3, 4, low=-20, high=20), nonzero_i32(3, 1),
         label="int32"),
    case("TruncateDiv", tf.truncatediv, i32(3, 4, low=-20, high=20), nonzero_i32(4)),
    case("TruncateDiv", binary("TruncateDiv"), f32(6, low=-9, high=9), away_from_zero(6),
         label="float32"),
    case("TruncateMod", tf.truncatemod, i32(3, 4, low=-20, high=20), nonzero_i32(4)),
    case("TruncateMod", tf.truncatemod, f32(6, low=-9, high=9), away_from_zero(6),
         label="float32"),
    case("Mod", binary("Mod"), i32(8, low=-20, high=20), nonzero_i32(8)),
    case("Maximum", tf.maximum, f32(2, 3), f32(3)),
    case("Maximum", tf.maximum, i32(2, 3), i32(1), label="int32"),
    case("Minimum", tf.minimum, f32(2, 3), f32(2, 1)),
    case("Minimum", tf.minimum, i32(4), i32(4), label="int32"),
    case("Pow", tf.pow, positive(2, 3), f32(3)),
    case("Pow", tf.pow, i32(6, low=-4, high=4), i32(6, low=0, high=5), label="int32"),
    case("SquaredDifference", tf.math.squared_difference, f32(2, 3), f32(3)),
    case("SquaredDifference", tf.math.squared_difference, i32(4), i32(4), label="int32"),
    case("Atan2", tf.atan2, f32(2, 3), f32(3)),
    case("Xlogy", tf.math.xlogy, with_zeros(6), positive(6)),
    case("Xdivy", tf.math.xdivy, with_zeros(6), away_from_zero(6)),
    case("Xlog1py", tf.math.xlog1py, with_zeros(6), positive(6)),
    case("AddN", lambda a, b, c: tf.add_n([a, b, c]), f32(2, 3), f32(2, 3), f32(2, 3)),
    case("AddN", lambda a, b: tf.add_n([a, b]), i32(5), i32(5), label="int32"),
    case("ClipByValue", lambda t, lo, hi: R.ClipByValue(t=t, clip_value_min=lo,
                                                        clip_value_max=hi),
         f32(3, 4), np.float32(-0.5), np.float32(0.8)),
    case("ClipByValue", lambda t, lo, hi: R.ClipByValue(t=t, clip_value_min=lo,
                                                        clip_value_max=hi),
         i32(3, 4), i32(3, 4, low=-4, high=0), i32(3, 4, low=0, high=4), label="int32"),
]

BITS_AND_LOGIC = [
    case("BitwiseAnd", tf.bitwise.bitwise_and, i32(3, 4, low=-50, high=50), i32(4, high=50)),
    case("BitwiseOr", tf.bitwise.bitwise_or, i32(3, 4, low=-50, high=50), i32(4, high=50)),
    case("BitwiseXor", tf.bitwise.bitwise_xor, i32(3, 4, low=-50, high=50), i32(4, high=50)),
    case("Invert", tf.bitwise.invert, i32(3, 4, low=-50, high=50)),
    case("LogicalAnd", tf.logical_and, boolean(2, 3), boolean(3)),
    case("LogicalOr", tf.logical_or, boolean(2, 3), boolean(2, 1)),
    case("LogicalNot", tf.logical_not, boolean(2, 3)),
]

UNARY = [
    case("Neg", lambda a: -a, f32(2, 3)),
    case("Neg", lambda a: -a, i32(5), label="int32"),
    case("Abs", tf.abs, f32(2, 3)),
    case("Abs", tf.abs, i32(5), label="int32"),
    case("Sign", tf.sign, np.array([-2.0, 0.0, 3.0, -0.0], np.float32)),
    case("Sign", tf.sign, np.array([-2, 0, 3], np.int32), label="int32"),
    case("Square", tf.square, f32(2, 3)),
    case("Square", tf.square, i32(5), label="int32"),
    case("Reciprocal", tf.math.reciprocal, away_from_zero(2, 3)),
    case("Inv", unary("Inv"), away_from_zero(4)),
    case("Floor", tf.floor, f32(2, 3, low=-5, high=5)),
    case("Ceil", tf.math.ceil, f32(2, 3, low=-5, high=5)),
    case("Round", tf.round, halves(), label="half_to_even"),
    case("Round", tf.round, f32(2, 3, low=-5, high=5)),
    case("Round", unary("Round"), np.array([1.5, 2.5], np.float64), label="float64"),
    case("Rint", tf.math.rint, halves()),
    case("Sqrt", tf.sqrt, positive(2, 3)),
    case("Rsqrt", tf.math.rsqrt, positive(2, 3)),
    case("Exp", tf.exp, f32(2, 3, low=-10, high=10)),
    case("Expm1", tf.math.expm1, f32(2, 3, low=-1, high=1)),
    case("Log", tf.math.log, positive(2, 3)),
    case("Log1p", tf.math.log1p, f32(2, 3, low=-0.9, high=3)),
    case("Tanh", tf.tanh, f32(2, 3, low=-6, high=6)),
    case("Sigmoid", tf.sigmoid, f32(2, 3, low=-12, high=12)),
    case("Erf", tf.math.erf, f32(3, 4, low=-4, high=4)),
    case("Erf", tf.math.erf, np.array([0.0, 1e-4, -3e-3, 0.49, 0.51, 6.0, -9.0], np.float32),
         label="edges"),
    case("Erfc", tf.math.erfc, f32(3, 4, low=-4, high=4)),
    case("Erfc", tf.math.erfc, np.array([0.0, 1e-4, -3e-3, 0.49, 0.51, 3.0, 6.0, -9.0],
                                        np.float32), label="edges"),
    case("Sin", tf.sin, f32(2, 3, low=-4, high=4)),
    case("Cos", tf.cos, f32(2, 3, low=-4, high=4)),
    case("Tan", tf.tan, f32(2, 3, low=-1.2, high=1.2)),
    case("Asin", tf.asin, f32(2, 3, low=-0.99, high=0.99)),
    case("Acos", tf.acos, f32(2, 3, low=-0.99, high=0.99)),
    case("Atan", tf.atan, f32(2, 3, low=-5, high=5)),
    case("Sinh", tf.sinh, f32(2, 3)),
    case("Cosh", tf.cosh, f32(2, 3)),
    case("Asinh", tf.asinh, f32(2, 3, low=-5, high=5)),
    case("Acosh", tf.acosh, f32(2, 3, low=1.01, high=5)),
    case("Atanh", tf.atanh, f32(2, 3, low=-0.9, high=0.9)),
    case("IsFinite", tf.math.is_finite, specials()),
    case("IsNan", tf.math.is_nan, specials()),
    case("IsInf", tf.math.is_inf, specials()),
    case("ZerosLike", unary("ZerosLike"), f32(2, 3)),
    case("ZerosLike", unary("ZerosLike"), boolean(4), label="bool"),
    case("OnesLike", unary("OnesLike"), i32(2, 3)),
]

COMPARE_AND_SELECT = [
    case("Less", tf.less, f32(2, 3), f32(3)),
    case("Less", tf.less, i32(2, 3), i32(2, 1), label="int32"),
    case("LessEqual", tf.less_equal, i32(2, 3), i32(3)),
    case("Greater", tf.greater, f32(2, 3), f32(2, 1)),
    case("GreaterEqual", tf.greater_equal, i32(2, 3), i32(3)),
    case("Equal", tf.equal, i32(2, 3), i32(3)),
    case("Equal", tf.equal, boolean(4), boolean(4), label="bool"),
    case("NotEqual", tf.not_equal, i32(2, 3), i32(2, 1)),
    case("SelectV2", tf.where, boolean(2, 3), f32(2, 3), f32(3)),
    case("SelectV2", tf.where, boolean(3, 1), i32(1, 4), i32(), label="broadcast"),
    case("Select", lambda c, x, y: R.Select(condition=c, x=x, y=y), boolean(2, 3), f32(2, 3),
         f32(2, 3)),
    case("Select", lambda c, x, y: R.Select(condition=c, x=x, y=y), boolean(3), f32(3, 2, 2),
         f32(3, 2, 2), label="rows"),
    case("Select", lambda c, x, y: R.Select(condition=c, x=x, y=y), np.array(True), i32(4),
         i32(4), label="scalar"),
]

CASTS = [
    case("Cast", lambda a: tf.cast(a, tf.int32),
         np.array([0.0, -1.7, 1.7, -2.5, 2.5, 1.5e9, -1.5e9], np.float32), label="f32_to_i32"),
    case("Cast", lambda a: tf.cast(a, tf.int32), f32(3, 4, low=-9, high=9), label="truncates"),
    case("Cast", lambda a: tf.cast(a, tf.bool), specials(), label="f32_to_bool"),
    case("Cast", lambda a: tf.cast(a, tf.float32), i32(3, 4), label="i32_to_f32"),
    case("Cast", lambda a: tf.cast(a, tf.float32), boolean(5), label="bool_to_f32"),
    case("Cast", lambda a: tf.cast(a, tf.uint8), i32(6, low=-300, high=300), label="wraps"),
    case("Cast", lambda a: tf.cast(a, tf.float16), f32(3, 4), tolerance=T.EXACT,
         label="f32_to_f16"),
    case("Cast", lambda a: tf.cast(a, tf.int64), i32(3), label="i32_to_i64"),
]

GRADIENTS = [
    case("TanhGrad", grad(tf.tanh, 0), f32(2, 3)),
    case("SigmoidGrad", grad(tf.sigmoid, 0), f32(2, 3)),
    case("SqrtGrad", grad(tf.sqrt, 0), positive(2, 3)),
    case("RsqrtGrad", grad(tf.math.rsqrt, 0), positive(2, 3)),
    case("ReciprocalGrad", grad(tf.math.reciprocal, 0), away_from_zero(2, 3)),
    case("InvGrad", lambda y, dy: R.InvGrad(y=y, dy=dy), f32(2, 3), f32(2, 3)),
]

CASES = ARITHMETIC + BITS_AND_LOGIC + UNARY + COMPARE_AND_SELECT + CASTS + GRADIENTS


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_matches_tensorflow(c):
    check_case(c)


def test_every_imported_type_has_a_case():
    assert set(math_ops.TF_TYPES) <= {c.tf_op for c in CASES}


def test_case_ids_are_unique():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
