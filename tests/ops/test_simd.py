"""ops/simd.py: each formulation gives the same bits as the numpy call it replaces."""
import numpy as np
import pytest

from ipu_keras._src.ops import simd

SPECIAL = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 7.0, -7.0])
# Sizes below the fast path, a whole number of rows, and rows plus a tail.
SIZES = (7, simd._SMALL, 3 * simd._ROW, 2 * simd._ROW + 1235)


def _data(size, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(size) * 8).astype(dtype)
    x[rng.integers(0, size, min(size, 64))] = SPECIAL[rng.integers(0, len(SPECIAL),
                                                                   min(size, 64))]
    return x


def _same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("ufunc", [np.maximum, np.minimum])
@pytest.mark.parametrize("value", [0, 6, -2.5, np.nan])
def test_against_equals_the_scalar_call(ufunc, size, dtype, value):
    x = _data(size, dtype).reshape(-1, 1) if size % 2 else _data(size, dtype).reshape(2, -1)
    _same_bits(simd.against(ufunc, x, value), ufunc(x, value))


@pytest.mark.parametrize("value", [np.float32(-0.0), np.array(3.5, np.float32),
                                   np.array([[2.0]], np.float32), np.float64(1.0),
                                   np.array([[1.0]], np.float64)])
def test_against_takes_one_element_arrays_and_numpy_scalars(value):
    x = _data(3 * simd._ROW, np.float32)
    _same_bits(simd.against(np.maximum, x, value), np.maximum(x, value))


@pytest.mark.parametrize("x", [np.arange(5 * simd._ROW, dtype=np.int32),
                               _data(4 * simd._ROW, np.float32).reshape(64, -1)[:, ::2]],
                         ids=["int", "strided"])
def test_against_falls_back_where_it_does_not_apply(x):
    _same_bits(simd.against(np.minimum, x, 3), np.minimum(x, 3))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "int64", "bool"])
@pytest.mark.parametrize("size", SIZES)
def test_select_equals_where(dtype, size):
    rng = np.random.default_rng(1)
    cond = rng.random(size) < 0.5
    with np.errstate(invalid="ignore"):
        x, y = (_data(size, "float64", seed).astype(dtype) for seed in (2, 3))
    _same_bits(simd.select(cond, x, y), np.where(cond, x, y))


@pytest.mark.parametrize("y", [np.float32(0), np.float32(-0.0), np.float32(2), np.float32(np.nan)],
                         ids=["zero", "negative-zero", "two", "nan"])
def test_select_with_a_scalar_branch(y):
    rng = np.random.default_rng(4)
    cond = rng.random((64, 1600)) < 0.5
    x = _data(64 * 1600, np.float32).reshape(64, 1600)
    _same_bits(simd.select(cond, x, np.asarray(y)), np.where(cond, x, y))
    _same_bits(simd.select(cond, np.asarray(y), x), np.where(cond, y, x))


def test_select_broadcasts_like_where():
    rng = np.random.default_rng(5)
    cond = rng.random((64, 1, 32)) < 0.5
    x = _data(64 * 32, np.float32).reshape(1, 64, 1, 32)
    y = _data(200, np.float32).reshape(200, 1, 1, 1)
    _same_bits(simd.select(cond, x, y), np.where(cond, x, y))


def test_select_leaves_other_dtypes_to_where():
    cond = np.random.default_rng(6).random(5000) < 0.5
    x = np.arange(5000).astype(np.complex128)
    _same_bits(simd.select(cond, x, x * 1j), np.where(cond, x, x * 1j))


@pytest.mark.parametrize("shape,pads,value", [
    ((4, 4, 4, 256), ((0, 0), (1, 1), (1, 1), (0, 0)), 0),
    ((3, 5, 7), ((2, 0), (0, 3), (1, 1)), -np.inf),
    ((0, 2), ((1, 1), (2, 0)), 7),
    ((6,), ((0, 0),), 1),
], ids=["conv-slab", "uneven", "empty", "none"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32"])
def test_pad_equals_np_pad(shape, pads, value, dtype):
    if np.dtype(dtype).kind == "i" and not np.isfinite(value):
        value = np.iinfo(dtype).min
    x = _data(max(int(np.prod(shape)), 1), "float64")[:int(np.prod(shape))]
    with np.errstate(invalid="ignore"):
        x = x.astype(dtype).reshape(shape)
    _same_bits(simd.pad(x, pads, value), np.pad(x, pads, constant_values=value))


def test_pad_keeps_the_bits_of_a_negative_zero_fill():
    x = np.ones((2, 3), np.float32)
    _same_bits(simd.pad(x, ((1, 0), (0, 1)), np.float32(-0.0)),
               np.pad(x, ((1, 0), (0, 1)), constant_values=np.float32(-0.0)))
