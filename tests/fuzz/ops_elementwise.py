"""Fuzz ops of the elementwise family: unary and binary math (with broadcasting),
comparisons, logic, select and casts. Each op states how it changes the facts of
its inputs (`tests.fuzz.facts`): interval, error bound, grid.
"""
import math

import numpy as np
import tensorflow as tf

from tests.fuzz.facts import (FLOATS, SMALLEST_NORMAL, ULPS_TRANSCENDENTAL, Facts,
                              computed, mul_interval, on_grid, rounding)
from tests.fuzz.graph import fuzz_op


def _broadcast_partner(b, shape):
    """A shape that broadcasts with `shape`: some dims set to 1, leading dims dropped or added."""
    dims = [1 if b.integer(0, 3) == 0 else d for d in shape]
    change = b.integer(0, 3)
    if change == 1 and dims:
        dims = dims[b.integer(0, len(dims)):]
    elif change == 2 and len(dims) < 4:
        dims = [b.choice((1, 2))] + dims
    return tuple(dims)


def _second_operand(b, x, dtype=None, kind=None, pred=lambda f: True):
    """An operand broadcasting with value x: an earlier value or a fresh input."""
    fx = b.facts[x]
    dtype = dtype or fx.dtype

    def fits(f):
        try:
            np.broadcast_shapes(f.shape, fx.shape)
        except ValueError:
            return False
        return f.dtype == dtype and pred(f)

    found = b.candidates(fits)
    if found and b.flag():
        return b.choice(found)
    return b.fresh(_broadcast_partner(b, fx.shape), dtype, kind)


def _out_shape(*facts):
    """The broadcast shape of the values, or None if they do not broadcast."""
    try:
        return tuple(np.broadcast_shapes(*(f.shape for f in facts)))
    except ValueError:
        return None


# ------------------------------------------------------------------ unary ops


def _unary(name, build, dtypes, rule, exact_only=False, pred=lambda f: True):
    """Registers a unary op; rule(facts) -> (lo, hi, kwargs for `computed`) or Facts."""

    @fuzz_op(name, build)
    def draw(b):
        x = b.pick(lambda f: f.dtype in dtypes and (f.exact or not exact_only) and pred(f))
        if x is None:
            return None
        f = b.facts[x]
        result = rule(f)
        if result is None or isinstance(result, Facts):
            return b.emit(name, [x], result)
        lo, hi, kwargs = result
        return b.emit(name, [x], computed(f.shape, f.dtype, lo, hi, **kwargs))


def _keep(f, lo, hi, nz=0.0):
    return Facts(f.shape, f.dtype, lo, hi, f.err, f.grid, nz)


def _transcendental(fn, lipschitz, lo_hi=None):
    def rule(f):
        lo, hi = lo_hi(f) if lo_hi else (fn(f.lo), fn(f.hi))
        mag = max(abs(lo), abs(hi))
        err = lipschitz(f) * f.err
        return lo, hi, dict(err=err, rounding_err=rounding(f.dtype, mag, ULPS_TRANSCENDENTAL))

    return rule


def _square(f):
    lo = 0.0 if f.lo <= 0 <= f.hi else min(f.lo ** 2, f.hi ** 2)
    err = 2 * f.mag * f.err + f.err ** 2
    return lo, f.mag ** 2, dict(grid=f.grid ** 2, err=err)


def _rounded_to_integer(f):
    return Facts(f.shape, f.dtype, math.floor(f.lo), math.ceil(f.hi), 0.0, max(f.grid, 1.0))


NUMERIC = FLOATS + ("int32",)
_unary("neg", tf.negative, NUMERIC, lambda f: _keep(f, -f.hi, -f.lo, f.nz))
_unary("abs", tf.abs, NUMERIC,
       lambda f: _keep(f, f.nonzero_bound() if f.lo <= 0 else f.lo, f.mag, f.nz))
_unary("relu", tf.nn.relu, NUMERIC, lambda f: _keep(f, max(f.lo, 0), max(f.hi, 0)))
_unary("square", tf.square, NUMERIC, _square)
_unary("sign", tf.sign, NUMERIC, lambda f: Facts(f.shape, f.dtype, -1, 1, 0.0, 1.0),
       exact_only=True)
for _name, _fn in (("floor", tf.floor), ("ceil", tf.math.ceil), ("round", tf.round)):
    _unary(_name, _fn, FLOATS, _rounded_to_integer, exact_only=True)
_unary("tanh", tf.tanh, FLOATS, _transcendental(math.tanh, lambda f: 1.0))
_unary("sigmoid", tf.sigmoid, FLOATS,
       _transcendental(lambda v: 1 / (1 + math.exp(-v)), lambda f: 0.25))
_unary("sin", tf.sin, FLOATS, _transcendental(math.sin, lambda f: 1.0, lambda f: (-1.0, 1.0)))
_unary("exp", tf.exp, FLOATS, _transcendental(math.exp, lambda f: math.exp(f.hi + f.err)),
       pred=lambda f: f.hi + f.err <= 4)
_unary("sqrt", tf.sqrt, FLOATS,
       lambda f: (math.sqrt(f.lo), math.sqrt(f.hi), dict(err=0.0)),
       exact_only=True, pred=lambda f: f.lo >= 0)


# ----------------------------------------------------------------- binary ops


def _binary(name, build, dtypes, rule, exact_only=False, divisor=None):
    """Registers a binary op; rule(fa, fb, shape) -> Facts or None (not applicable)."""

    @fuzz_op(name, build)
    def draw(b):
        x = b.pick(lambda f: f.dtype in dtypes and (f.exact or not exact_only))
        if x is None:
            return None
        kind = "nonzero" if divisor else None
        y = _second_operand(b, x, kind=kind, pred=lambda f: (f.exact or not exact_only) and (
            divisor is None or divisor(f)))
        fa, fb = b.facts[x], b.facts[y]
        if divisor is not None and not divisor(fb):
            return None
        return b.emit(name, [x, y], rule(fa, fb, _out_shape(fa, fb)))


def _add_rule(sign):
    def rule(fa, fb, shape):
        lo = fa.lo + (fb.lo if sign > 0 else -fb.hi)
        hi = fa.hi + (fb.hi if sign > 0 else -fb.lo)
        return computed(shape, fa.dtype, lo, hi, grid=min(fa.grid, fb.grid), err=fa.err + fb.err)

    return rule


def _mul_rule(fa, fb, shape):
    lo, hi = mul_interval(fa.lo, fa.hi, fb.lo, fb.hi)
    err = fa.mag * fb.err + fb.mag * fa.err + fa.err * fb.err
    return computed(shape, fa.dtype, lo, hi, grid=fa.grid * fb.grid, err=err,
                    nz=fa.nz * fb.nz)


def _extreme_rule(fa, fb, shape, pick):
    return Facts(shape, fa.dtype, pick(fa.lo, fb.lo), pick(fa.hi, fb.hi), max(fa.err, fb.err),
                 min(fa.grid, fb.grid) if fa.exact and fb.exact else 0.0)


def _float_divisor(f):
    return f.nonzero_bound() > 2 * f.err + SMALLEST_NORMAL[f.dtype] if f.is_float else True


def _div_rule(fa, fb, shape):
    nz = fb.nonzero_bound()
    mag = fa.mag / nz
    err = fa.err / (nz - fb.err) + fa.mag * fb.err / (nz * (nz - fb.err))
    return computed(shape, fa.dtype, -mag, mag, err=err)


def _int_divisor(f):
    return f.nonzero_bound() >= 1


def _float_floordiv_ok(fa, fb):
    return fa.grid / max(fb.mag, 1e-30) >= SMALLEST_NORMAL[fa.dtype]


def _floordiv_rule(fa, fb, shape):
    if fa.is_float and not _float_floordiv_ok(fa, fb):
        return None
    mag = fa.mag / fb.nonzero_bound() + 1
    return Facts(shape, fa.dtype, -mag, mag, 0.0, 1.0)


def _mod_rule(fa, fb, shape):
    grid = min(fa.grid, fb.grid)
    if fa.is_float and not on_grid(fa.dtype, grid, fb.mag):
        return None
    return Facts(shape, fa.dtype, -fb.mag, fb.mag, 0.0, grid)


def _truncdiv_rule(fa, fb, shape):
    return Facts(shape, fa.dtype, -fa.mag, fa.mag, 0.0, 1.0)


_binary("add", tf.add, NUMERIC, _add_rule(1))
_binary("sub", tf.subtract, NUMERIC, _add_rule(-1))
_binary("mul", tf.multiply, NUMERIC, _mul_rule)
_binary("maximum", tf.maximum, NUMERIC, lambda fa, fb, s: _extreme_rule(fa, fb, s, max))
_binary("minimum", tf.minimum, NUMERIC, lambda fa, fb, s: _extreme_rule(fa, fb, s, min))
_binary("div", tf.math.truediv, FLOATS, _div_rule, divisor=_float_divisor)
_binary("floordiv", tf.math.floordiv, NUMERIC, _floordiv_rule, exact_only=True,
        divisor=lambda f: _int_divisor(f) if f.dtype == "int32" else f.nonzero_bound() > 0)
_binary("floormod", tf.math.floormod, NUMERIC, _mod_rule, exact_only=True,
        divisor=lambda f: _int_divisor(f) if f.dtype == "int32" else f.nonzero_bound() > 0)
_binary("truncatediv", tf.truncatediv, ("int32",), _truncdiv_rule, divisor=_int_divisor)
_binary("truncatemod", tf.truncatemod, ("int32",), _mod_rule, divisor=_int_divisor)


def _predicate(fa, fb, shape):
    return Facts(shape, "bool", 0, 1)


for _name, _fn in (("equal", tf.equal), ("not_equal", tf.not_equal), ("less", tf.less),
                   ("less_equal", tf.less_equal), ("greater", tf.greater),
                   ("greater_equal", tf.greater_equal)):
    _binary(_name, _fn, NUMERIC, _predicate, exact_only=True)
for _name, _fn in (("logical_and", tf.logical_and), ("logical_or", tf.logical_or)):
    _binary(_name, _fn, ("bool",), _predicate)
_unary("logical_not", tf.logical_not, ("bool",), lambda f: Facts(f.shape, "bool", 0, 1))


# ------------------------------------------------------------ select and cast


def _where(cond, x, y):
    return tf.where(cond, x, y)


@fuzz_op("where", _where)
def _draw_where(b):
    x = b.pick(lambda f: f.dtype != "bool")
    if x is None:
        return None
    c = _second_operand(b, x, dtype="bool")
    y = _second_operand(b, x)
    fc, fx, fy = b.facts[c], b.facts[x], b.facts[y]
    shape = _out_shape(fc, fx, fy)
    if shape is None:
        return None
    exact = fx.exact and fy.exact
    facts = Facts(shape, fx.dtype, min(fx.lo, fy.lo), max(fx.hi, fy.hi), max(fx.err, fy.err),
                  min(fx.grid, fy.grid) if exact else 0.0, min(fx.nz, fy.nz))
    return b.emit("where", [c, x, y], facts)


def _cast(x, dtype):
    return tf.cast(x, dtype)


def _cast_facts(f, dtype):
    """Facts of casting f to dtype, or None where the cast is not reproducible."""
    if f.dtype == "bool" or dtype == "bool":
        return Facts(f.shape, dtype, 0, 1) if f.exact else None
    if dtype == "int32":
        return Facts(f.shape, dtype, math.trunc(f.lo), math.trunc(f.hi)) if f.exact else None
    if f.dtype == "int32":
        return computed(f.shape, dtype, f.lo, f.hi, grid=1.0)
    if dtype == "float32":  # float16 -> float32 is exact
        return Facts(f.shape, dtype, f.lo, f.hi, f.err, f.grid, f.nz)
    return computed(f.shape, dtype, f.lo, f.hi, grid=f.grid, err=f.err, nz=f.nz)


@fuzz_op("cast", _cast)
def _draw_cast(b):
    x = b.pick(lambda f: True)
    if x is None:
        return None
    f = b.facts[x]
    dtype = b.choice([d for d in ("float32", "float16", "int32", "bool") if d != f.dtype])
    return b.emit("cast", [x], _cast_facts(f, dtype), dtype=dtype)

