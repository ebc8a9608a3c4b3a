"""What the fuzzer knows about each value of a generated graph: the error model.

Every value carries `Facts`: its shape and dtype, an interval holding all its elements,
a lower bound on the magnitude of its elements (for divisors), and one of two kinds of
numerical promise:

* exact (`err == 0`): TensorFlow and the simulator must agree bit for bit. Integers and
  bools are always exact. A float is exact while it lives on a *grid*: every element is
  an integer multiple of `grid`, a power of two no smaller than the dtype's smallest
  normal number, and at most `grid * 2**precision` in magnitude. While results stay
  on such a grid, every add, subtract, multiply, sum, product and matmul is computed
  without any rounding in any order, and no value is subnormal (TensorFlow's CPU threads
  flush subnormals to zero, numpy does not), so the result is unique. Discontinuous ops
  (comparisons, floor, casts to integers, argmax, floordiv) only take exact inputs, so a
  rounding difference can never flip them.
* inexact (`err > 0`): a bound on |computed - exact real result| that holds for *any*
  correct implementation, propagated forward with the standard first-order bounds:
  each rounding of a result of magnitude <= M adds `u * M` (u the unit roundoff,
  2**-24 for float32 and 2**-11 for float16), plus the smallest normal for a possible
  flush to zero; a sum of n terms adds `(n - 1) u M_out` (recursive summation in any
  order; pairwise or float32 accumulation only do better); a matmul of depth K adds
  `K u M_out`; a transcendental adds `ULPS_TRANSCENDENTAL` ulps of M_out (Eigen's and
  numpy's approximations are within a few ulps); an L-Lipschitz op multiplies the
  incoming bound by L. Both sides are within `err` of the truth, so they must agree
  within `2 * err`. The bound is relative to the tensor's largest magnitude, as the
  issue asks, and for float16 it counts the roundings on the path.

Values whose magnitude bound would leave `LIMIT` are never generated, so nothing
overflows; integer division never sees a zero divisor.
"""
import dataclasses
import math

FLOATS = ("float32", "float16")
PRECISION = {"float32": 24, "float16": 11}
SMALLEST_NORMAL = {"float32": 2.0 ** -126, "float16": 2.0 ** -14}
LIMIT = {"float32": 1e7, "float16": 3e4, "int32": 2 ** 30, "bool": 1}
ULPS_TRANSCENDENTAL = 4


def unit_roundoff(dtype):
    return 2.0 ** -PRECISION[dtype]


@dataclasses.dataclass(frozen=True)
class Facts:
    shape: tuple
    dtype: str
    lo: float
    hi: float
    err: float = 0.0
    grid: float = 1.0
    nz: float = 0.0
    terminal: bool = False  # may hold inf/nan (an empty max, a mean of nothing): output only

    @property
    def mag(self):
        return max(abs(self.lo), abs(self.hi))

    @property
    def exact(self):
        return self.err == 0.0

    @property
    def is_float(self):
        return self.dtype in FLOATS

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def rank(self):
        return len(self.shape)

    def nonzero_bound(self):
        """A lower bound on |x| over all elements."""
        if self.lo > 0:
            return max(self.nz, self.lo)
        if self.hi < 0:
            return max(self.nz, -self.hi)
        return self.nz

    def within_limit(self):
        return self.mag <= LIMIT[self.dtype] and math.isfinite(self.err)


def rounding(dtype, mag, ulps=1.0):
    """The error one rounding of a result of magnitude <= mag can add."""
    return ulps * unit_roundoff(dtype) * mag + SMALLEST_NORMAL[dtype]


def on_grid(dtype, grid, mag):
    """Whether values that are multiples of `grid` and at most `mag` are exact in dtype."""
    return grid >= SMALLEST_NORMAL[dtype] and mag <= grid * 2.0 ** PRECISION[dtype]


def computed(shape, dtype, lo, hi, *, grid=0.0, err=0.0, rounding_err=None, nz=0.0,
             terminal=False):
    """Facts of a float result: exact if inputs are exact and it stays on `grid`.

    Otherwise it is inexact: the propagated input error `err` plus the error of the
    roundings that computed it (`rounding_err`, one rounding of the result by default).
    Integer and bool results are always exact.
    """
    if dtype not in FLOATS:
        return Facts(shape, dtype, lo, hi, 0.0, 1.0, nz, terminal)
    mag = max(abs(lo), abs(hi))
    if err == 0.0 and grid > 0 and on_grid(dtype, grid, mag):
        return Facts(shape, dtype, lo, hi, 0.0, grid, nz, terminal)
    if rounding_err is None:
        rounding_err = rounding(dtype, mag)
    return Facts(shape, dtype, lo, hi, err + rounding_err, 0.0, nz, terminal)


def mul_interval(a_lo, a_hi, b_lo, b_hi):
    products = (a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi)
    return min(products), max(products)


def input_grid(dtype, kind):
    """The grid of a drawn input: multiples of 1/8 for "grid" inputs, else the ulp lattice.

    "rough" floats have |x| in [1/16, 2] or x == 0, so they are multiples of ulp(1/16).
    """
    if dtype not in FLOATS:
        return 1.0
    if kind == "rough":
        return 2.0 ** (-4 - PRECISION[dtype] + 1)
    return 2.0 ** -3
