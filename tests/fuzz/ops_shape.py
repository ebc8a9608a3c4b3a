"""Fuzz ops that move elements without arithmetic: reshape, transpose, concat, slice,
strided_slice, tile, pad (constant and mirror), squeeze, expand_dims, reverse and
broadcast_to. They keep their input's facts (interval, error, grid); padding adds
its fill value.
"""
import dataclasses
import math

import numpy as np
import tensorflow as tf

from tests.fuzz.facts import Facts
from tests.fuzz.graph import fuzz_op


def _moved(f, shape, **changes):
    return dataclasses.replace(f, shape=tuple(shape), **changes)


def _any(b):
    return b.pick(lambda f: True)


def _reshape_target(b, shape):
    size = math.prod(shape)
    rank = b.integer(0, 4)
    if size == 0:
        dims = [b.choice((0, 1, 2, 3)) for _ in range(max(rank, 1))]
        dims[b.integer(0, len(dims) - 1)] = 0
        return tuple(dims)
    dims, left = [], size
    for _ in range(rank - 1):
        d = b.choice([d for d in range(1, left + 1) if left % d == 0][:6])
        dims.append(d)
        left //= d
    if rank == 0 and left != 1:
        dims.append(left)
    elif rank:
        dims.append(left)
    return tuple(dims)


def _reshape(x, shape, infer):
    if infer is not None:
        shape = list(shape)
        shape[infer] = -1
    return tf.reshape(x, shape)


@fuzz_op("reshape", _reshape)
def _draw_reshape(b):
    x = _any(b)
    f = b.facts[x]
    shape = _reshape_target(b, f.shape)
    infer = None
    if shape and 0 not in shape and b.flag():
        infer = b.integer(0, len(shape) - 1)
    return b.emit("reshape", [x], _moved(f, shape), shape=shape, infer=infer)


@fuzz_op("transpose", lambda x, perm: tf.transpose(x, perm))
def _draw_transpose(b):
    x = b.pick(lambda f: f.rank >= 2)
    if x is None:
        return None
    f = b.facts[x]
    perm = tuple(b.draw_permutation(range(f.rank)))
    return b.emit("transpose", [x], _moved(f, [f.shape[p] for p in perm]), perm=perm)


@fuzz_op("concat", lambda *xs, axis: tf.concat(list(xs), axis))
def _draw_concat(b):
    x = b.pick(lambda f: f.rank >= 1)
    if x is None:
        return None
    f = b.facts[x]
    axis = b.integer(-f.rank, f.rank - 1)
    other = list(f.shape)
    other[axis] = b.dim()
    y = b.pick_or_fresh(tuple(other), f.dtype)
    fy = b.facts[y]
    shape = list(f.shape)
    shape[axis] += other[axis]
    exact = f.exact and fy.exact
    facts = Facts(tuple(shape), f.dtype, min(f.lo, fy.lo), max(f.hi, fy.hi), max(f.err, fy.err),
                  min(f.grid, fy.grid) if exact else 0.0, min(f.nz, fy.nz))
    return b.emit("concat", [x, y], facts, axis=axis)


@fuzz_op("slice", lambda x, begin, size: tf.slice(x, begin, size))
def _draw_slice(b):
    x = b.pick(lambda f: f.rank >= 1)
    if x is None:
        return None
    f = b.facts[x]
    begin, size, shape = [], [], []
    for d in f.shape:
        start = b.integer(0, d)
        length = b.integer(-1, d - start)
        begin.append(start)
        size.append(length)
        shape.append(d - start if length == -1 else length)
    return b.emit("slice", [x], _moved(f, shape), begin=tuple(begin), size=tuple(size))


def _index_from_spec(spec):
    """Python indexing key from a hashable spec: ("s", start, stop, step) / ("i", k) / "new"."""
    key = []
    for item in spec:
        if item == "new":
            key.append(tf.newaxis)
        elif item == "...":
            key.append(Ellipsis)
        elif item[0] == "i":
            key.append(item[1])
        else:
            key.append(slice(*item[1:]))
    return tuple(key)


def _strided_slice(x, spec):
    return x[_index_from_spec(spec)]


def _slice_item(b, d):
    if d > 0 and b.integer(0, 4) == 0:
        return ("i", b.integer(-d, d - 1))
    start, stop = (None if b.flag() else b.integer(-d - 1, d + 1) for _ in range(2))
    return ("s", start, stop, b.choice([None, 1, 2, -1, -2, 3]))


@fuzz_op("strided_slice", _strided_slice)
def _draw_strided_slice(b):
    x = b.pick(lambda f: f.rank >= 1)
    if x is None:
        return None
    f = b.facts[x]
    spec = [_slice_item(b, d) for d in f.shape[:b.integer(1, f.rank)]]
    if b.integer(0, 3) == 0:
        spec.insert(b.integer(0, len(spec)), "new")
    if b.integer(0, 3) == 0:
        spec.insert(b.integer(0, len(spec)), "...")
    try:  # an ellipsis can move an integer index onto a shorter axis
        shape = np.empty(f.shape)[_index_from_spec(spec)].shape
    except IndexError:
        return None
    return b.emit("strided_slice", [x], _moved(f, shape), spec=tuple(spec))


@fuzz_op("tile", lambda x, multiples: tf.tile(x, multiples))
def _draw_tile(b):
    x = b.pick(lambda f: f.rank >= 1)
    if x is None:
        return None
    f = b.facts[x]
    multiples = tuple(b.choice((1, 2, 3, 0)) for _ in f.shape)
    shape = [d * m for d, m in zip(f.shape, multiples)]
    return b.emit("tile", [x], _moved(f, shape), multiples=multiples)


def _pad(x, paddings, mode, value):
    if mode == "CONSTANT":
        return tf.pad(x, paddings, constant_values=tf.cast(value, x.dtype))
    return tf.pad(x, paddings, mode=mode)


@fuzz_op("pad", _pad)
def _draw_pad(b):
    x = b.pick(lambda f: f.rank >= 1)
    if x is None:
        return None
    f = b.facts[x]
    mode = b.choice(["CONSTANT", "REFLECT", "SYMMETRIC"])
    limit = {"CONSTANT": lambda d: 2, "REFLECT": lambda d: d - 1, "SYMMETRIC": lambda d: d}[mode]
    if any(limit(d) < 0 for d in f.shape):
        return None
    paddings = tuple((b.integer(0, min(2, limit(d))), b.integer(0, min(2, limit(d))))
                     for d in f.shape)
    shape = [d + lo + hi for d, (lo, hi) in zip(f.shape, paddings)]
    value = 0
    facts = _moved(f, shape)
    if mode == "CONSTANT":
        value = {"bool": b.choice((0, 1)), "int32": b.integer(-3, 3)}.get(
            f.dtype, b.integer(-8, 8) / 4)
        grid = min(f.grid, 0.25) if f.is_float and f.exact else f.grid
        facts = _moved(f, shape, lo=min(f.lo, value), hi=max(f.hi, value), nz=0.0, grid=grid)
    return b.emit("pad", [x], facts, paddings=paddings, mode=mode, value=value)


def _squeeze(x, axis):
    return tf.squeeze(x, axis=list(axis) if axis is not None else None)


@fuzz_op("squeeze", _squeeze)
def _draw_squeeze(b):
    x = b.pick(lambda f: 1 in f.shape)
    if x is None:
        return None
    f = b.facts[x]
    ones = [i for i, d in enumerate(f.shape) if d == 1]
    axis = None if b.flag() else tuple(i - f.rank if b.flag() else i for i in ones if b.flag())
    axis = axis or None  # tf.squeeze reads an empty axis list as "all size-1 axes"
    drop = ones if axis is None else [a % f.rank for a in axis]
    shape = [d for i, d in enumerate(f.shape) if i not in drop]
    return b.emit("squeeze", [x], _moved(f, shape), axis=axis)


@fuzz_op("expand_dims", lambda x, axis: tf.expand_dims(x, axis))
def _draw_expand_dims(b):
    x = b.pick(lambda f: f.rank <= 3)
    if x is None:
        return None
    f = b.facts[x]
    axis = b.integer(-f.rank - 1, f.rank)
    shape = list(f.shape)
    shape.insert(axis % (f.rank + 1), 1)
    return b.emit("expand_dims", [x], _moved(f, shape), axis=axis)


@fuzz_op("reverse", lambda x, axis: tf.reverse(x, list(axis)))
def _draw_reverse(b):
    x = b.pick(lambda f: f.rank >= 1)
    if x is None:
        return None
    f = b.facts[x]
    axis = tuple(a - f.rank if b.flag() else a for a in range(f.rank) if b.flag())
    return b.emit("reverse", [x], _moved(f, f.shape), axis=axis)


@fuzz_op("broadcast_to", lambda x, shape: tf.broadcast_to(x, shape))
def _draw_broadcast_to(b):
    x = b.pick(lambda f: f.rank <= 3)
    if x is None:
        return None
    f = b.facts[x]
    shape = [b.choice((2, 3)) if d == 1 and b.flag() else d for d in f.shape]
    if b.flag():
        shape.insert(0, b.choice((1, 2)))
    return b.emit("broadcast_to", [x], _moved(f, shape), shape=tuple(shape))
