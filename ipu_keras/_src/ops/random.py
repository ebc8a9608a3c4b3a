"""Op family 'random': TensorFlow's stateless random ops, bit for bit.

Owns `random_key_counter` (a seed scrambled into a Philox key and counter) and one op
per distribution: `random_uniform`, `random_normal`, `random_truncated_normal`,
`random_uniform_int`, `random_uniform_full_int`, each `(key, counter, ...) -> sample`
with the output `shape` and `dtype` in params. Keras 3 draws every random number
(initializers, Dropout, GaussianNoise, `keras.random.*`) through these ops, with the
seed kept in a variable that the traced step updates.

The kernels follow TensorFlow's CPU kernels exactly:

* Philox 4x32-10: a 64-bit key and a 128-bit counter give four uint32 per block; block
  `j` of a stream uses counter + j. Outputs take blocks in order, so element `i` of a
  float32 sample comes from uint32 `i` of the stream.
* uniform floats set the mantissa from random bits (a value in [1, 2)) and subtract 1;
  integers reduce modulo the range; 64-bit types use two uint32 per element.
* normal uses Box-Muller on pairs of uint32 with TensorFlow's float32 operations. glibc's
  `logf` and `sincosf` (which TensorFlow calls) are not correctly rounded, so they are
  emulated here from glibc's published algorithm and tables; float64 normals use numpy's
  `log`, which differs from glibc's in the last bit for ~0.3% of values.
* truncated normal draws groups of 4 outputs (2 for float64), each group from its own
  window of 256 Philox blocks, keeping Box-Muller values with |x| < 2 in order.
"""
import sys

import numpy as np

from ipu_keras.errors import UnsupportedOpError
from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops._common import per_output_element
from ipu_keras._src.ops.registry import register_op, tf_import

TF_TYPES = (
    "StatelessRandomGetKeyCounter", "StatelessRandomGetKeyCounterAlg", "StatelessRandomGetAlg",
    "StatelessRandomUniformV2", "StatelessRandomNormalV2", "StatelessTruncatedNormalV2",
    "StatelessRandomUniformIntV2", "StatelessRandomUniformFullIntV2",
    "StatelessRandomUniform", "StatelessRandomNormal", "StatelessTruncatedNormal",
    "StatelessRandomUniformInt", "StatelessRandomUniformFullInt",
)
"""The TensorFlow op types this module imports."""

IR_OPS = (
    "random_key_counter", "random_uniform", "random_normal", "random_truncated_normal",
    "random_uniform_int", "random_uniform_full_int",
)
"""The IR ops this module registers."""

PHILOX, AUTO_SELECT = 1, 3
"""TensorFlow's algorithm ids: Philox, the only one simulated, and auto-select, which
TensorFlow's CPU kernels resolve to Philox."""

_U32, _U64 = np.uint32, np.uint64
_HIGH = int(sys.byteorder == "little")  # the index of a uint64's high uint32 word
_SEED_KEY = (0x3EC8F720, 0x02461E29)
_ROUNDS = 10
_GROUP_BLOCKS = 256  # Philox blocks reserved per output of a truncated normal group.
_MULTIPLIERS = np.array([[0xD2511F53], [0xCD9E8D57]], np.uint64)  # of counter words 0, 2

# -- Philox 4x32-10 -------------------------------------------------------------------------


def _philox(low, high, k):
    """Ten Philox rounds on the 128-bit counters `(low, high)` (uint64 arrays of one
    shape) under the 64-bit key `k` (a Python int); returns the blocks, shape + (4,) uint32.

    Per round the two multiplied words `(c0, c2)` are one (2, n) array and the other two
    `(c1, c3)` another: one product in uint64 gives both 32x32-bit products, viewed in
    reverse order as `(c2 * M1, c0 * M0)`: their high halves xored with `(c1, c3)` and the
    round key are the next `(c0, c2)`, their low halves the next `(c1, c3)` (a view). Two
    product buffers alternate, as one round's low halves are read after the next round's
    product."""
    shape, n = np.shape(low), np.size(low)
    counters = [_words(np.reshape(low, -1)), _words(np.reshape(high, -1))]
    mixed = np.stack([counters[0][0], counters[1][0]])           # c0, c2
    passed = np.stack([counters[0][1], counters[1][1]])          # c1, c3
    products = (np.empty((2, n), _U64), np.empty((2, n), _U64))
    keys = np.empty((2, 1), _U32)
    k0, k1 = k & 0xFFFFFFFF, k >> 32
    for r in range(_ROUNDS):
        halves = np.multiply(mixed, _MULTIPLIERS, out=products[r % 2]).view(_U32)
        halves = halves.reshape(2, n, 2)[::-1]   # (c2 * M1, c0 * M0) as (low, high) words
        keys[:, 0] = k0, k1
        np.bitwise_xor(halves[..., _HIGH], passed, out=mixed)
        mixed ^= keys
        passed = halves[..., 1 - _HIGH]
        k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
    blocks = np.empty((n, 2, 2), _U32)
    blocks[:, :, 0], blocks[:, :, 1] = mixed.T, passed.T
    return blocks.reshape(shape + (4,))


def _philox_ints(c0, c1, c2, c3, k0, k1):
    """`_philox` on one block held in Python ints (the four counter words and the key's
    two): a seed's scrambling costs microseconds instead of numpy's per-call overheads."""
    for _ in range(_ROUNDS):
        p0, p1 = c0 * 0xD2511F53, c2 * 0xCD9E8D57
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & 0xFFFFFFFF, (p0 >> 32) ^ c3 ^ k1, \
            p0 & 0xFFFFFFFF
        k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
    return c0, c1, c2, c3


def _words(x):
    """uint64 values as their (low, high) uint32 words."""
    w = np.ascontiguousarray(x, _U64).view(_U32).reshape(np.shape(x) + (2,))
    return w[..., 1 - _HIGH], w[..., _HIGH]


def _blocks(key, counter, index):
    """Philox blocks `index` (uint64 array) of the stream (key, counter): shape index+(4,)."""
    key, counter = np.asarray(key, _U64).reshape(-1), np.asarray(counter, _U64).reshape(-1)
    with np.errstate(over="ignore"):
        low = counter[0] + np.asarray(index, _U64)
        high = counter[1] + (low < counter[0]).astype(_U64)
    return _philox(low, high, int(key[0]))


def _stream(key, counter, count):
    """The first `count` uint32 of the stream, in order."""
    blocks = _blocks(key, counter, np.arange(-(-count // 4), dtype=_U64))
    return blocks.reshape(-1)[:count]


def _key_counter(seed):
    """TensorFlow's GenerateKey: a [2] int seed scrambled by one Philox block."""
    s = [int(v) & 0xFFFFFFFFFFFFFFFF for v in np.asarray(seed).astype(np.int64).reshape(-1)]
    w = _philox_ints(s[0] & 0xFFFFFFFF, s[0] >> 32, s[1] & 0xFFFFFFFF, s[1] >> 32, *_SEED_KEY)
    return (np.array([w[0] | w[1] << 32], _U64),
            np.array([0, w[2] | w[3] << 32], _U64))


# -- glibc's logf and sincosf, which TensorFlow's float32 Box-Muller calls ------------------

_H = float.fromhex
_LOGF_TABLE = np.array([[_H(a), _H(b)] for a, b in (
    ("0x1.661ec79f8f3bep+0", "-0x1.57bf7808caadep-2"), ("0x1.571ed4aaf883dp+0",
     "-0x1.2bef0a7c06ddbp-2"), ("0x1.49539f0f010bp+0", "-0x1.01eae7f513a67p-2"),
    ("0x1.3c995b0b80385p+0", "-0x1.b31d8a68224e9p-3"), ("0x1.30d190c8864a5p+0",
     "-0x1.6574f0ac07758p-3"), ("0x1.25e227b0b8eap+0", "-0x1.1aa2bc79c81p-3"),
    ("0x1.1bb4a4a1a343fp+0", "-0x1.a4e76ce8c0e5ep-4"), ("0x1.12358f08ae5bap+0",
     "-0x1.1973c5a611cccp-4"), ("0x1.0953f419900a7p+0", "-0x1.252f438e10c1ep-5"),
    ("0x1p+0", "0x0p+0"), ("0x1.e608cfd9a47acp-1", "0x1.aa5aa5df25984p-5"),
    ("0x1.ca4b31f026aap-1", "0x1.c5e53aa362eb4p-4"), ("0x1.b2036576afce6p-1",
     "0x1.526e57720db08p-3"), ("0x1.9c2d163a1aa2dp-1", "0x1.bc2860d22477p-3"),
    ("0x1.886e6037841edp-1", "0x1.1058bc8a07ee1p-2"), ("0x1.767dcf5534862p-1",
     "0x1.4043057b6ee09p-2"))])
_LN2 = _H("0x1.62e42fefa39efp-1")
_LOGF_POLY = tuple(map(_H, ("-0x1.00ea348b88334p-2", "0x1.5575b0be00b6ap-2",
                            "-0x1.ffffef20a4123p-2")))
_HPI_INV, _HPI = _H("0x1.45f306dc9c883p+23"), _H("0x1.921fb54442d18p0")
_COS_POLY = tuple(map(_H, ("0x1p0", "-0x1.ffffffd0c621cp-2", "0x1.55553e1068f19p-5",
                           "-0x1.6c087e89a359dp-10", "0x1.99343027bf8c3p-16")))
_SIN_POLY = tuple(map(_H, ("-0x1.555545995a603p-3", "0x1.1107605230bc4p-7",
                           "-0x1.994eb3774cf24p-13")))


def _logf(x):
    """glibc's logf for positive normal float32: a 16-entry table and a cubic in float64."""
    ix = x.view(_U32)
    tmp = ix - _U32(0x3F330000)
    invc, logc = _LOGF_TABLE[(tmp >> _U32(19)) % 16].T
    k = (tmp.view(np.int32) >> 23).astype(np.float64)
    z = (ix - (tmp & _U32(0xFF800000))).view(np.float32).astype(np.float64)
    r = z * invc - 1
    a0, a1, a2 = _LOGF_POLY
    r2 = r * r
    y = a0 * r2 + (a1 * r + a2)
    y = y * r2 + ((logc + k * _LN2) + r)
    return np.where(ix == 0x3F800000, np.float32(0), y.astype(np.float32))


def _sincosf(y):
    """glibc's sincosf for float32 in [0, 120): quadrant reduction and two polynomials."""
    x = y.astype(np.float64)
    top = (y.view(_U32) >> _U32(20)) & _U32(0x7FF)
    small = top < 0x3F4  # below about pi/4: no reduction
    n = np.where(small, 0, ((x * _HPI_INV).astype(np.int32) + 0x800000) >> 24)
    x = np.where(small, x, x - n * _HPI)
    cos_sign = np.where(n & 2, -1.0, 1.0)
    xs = x * np.array([1.0, -1.0, -1.0, 1.0])[n & 3]
    x2 = x * x
    x3, x4 = x2 * xs, x2 * x2
    c0, c1, c2, c3, c4 = (cos_sign * c for c in _COS_POLY)
    s1, s2, s3 = _SIN_POLY
    sin = ((xs + x3 * s1) + (x3 * x2) * (s2 + x2 * s3)).astype(np.float32)
    cos = (((c0 + x2 * c1) + x4 * c2) + (x4 * x2) * (c3 + x2 * c4)).astype(np.float32)
    odd, tiny = (n & 1).astype(bool), top < 0x398
    return (np.where(tiny, y, np.where(odd, cos, sin)),
            np.where(tiny, np.float32(1), np.where(odd, sin, cos)))


# -- distributions --------------------------------------------------------------------------


def _unit_float(bits):
    """uint32 -> float32 in [0, 1): 23 random mantissa bits under exponent 0, minus one."""
    return ((bits & _U32(0x7FFFFF)) | _U32(127 << 23)).view(np.float32) - np.float32(1)


def _unit_double(hi, lo):
    bits = (hi.astype(_U64) & _U64(0xFFFFF)) << _U64(32) | lo.astype(_U64)
    return (bits | _U64(1023 << 52)).view(np.float64) - 1.0


def _unit_half(bits):
    half = ((bits & _U32(0x3FF)) | _U32(15 << 10)).astype(np.uint16).view(np.float16)
    return half - np.float16(1)


def _box_muller(bits):
    """float32 normals from consecutive uint32 pairs, as TensorFlow's BoxMullerFloat."""
    u1 = np.maximum(_unit_float(bits[0::2]), np.float32(1e-7))
    v1 = (2 * np.pi * _unit_float(bits[1::2]).astype(np.float64)).astype(np.float32)
    radius = np.sqrt(np.float32(-2) * _logf(u1))
    sin, cos = _sincosf(v1)
    out = np.empty(bits.shape, np.float32)
    out[0::2], out[1::2] = sin * radius, cos * radius
    return out


def _box_muller_double(bits):
    """float64 normals from groups of four uint32 (BoxMullerDouble)."""
    w = bits.reshape(-1, 4)
    u1 = np.maximum(_unit_double(w[:, 0], w[:, 1]), 1e-7)
    v1 = 2 * np.pi * _unit_double(w[:, 2], w[:, 3])
    radius = np.sqrt(-2.0 * np.log(u1))
    return np.stack([np.sin(v1) * radius, np.cos(v1) * radius], axis=-1).reshape(-1)


def _wide(bits):
    """Pairs of uint32 as uint64, low word first."""
    return bits[0::2].astype(_U64) | bits[1::2].astype(_U64) << _U64(32)


def _uniform(key, counter, *, shape, dtype):
    n, dtype = int(np.prod(shape)), np.dtype(dtype)
    if dtype == np.float64:
        bits = _stream(key, counter, 2 * n)
        out = _unit_double(bits[0::2], bits[1::2])
    elif dtype == np.float16:
        out = _unit_half(_stream(key, counter, n))
    else:
        out = _unit_float(_stream(key, counter, n))
    return out.reshape(shape)


def _normal(key, counter, *, shape, dtype):
    n, dtype = int(np.prod(shape)), np.dtype(dtype)
    if dtype == np.float64:
        out = _box_muller_double(_stream(key, counter, 4 * -(-n // 2)))
    else:
        out = _box_muller(_stream(key, counter, 2 * -(-n // 2)))
    return out[:n].astype(dtype).reshape(shape)


def _truncated_normal(key, counter, *, shape, dtype):
    n, dtype = int(np.prod(shape)), np.dtype(dtype)
    per_group = 2 if dtype == np.float64 else 4
    normals = _box_muller_double if dtype == np.float64 else _box_muller
    groups = -(-n // per_group)
    out = np.zeros((groups, per_group), np.float64 if dtype == np.float64 else np.float32)
    filled = np.zeros(groups, np.int64)
    todo, first = np.arange(groups), 0
    while todo.size:  # each round draws two more blocks for the groups still short
        index = (todo[:, None] * (_GROUP_BLOCKS * per_group // 4) + first + np.arange(2))
        values = normals(_blocks(key, counter, index.astype(_U64)).reshape(-1))
        values = values.reshape(todo.size, -1)
        keep = np.abs(values) < 2
        slot = np.cumsum(keep, axis=1) - 1 + filled[todo, None]
        take = keep & (slot < per_group)
        rows = np.broadcast_to(todo[:, None], take.shape)
        out[rows[take], slot[take]] = values[take]
        filled[todo] = np.minimum(filled[todo] + keep.sum(axis=1), per_group)
        todo, first = todo[filled[todo] < per_group], first + 2
    return out.reshape(-1)[:n].astype(dtype).reshape(shape)


def _uniform_int(key, counter, minval, maxval, *, shape, dtype):
    n, dtype = int(np.prod(shape)), np.dtype(dtype)
    lo, hi = np.asarray(minval).astype(dtype), np.asarray(maxval).astype(dtype)
    if not lo < hi:
        raise ValueError(f"A random integer range expected minval < maxval. Received: "
                         f"minval={lo}, maxval={hi}")
    unsigned = np.dtype(f"uint{dtype.itemsize * 8}")
    span = hi.view(unsigned) - lo.view(unsigned)
    bits = _stream(key, counter, n * dtype.itemsize // 4)
    bits = _wide(bits) if dtype.itemsize == 8 else bits
    with np.errstate(over="ignore"):
        out = lo.view(unsigned) + (bits % span).astype(unsigned)
    return out.view(dtype).reshape(shape)


def _uniform_full_int(key, counter, *, shape, dtype):
    n, dtype = int(np.prod(shape)), np.dtype(dtype)
    bits = _stream(key, counter, n * dtype.itemsize // 4)
    bits = _wide(bits) if dtype.itemsize == 8 else bits
    return bits.view(dtype).reshape(shape)


# -- registration ---------------------------------------------------------------------------

_FLOATS = ("float16", "float32", "float64")
_INTS = ("int32", "int64")
_DTYPES = {"random_uniform": _FLOATS, "random_normal": _FLOATS,
           "random_truncated_normal": _FLOATS, "random_uniform_int": _INTS,
           "random_uniform_full_int": _INTS + ("uint32", "uint64")}


def _key_counter_shape(in_types, **_):
    (seed,) = in_types
    if seed.shape != (2,) or seed.dtype not in _INTS:
        raise ValueError(f"A random seed expected an int32 or int64 tensor of shape (2,). "
                         f"Received: seed={seed}")
    return [TensorType((1,), "uint64"), TensorType((2,), "uint64")]


def _sample_shape(op):
    def rule(in_types, *, shape, dtype):
        if np.dtype(dtype).name not in _DTYPES[op]:
            raise ValueError(f"{op} expected a dtype in {_DTYPES[op]}. Received: dtype={dtype}")
        key, counter = in_types[:2]
        if key.shape != (1,) or counter.shape != (2,):
            raise ValueError(f"{op} expected a key of shape (1,) and a counter of shape (2,). "
                             f"Received: key={key}, counter={counter}")
        return [TensorType(tuple(shape), dtype)]

    return rule


register_op("random_key_counter", shape=_key_counter_shape, kernel=_key_counter,
            cost=per_output_element("vector", 10), mapping="single")
for _op, _kernel, _factor in (
    ("random_uniform", _uniform, 1), ("random_normal", _normal, 2),
    ("random_truncated_normal", _truncated_normal, 3), ("random_uniform_int", _uniform_int, 1),
    ("random_uniform_full_int", _uniform_full_int, 1),
):
    register_op(_op, shape=_sample_shape(_op), kernel=_kernel,
                cost=per_output_element("vector", _factor), mapping="linear",
                recompute="never")   # drawn from the IPU's random state: kept

_V2 = {"StatelessRandomUniformV2": "random_uniform", "StatelessRandomNormalV2": "random_normal",
       "StatelessTruncatedNormalV2": "random_truncated_normal",
       "StatelessRandomUniformIntV2": "random_uniform_int",
       "StatelessRandomUniformFullIntV2": "random_uniform_full_int"}
_V1 = {"StatelessRandomUniform": "random_uniform", "StatelessRandomNormal": "random_normal",
       "StatelessTruncatedNormal": "random_truncated_normal",
       "StatelessRandomUniformInt": "random_uniform_int",
       "StatelessRandomUniformFullInt": "random_uniform_full_int"}


def _sample(node, b, op, key, counter, bounds):
    out = node.out_types[0]
    return b.emit(op, [key, counter] + list(bounds), shape=out.shape, dtype=out.dtype)


@tf_import(*_V2)
def _import_v2(node, b):
    alg = int(np.asarray(node.static(3)))
    if alg not in (PHILOX, AUTO_SELECT):
        raise UnsupportedOpError(node.type, node.name, node.layer,
                                 hint=f"only the Philox algorithm ({PHILOX}) is simulated, "
                                      f"not algorithm {alg}")
    return _sample(node, b, _V2[node.type], node.inputs[1], node.inputs[2], node.inputs[4:])


@tf_import(*_V1)
def _import_v1(node, b):
    key, counter = b.emit("random_key_counter", [node.inputs[1]])
    return _sample(node, b, _V1[node.type], key, counter, node.inputs[2:])


@tf_import("StatelessRandomGetKeyCounter", "StatelessRandomGetKeyCounterAlg")
def _import_key_counter(node, b):
    key, counter = b.emit("random_key_counter", [node.inputs[0]])
    if node.type == "StatelessRandomGetKeyCounter":
        return [key, counter]
    return [key, counter, b.const(PHILOX, np.int32)]


@tf_import("StatelessRandomGetAlg")
def _import_get_alg(node, b):
    return b.const(PHILOX, np.int32)
