"""Elementwise math: arithmetic, comparisons, logic, casts, selects and unary gradients.

This module owns every IR op that maps one element of each (numpy-broadcast) input
to one element of output, and the TensorFlow op types imported to them. Each op is
one line below: its numpy codelet, its work kind ("vector" for arithmetic, compare
and logic, "transcendental" for exp/log/trig/pow/sqrt, "copy" for casts and fills)
and the TensorFlow types imported straight to it. Output dtype is that of the first
input, or bool for predicates. Every op maps "elementwise" and costs one unit of its
kind per output element (AddN: one per added input). Imports with a twist (Div by
dtype, Round on integers, Cast, Select's vector condition) have small importers.

Numerics follow TensorFlow on the CPU: integer Div and TruncateDiv round towards
zero, FloorDiv/FloorMod towards minus infinity (float FloorDiv is floor(x / y));
Round is half-to-even; DivNoNan and MulNoNan give 0 where y == 0; Xlogy, Xdivy and
Xlog1py give 0 where x == 0; Cast follows C conversions (numpy's, which agree).
Floats compute in their own precision, except Erf which computes in float64.
Kernels never warn: IEEE results (inf, nan) are what TensorFlow returns too.
"""
import math

import numpy as np

from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops import cores, simd
from ipu_keras._src.ops._common import broadcast_shape
from ipu_keras._src.ops.registry import Work, register_op, tf_direct, tf_import

VECTOR, TRANSCENDENTAL, COPY = "vector", "transcendental", "copy"

_ir_ops = []
_tf_types = []


# ---------------------------------------------------------------------------- rules


def _common_dtype(in_types):
    dtypes = {t.dtype for t in in_types}
    assert len(dtypes) == 1, f"elementwise inputs differ in dtype: {sorted(dtypes)}"
    return in_types[0].dtype


def _same_rule(in_types, **_):
    """Numpy broadcasting of inputs that share one dtype; the output keeps it."""
    dtype = _common_dtype(in_types)
    return [TensorType(broadcast_shape(*(t.shape for t in in_types)), dtype)]


def _bool_rule(in_types, **_):
    """Like `_same_rule`, but a predicate: the output is bool."""
    _common_dtype(in_types)
    return [TensorType(broadcast_shape(*(t.shape for t in in_types)), "bool")]


def _per_output(kind):
    def cost(in_types, out_types, **_):
        return Work(kind, sum(t.size for t in out_types))

    return cost


def _add_n_cost(in_types, out_types, **_):
    return Work(VECTOR, max(len(in_types) - 1, 1) * out_types[0].size)


def _codelet(fn, predicate, split=False):
    """Wrap a numpy function as a kernel returning an array of the rule's dtype.

    Kernels run with float exceptions ignored: the engine and constant folding set
    `np.errstate` once around everything they run, not per call. With `split` (compute-
    bound kernels), large outputs are computed a slab per core (`cores.rowwise`).
    """
    if predicate:
        def kernel(*xs):
            return np.asarray(fn(*xs), dtype=bool)
    elif split:
        return cores.rowwise_kernel(fn)
    else:
        def kernel(*xs):
            return np.asarray(fn(*xs), dtype=xs[0].dtype)
    kernel.__name__ = getattr(fn, "__name__", "kernel")
    return kernel


# ------------------------------------------------------------------ registration


def _register(name, shape, kernel, cost, rowwise=True, tile_rule="elementwise",
              recompute="again", chain=None):
    register_op(name, shape=shape, kernel=kernel, cost=cost, mapping="elementwise",
                rowwise=rowwise, tile_rule=tile_rule, recompute=recompute, chain=chain)
    _ir_ops.append(name)


def _importer(*tf_types):
    """`tf_import` that also records the types in `TF_TYPES`."""
    _tf_types.extend(tf_types)
    return tf_import(*tf_types)


def _direct(op, tf_types):
    for tf_type in tf_types:
        tf_direct(tf_type, op)
        _tf_types.append(tf_type)


def _elementwise(name, fn, kind, *tf_types, cost=None, chain=None):
    """An op whose output has its inputs' dtype, imported from each of `tf_types`."""
    _register(name, _same_rule, _codelet(fn, False, split=kind == TRANSCENDENTAL),
              cost or _per_output(kind), chain=chain)
    _direct(name, tf_types)


def _predicate(name, fn, *tf_types):
    """A vector op with a bool output, imported from each of `tf_types`."""
    _register(name, _bool_rule, _codelet(fn, True), _per_output(VECTOR))
    _direct(name, tf_types)


# ------------------------------------------------------------- special kernels


def _is_int(x):
    return x.dtype.kind in "iu"


def _floor_div(x, y):
    return np.floor_divide(x, y) if _is_int(x) else np.floor(x / y)


def _floor_mod(x, y):
    if _is_int(x):
        return np.remainder(x, y)
    r = np.fmod(x, y)
    return np.where((r != 0) & ((y < 0) != (r < 0)), r + y, r)


def _truncate_div(x, y):
    if not _is_int(x):
        return np.trunc(x / y)
    q = np.floor_divide(x, y)
    return q + ((np.remainder(x, y) != 0) & ((x < 0) != (y < 0)))


def _div_no_nan(x, y):
    return np.where(y == 0, 0, x / y)


def _mul_no_nan(x, y):
    return np.where(y == 0, 0, x * y)


def _xlogy(x, y):
    return np.where(x == 0, 0, x * np.log(y))


def _xdivy(x, y):
    return np.where(x == 0, 0, x / y)


def _xlog1py(x, y):
    return np.where(x == 0, 0, x * np.log1p(y))


def _squared_difference(x, y):
    d = x - y
    return d * d


def _add_n(*xs):
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    return np.array(total, copy=True)


def _extremum(ufunc):
    """np.maximum or np.minimum, on `simd.against` when the second operand is a scalar."""
    def kernel(x, y):
        return simd.against(ufunc, x, y) if np.size(y) == 1 else ufunc(x, y)

    kernel.__name__ = ufunc.__name__
    return kernel


_maximum, _minimum = _extremum(np.maximum), _extremum(np.minimum)


def _clip(t, lo, hi):
    return _maximum(_minimum(t, hi), lo)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


# Erf: Taylor series below 0.5; above, the Chebyshev-fitted erfc of Numerical Recipes
# (relative error < 1.2e-7). Both in float64: max relative error ~6e-8 against math.erf.
_ERF_SERIES = tuple(
    (-1) ** n * 2 / (math.sqrt(math.pi) * math.factorial(n) * (2 * n + 1)) for n in range(13)
)
_ERFC_FIT = (
    -1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
    -1.13520398, 1.48851587, -0.82215223, 0.17087277,
)


def _horner(coeffs, x):
    acc = np.full_like(x, coeffs[-1])
    for c in coeffs[-2::-1]:
        acc *= x
        acc += c
    return acc


def _erfc_tail(a):
    """erfc(a) for a >= 0.5, without the cancellation of 1 - erf(a)."""
    t = 1 / (1 + 0.5 * a)
    return t * np.exp(_horner(_ERFC_FIT, t) - a * a)


def _erf(x):
    z = np.asarray(x, dtype=np.float64)
    a = np.abs(z)
    small = a < 0.5
    out = np.empty_like(a)
    s = a[small]
    out[small] = s * _horner(_ERF_SERIES, s * s)
    out[~small] = 1 - _erfc_tail(a[~small])
    return np.copysign(out, z)


_CHUNK = 1 << 16


def _erfc(x):
    """erfc by the fit of `_erfc_tail` everywhere (relative error below 1.2e-7 for x >= 0;
    erfc(-x) = 2 - erfc(x) >= 1), in float64, a chunk of `_CHUNK` elements at a time so
    that the dozen temporaries stay in the cache (GELU's erfc of a transformer's hidden
    layer is millions of elements)."""
    flat = np.ravel(x)
    out = np.empty(flat.shape, np.float64)
    for i in range(0, flat.size, _CHUNK):
        z = flat[i:i + _CHUNK].astype(np.float64)
        tail = _erfc_tail(np.abs(z))
        out[i:i + _CHUNK] = np.where(z < 0, 2 - tail, tail)
    return out.reshape(np.shape(x))


# ------------------------------------------------------------------ the ops

_elementwise("add", np.add, VECTOR, "Add", "AddV2")
_elementwise("sub", np.subtract, VECTOR, "Sub")
_elementwise("mul", np.multiply, VECTOR, "Mul")
_elementwise("div", np.divide, VECTOR, "RealDiv")
_elementwise("div_no_nan", _div_no_nan, VECTOR, "DivNoNan")
_elementwise("mul_no_nan", _mul_no_nan, VECTOR, "MulNoNan")
_elementwise("floor_div", _floor_div, VECTOR, "FloorDiv")
_elementwise("floor_mod", _floor_mod, VECTOR, "FloorMod")
_elementwise("truncate_div", _truncate_div, VECTOR, "TruncateDiv")
_elementwise("truncate_mod", np.fmod, VECTOR, "TruncateMod", "Mod")
_elementwise("maximum", _maximum, VECTOR, "Maximum")
_elementwise("minimum", _minimum, VECTOR, "Minimum")
_elementwise("squared_difference", _squared_difference, VECTOR, "SquaredDifference")
_elementwise("xdivy", _xdivy, VECTOR, "Xdivy")
_elementwise("pow", np.power, TRANSCENDENTAL, "Pow")
_elementwise("atan2", np.arctan2, TRANSCENDENTAL, "Atan2")
_elementwise("xlogy", _xlogy, TRANSCENDENTAL, "Xlogy")
_elementwise("xlog1py", _xlog1py, TRANSCENDENTAL, "Xlog1py")
_elementwise("bitwise_and", np.bitwise_and, VECTOR, "BitwiseAnd")
_elementwise("bitwise_or", np.bitwise_or, VECTOR, "BitwiseOr")
_elementwise("bitwise_xor", np.bitwise_xor, VECTOR, "BitwiseXor")
_elementwise("invert", np.invert, VECTOR, "Invert")
_elementwise("logical_and", np.logical_and, VECTOR, "LogicalAnd")
_elementwise("logical_or", np.logical_or, VECTOR, "LogicalOr")
_elementwise("logical_not", np.logical_not, VECTOR, "LogicalNot")
_elementwise("clip", _clip, VECTOR, "ClipByValue")
_elementwise("add_n", _add_n, VECTOR, "AddN", cost=_add_n_cost)

_elementwise("neg", np.negative, VECTOR, "Neg")
_elementwise("abs", np.abs, VECTOR, "Abs")
_elementwise("sign", np.sign, VECTOR, "Sign")
_elementwise("square", np.square, VECTOR, "Square")
_elementwise("reciprocal", lambda x: 1 / x, VECTOR, "Reciprocal", "Inv")
_elementwise("floor", np.floor, VECTOR, "Floor")
_elementwise("ceil", np.ceil, VECTOR, "Ceil")
_elementwise("round", np.rint, VECTOR, "Rint")  # and float Round, below
_elementwise("sqrt", np.sqrt, TRANSCENDENTAL, "Sqrt")
_elementwise("rsqrt", lambda x: 1 / np.sqrt(x), TRANSCENDENTAL, "Rsqrt")
_elementwise("exp", np.exp, TRANSCENDENTAL, "Exp")
_elementwise("expm1", np.expm1, TRANSCENDENTAL, "Expm1")
_elementwise("log", np.log, TRANSCENDENTAL, "Log")
_elementwise("log1p", np.log1p, TRANSCENDENTAL, "Log1p")
_elementwise("tanh", np.tanh, TRANSCENDENTAL, "Tanh")
_elementwise("sigmoid", _sigmoid, TRANSCENDENTAL, "Sigmoid", chain="nonlinearity")
_elementwise("erf", _erf, TRANSCENDENTAL, "Erf")
_elementwise("erfc", _erfc, TRANSCENDENTAL, "Erfc")
_elementwise("sin", np.sin, TRANSCENDENTAL, "Sin")
_elementwise("cos", np.cos, TRANSCENDENTAL, "Cos")
_elementwise("tan", np.tan, TRANSCENDENTAL, "Tan")
_elementwise("asin", np.arcsin, TRANSCENDENTAL, "Asin")
_elementwise("acos", np.arccos, TRANSCENDENTAL, "Acos")
_elementwise("atan", np.arctan, TRANSCENDENTAL, "Atan")
_elementwise("sinh", np.sinh, TRANSCENDENTAL, "Sinh")
_elementwise("cosh", np.cosh, TRANSCENDENTAL, "Cosh")
_elementwise("asinh", np.arcsinh, TRANSCENDENTAL, "Asinh")
_elementwise("acosh", np.arccosh, TRANSCENDENTAL, "Acosh")
_elementwise("atanh", np.arctanh, TRANSCENDENTAL, "Atanh")
_elementwise("zeros_like", np.zeros_like, COPY, "ZerosLike")
_elementwise("ones_like", np.ones_like, COPY, "OnesLike")

# Gradients of unary ops, from the op's output y and the upstream gradient dy.
_elementwise("tanh_grad", lambda y, dy: dy * (1 - y * y), VECTOR, "TanhGrad")
_elementwise("sigmoid_grad", lambda y, dy: dy * (y * (1 - y)), VECTOR, "SigmoidGrad",
             chain="nonlinearity_grad")
_elementwise("sqrt_grad", lambda y, dy: dy * 0.5 / y, VECTOR, "SqrtGrad")
_elementwise("rsqrt_grad", lambda y, dy: (y * y * y) * dy * -0.5, VECTOR, "RsqrtGrad")
_elementwise("reciprocal_grad", lambda y, dy: -dy * y * y, VECTOR,
             "ReciprocalGrad", "InvGrad")

_predicate("less", np.less, "Less")
_predicate("less_equal", np.less_equal, "LessEqual")
_predicate("greater", np.greater, "Greater")
_predicate("greater_equal", np.greater_equal, "GreaterEqual")
_predicate("equal", np.equal, "Equal")
_predicate("not_equal", np.not_equal, "NotEqual")
_predicate("is_finite", np.isfinite, "IsFinite")
_predicate("is_nan", np.isnan, "IsNan")
_predicate("is_inf", np.isinf, "IsInf")


# ------------------------------------------------------------- cast and select


def _cast_rule(in_types, *, dtype):
    return [TensorType(in_types[0].shape, dtype)]


def _cast(x, *, dtype):
    return np.asarray(x.astype(dtype))


_register("cast", _cast_rule, _cast, _per_output(COPY), recompute="per_use")


def _select_rule(in_types, *, expand=0):
    """`select(cond, x, y)`: broadcast of all three, `cond` first given `expand` unit
    trailing axes (TensorFlow's Select picks whole rows with a vector condition)."""
    cond, x, y = in_types
    assert cond.dtype == "bool" and x.dtype == y.dtype, [str(t) for t in in_types]
    shape = broadcast_shape(cond.shape + (1,) * expand, x.shape, y.shape)
    return [TensorType(shape, x.dtype)]


def _select(cond, x, y, *, expand=0):
    if expand:
        cond = cond.reshape(cond.shape + (1,) * expand)
    return np.asarray(simd.select(cond, x, y), dtype=x.dtype)


# Not rowwise: a vector condition picks whole rows of higher-rank operands.
# With `expand` the condition is a vector over the leading axis: not element for element.
_register("select", _select_rule, _select, _per_output(VECTOR), rowwise=False,
          tile_rule=lambda params: "fallback" if params.get("expand") else "elementwise")
_direct("select", ("SelectV2",))


@_importer("Select")
def _import_select(node, b):
    cond, x, y = node.inputs
    if cond.type.rank == 1 and x.type.rank > 1:
        return b.emit("select", [cond, x, y], expand=x.type.rank - 1)
    return b.emit("select", [cond, x, y])


@_importer("Cast")
def _import_cast(node, b):
    x = node.inputs[0]
    dtype = np.dtype(node.attr("DstT")).name
    if dtype == x.type.dtype:
        return x
    return b.emit("cast", [x], dtype=dtype)


@_importer("Div")
def _import_div(node, b):
    """TensorFlow's legacy Div truncates integers (like C) and divides floats."""
    x = node.inputs[0]
    op = "truncate_div" if np.dtype(x.type.dtype).kind in "iu" else "div"
    return b.emit(op, node.inputs)


@_importer("Round")
def _import_round(node, b):
    """Half-to-even for floats; integers are already round (`tf.round` returns them)."""
    x = node.inputs[0]
    if np.dtype(x.type.dtype).kind in "biu":
        return x
    return b.emit("round", [x])


IR_OPS = tuple(_ir_ops)
"""The IR ops this module registers."""
TF_TYPES = tuple(sorted(_tf_types))
"""The TensorFlow op types this module imports."""

__all__ = ["IR_OPS", "TF_TYPES"]
