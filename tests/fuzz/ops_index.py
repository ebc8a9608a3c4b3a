"""Fuzz ops of the indexing family: gather, gather_nd, one_hot, scatter_nd and
tensor_scatter_nd_update/add.

Indices are in range by construction (TensorFlow raises on out-of-range gather
indices on the CPU, so such graphs have no oracle), except one_hot, where TensorFlow
defines out-of-range indices as all-off rows and any int32 value may flow in, and one
fresh gather index input in six, drawn up to two past the end: when TensorFlow rejects
it, the simulator must raise a designed error (`check.py`).
Float scatters get distinct index rows: with duplicates the summation order, and for
updates the winner, is unspecified. Integer scatter-adds may repeat rows: their sums
are exact in any order.
"""
import itertools

import numpy as np
import tensorflow as tf
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.fuzz.facts import Facts, computed
from tests.fuzz.graph import fuzz_op

_SCATTERABLE = ("float32", "float16", "int32")


def _index_input(b, dims, count, unique):
    """A fresh int32 input of `count` index rows into `dims` (shape [count, len(dims)])."""
    if unique:
        rows = b.draw_permutation(itertools.product(*(range(d) for d in dims)))[:count]
    else:
        rows = [tuple(b.integer(0, d - 1) for d in dims) for _ in range(count)]
    array = np.array(rows, np.int32).reshape(count, len(dims))
    hi = max(dims) - 1 if dims else 0
    return b.add_input(array, Facts(array.shape, "int32", 0, hi))


def _gather(params, indices, axis, batch_dims):
    return tf.gather(params, indices, axis=axis, batch_dims=batch_dims)


@fuzz_op("gather", _gather)
def _draw_gather(b):
    x = b.pick(lambda f: f.rank >= 1 and max(f.shape) > 0)
    if x is None:
        return None
    f = b.facts[x]
    batch_dims = 1 if f.rank >= 2 and b.integer(0, 2) == 0 else 0
    axis = b.integer(batch_dims, f.rank - 1) - (f.rank if b.flag() else 0)
    d = f.shape[axis]
    if d == 0:
        return None
    found = b.candidates(lambda g: g.dtype == "int32" and g.lo >= 0 and g.hi <= d - 1
                         and g.rank <= 2 and g.shape[:batch_dims] == f.shape[:batch_dims])
    if found and b.flag():
        i = b.choice(found)
    else:  # one fresh index input in six may point past the end: both sides must reject it
        high = d + 2 if b.integer(0, 5) == 0 else d
        i = b.fresh(f.shape[:batch_dims] + b.shape(0, 2 - batch_dims), "int32", "index",
                    high=high)
    a = axis % f.rank
    shape = f.shape[:a] + b.facts[i].shape[batch_dims:] + f.shape[a + 1:]
    return b.emit("gather", [x, i], Facts(shape, f.dtype, f.lo, f.hi, f.err, f.grid, f.nz),
                  axis=axis, batch_dims=batch_dims)


@fuzz_op("gather_nd", tf.gather_nd)
def _draw_gather_nd(b):
    x = b.pick(lambda f: f.rank >= 1 and f.size > 0)  # TF raises on empty params
    if x is None:
        return None
    f = b.facts[x]
    k = b.integer(1, f.rank)
    if 0 in f.shape[:k]:
        return None
    batch = b.shape(0, 2)
    columns = [b.draw(hnp.arrays(np.int32, batch, elements=st.integers(0, d - 1),
                                    fill=st.nothing()))
               for d in f.shape[:k]]
    array = np.stack(columns, axis=-1).astype(np.int32)
    i = b.add_input(array, Facts(array.shape, "int32", 0, max(f.shape[:k]) - 1))
    shape = batch + f.shape[k:]
    return b.emit("gather_nd", [x, i], Facts(shape, f.dtype, f.lo, f.hi, f.err, f.grid, f.nz))


def _one_hot(indices, depth, on, off, axis, dtype):
    return tf.one_hot(indices, depth, on_value=tf.constant(on, dtype),
                      off_value=tf.constant(off, dtype), axis=axis, dtype=dtype)


@fuzz_op("one_hot", _one_hot)
def _draw_one_hot(b):
    i = b.pick(lambda f: f.dtype == "int32" and f.rank <= 2)
    if i is None:
        return None
    f = b.facts[i]
    depth = b.integer(0, 4)
    axis = b.integer(-1, f.rank)
    dtype = b.choice(_SCATTERABLE)
    on, off = b.integer(-8, 8) / 4, b.integer(-8, 8) / 4
    if dtype == "int32":
        on, off = int(on * 4), int(off * 4)
    shape = list(f.shape)
    shape.insert(axis % (f.rank + 1), depth)
    grid = 1.0 if dtype == "int32" else 0.25
    facts = Facts(tuple(shape), dtype, min(on, off), max(on, off), 0.0, grid)
    return b.emit("one_hot", [i], facts, depth=depth, on=on, off=off, axis=axis, dtype=dtype)


def _scatter_nd(indices, updates, shape):
    return tf.scatter_nd(indices, updates, shape)


@fuzz_op("scatter_nd", _scatter_nd)
def _draw_scatter_nd(b):
    u = b.pick(lambda f: f.dtype in _SCATTERABLE and f.rank >= 1 and f.shape[0] <= 6)
    if u is None:
        return None
    fu = b.facts[u]
    count = fu.shape[0]
    dims = tuple(b.choice((2, 3, 4, 1)) for _ in range(b.integer(1, 2)))
    unique = fu.dtype != "int32" or b.flag()
    if unique and np.prod(dims) < count or (0 in fu.shape and count):
        return None  # TF's shape inference rejects updates into an empty target
    i = _index_input(b, dims, count, unique)
    shape = dims + fu.shape[1:]
    hits = 1 if unique else max(count, 1)
    facts = Facts(shape, fu.dtype, hits * min(fu.lo, 0), hits * max(fu.hi, 0), fu.err, fu.grid)
    return b.emit("scatter_nd", [i, u], facts, shape=shape)


def _tensor_scatter(name, build, dtypes, rule):
    @fuzz_op(name, build)
    def draw(b):
        # TF raises on indices into an empty tensor.
        t = b.pick(lambda f: f.dtype in dtypes and f.rank >= 1 and f.size > 0)
        if t is None:
            return None
        ft = b.facts[t]
        k = b.integer(1, ft.rank)
        if 0 in ft.shape[:k]:
            return None
        unique = name.endswith("update") or ft.dtype != "int32" or b.flag()
        count = b.integer(0, min(4, int(np.prod(ft.shape[:k]))))
        i = _index_input(b, ft.shape[:k], count, unique)
        u = b.pick_or_fresh((count,) + ft.shape[k:], ft.dtype)
        return b.emit(name, [t, i, u], rule(ft, b.facts[u], 1 if unique else max(count, 1)))


def _update_rule(ft, fu, hits):
    exact = ft.exact and fu.exact
    return Facts(ft.shape, ft.dtype, min(ft.lo, fu.lo), max(ft.hi, fu.hi), max(ft.err, fu.err),
                 min(ft.grid, fu.grid) if exact else 0.0)


def _add_rule(ft, fu, hits):
    lo, hi = ft.lo + hits * min(fu.lo, 0), ft.hi + hits * max(fu.hi, 0)
    return computed(ft.shape, ft.dtype, lo, hi, grid=min(ft.grid, fu.grid),
                    err=ft.err + hits * fu.err)


_tensor_scatter("tensor_scatter_nd_update", tf.tensor_scatter_nd_update,
                _SCATTERABLE + ("bool",), _update_rule)
_tensor_scatter("tensor_scatter_nd_add", tf.tensor_scatter_nd_add, _SCATTERABLE, _add_rule)
