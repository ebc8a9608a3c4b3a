"""Fuzz ops of the matmul and reduction families: matmul (batched, broadcast, transposed),
reduce_sum/mean/max/min/prod/any/all over random axes with keepdims, argmax/argmin.
"""
import math

import tensorflow as tf

from tests.fuzz.facts import FLOATS, SMALLEST_NORMAL, Facts, computed, mul_interval, unit_roundoff
from tests.fuzz.graph import fuzz_op

NUMERIC = FLOATS + ("int32",)


# ------------------------------------------------------------------------ matmul


def _matmul(a, b, transpose_a, transpose_b):
    return tf.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b)


def _matmul_facts(fa, fb, shape, depth):
    lo, hi = mul_interval(fa.lo, fa.hi, fb.lo, fb.hi)
    lo, hi = depth * min(lo, 0), depth * max(hi, 0)
    mag = max(-lo, hi)
    err = depth * (fa.mag * fb.err + fb.mag * fa.err + fa.err * fb.err)
    rounding_err = depth * unit_roundoff(fa.dtype) * mag + _tiny(fa.dtype) if fa.is_float else 0
    return computed(shape, fa.dtype, lo, hi, grid=fa.grid * fb.grid, err=err,
                    rounding_err=rounding_err)


@fuzz_op("matmul", _matmul)
def _draw_matmul(b):
    x = b.pick(lambda f: f.dtype in NUMERIC and f.rank in (2, 3))
    if x is None:
        return None
    fa = b.facts[x]
    ta, tb = b.flag(), b.flag()
    *batch, m, k = fa.shape
    if ta:
        m, k = k, m
    n = b.dim()
    b_batch = [b.choice((batch[0], 1))] if batch and b.flag() else []
    b_shape = tuple(b_batch) + ((n, k) if tb else (k, n))
    y = b.pick_or_fresh(b_shape, fa.dtype)
    fb = b.facts[y]
    shape = tuple(batch) + (m, n)
    return b.emit("matmul", [x, y], _matmul_facts(fa, fb, shape, k),
                  transpose_a=ta, transpose_b=tb)


# -------------------------------------------------------------------- reductions


def _axes(b, rank):
    """None (all axes), one axis, or a tuple of distinct axes; negative ones too."""
    mode = b.integer(0, 2) if rank else 0
    if mode == 0:
        return None
    if mode == 1:
        return b.integer(-rank, rank - 1)
    chosen = [a for a in range(rank) if b.flag()]
    return tuple(a - rank if b.flag() else a for a in chosen)


def _normal(axis, rank):
    if axis is None:
        return tuple(range(rank))
    axes = axis if isinstance(axis, tuple) else (axis,)
    return tuple(sorted(a % rank for a in axes))


def _reduced(shape, axes, keepdims):
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _sum_facts(f, shape, n):
    if n == 0:
        return Facts(shape, f.dtype, 0, 0, 0.0, max(f.grid, 1.0) if f.exact else 0.0)
    lo, hi = n * f.lo, n * f.hi
    mag = max(abs(lo), abs(hi))
    rounding_err = (n - 1) * unit_roundoff(f.dtype) * mag if f.is_float else 0.0
    return computed(shape, f.dtype, lo, hi, grid=f.grid, err=n * f.err,
                    rounding_err=rounding_err + _tiny(f.dtype))


def _tiny(dtype):
    return SMALLEST_NORMAL.get(dtype, 0.0)


def _mean_facts(f, shape, n):
    if n == 0:
        return Facts(shape, f.dtype, 0, 0, 0.0, 1.0, terminal=True) if f.is_float else None
    if not f.is_float:
        return Facts(shape, f.dtype, f.lo, f.hi)
    rounding_err = (n + 1) * unit_roundoff(f.dtype) * f.mag + 2 * _tiny(f.dtype)
    return computed(shape, f.dtype, f.lo, f.hi, err=f.err, rounding_err=rounding_err)


def _extreme_facts(f, shape, n):
    if n == 0:
        return Facts(shape, f.dtype, 0, 0, 0.0, 1.0, terminal=True)
    return Facts(shape, f.dtype, f.lo, f.hi, f.err, f.grid, f.nz)


def _prod_facts(f, shape, n):
    if not f.exact:
        return None
    if n == 0:
        return Facts(shape, f.dtype, 1, 1, 0.0, 1.0)
    mag = f.mag ** n
    lo = f.lo ** n if f.lo >= 0 else -mag
    rounding_err = n * unit_roundoff(f.dtype) * mag + _tiny(f.dtype) if f.is_float else 0.0
    return computed(shape, f.dtype, lo, mag, grid=f.grid ** n, rounding_err=rounding_err)


def _bool_facts(f, shape, n):
    return Facts(shape, "bool", 0, 1)


def _reduction(name, build, dtypes, rule):
    def run(x, axis, keepdims):
        return build(x, axis=list(axis) if isinstance(axis, tuple) else axis, keepdims=keepdims)

    @fuzz_op(name, run)
    def draw(b):
        x = b.pick(lambda f: f.dtype in dtypes)
        if x is None:
            return None
        f = b.facts[x]
        axis, keepdims = _axes(b, f.rank), b.flag()
        axes = _normal(axis, f.rank)
        n = math.prod(f.shape[a] for a in axes)
        shape = _reduced(f.shape, axes, keepdims)
        return b.emit(name, [x], rule(f, shape, n), axis=axis, keepdims=keepdims)


_reduction("reduce_sum", tf.reduce_sum, NUMERIC, _sum_facts)
_reduction("reduce_mean", tf.reduce_mean, NUMERIC, _mean_facts)
_reduction("reduce_max", tf.reduce_max, NUMERIC, _extreme_facts)
_reduction("reduce_min", tf.reduce_min, NUMERIC, _extreme_facts)
_reduction("reduce_prod", tf.reduce_prod, NUMERIC, _prod_facts)
_reduction("reduce_any", tf.reduce_any, ("bool",), _bool_facts)
_reduction("reduce_all", tf.reduce_all, ("bool",), _bool_facts)


def _arg(name, build):
    def run(x, axis):
        return build(x, axis=axis, output_type=tf.int32)

    @fuzz_op(name, run)
    def draw(b):
        x = b.pick(lambda f: f.dtype in NUMERIC and f.exact and f.rank > 0)
        if x is None:
            return None
        f = b.facts[x]
        axis = b.integer(-f.rank, f.rank - 1)
        d = f.shape[axis]
        if d == 0:
            return None
        shape = tuple(s for i, s in enumerate(f.shape) if i != axis % f.rank)
        return b.emit(name, [x], Facts(shape, "int32", 0, d - 1), axis=axis)


_arg("argmax", tf.math.argmax)
_arg("argmin", tf.math.argmin)
