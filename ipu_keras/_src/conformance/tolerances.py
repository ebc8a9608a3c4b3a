"""Every tolerance the project compares numbers with, one named row each, with its reason.

Tests and the conformance catalogue refer to these rows (`tolerances.FLOAT32.assert_close(
got, expected)`, `np.testing.assert_allclose(got, expected, **tolerances.FLOAT32.kwargs)`);
no comparison against TensorFlow carries a number of its own. `docs/tolerances.md` is
rendered from `ROWS` (`python -m ipu_keras._src.conformance.docs` rewrites it;
tests/conformance/test_tolerances.py checks it is current).

A tolerance must hold on any x86-64 processor TensorFlow supports, so every row is derived
from the arithmetic rather than from what one machine printed:

- float32 rows count roundings: the float32 unit roundoff is u32 = 2**-24; TensorFlow's
  kernels (Eigen, oneDNN) and numpy differ only in summation order and in their
  approximations of exp, tanh, ..., which costs a few u32 per op.
- float16 (mixed precision) rows do not compare with TensorFlow's float16 kernels at all:
  those take different paths on different instruction sets (AVX2, AVX-512, AVX512-FP16,
  oneDNN on or off). The oracle is TensorFlow running the same model and weights in
  float32, and the bound is the float16 arithmetic of the simulator's path: each float16
  rounding (unit roundoff u16 = 2**-11) on the longest path adds at most u16 of the
  tensor's magnitude, sums accumulate in float32 (n * u32 for n terms); see
  `float16_training`.
"""
import dataclasses

import numpy as np

U32 = 2.0**-24  # float32 unit roundoff (half an ulp of 1.0)
U16 = 2.0**-11  # float16 unit roundoff
EPS32 = 2.0**-23  # float32 ulp of 1.0

ROWS = []


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """A named tolerance: `|got - expected| <= atol + rtol * |expected|`.

    Attributes:
        name: The row's name in docs/tolerances.md.
        rtol: Relative tolerance.
        atol: Absolute tolerance.
        reason: Why this much, derived from the arithmetic.
    """

    name: str
    rtol: float
    atol: float
    reason: str

    @property
    def kwargs(self):
        """`{"rtol": ..., "atol": ...}` for `np.testing.assert_allclose` and friends."""
        return {"rtol": self.rtol, "atol": self.atol}

    def assert_close(self, got, expected, err_msg=""):
        """`np.testing.assert_allclose` with this row's tolerances."""
        np.testing.assert_allclose(got, expected, rtol=self.rtol, atol=self.atol,
                                   err_msg=f"{err_msg} [tolerance: {self.name}]")

    def assert_close_at_scale(self, got, expected, err_msg=""):
        """As the conformance runner measures float16 rows: `|got - expected| <= atol +
        rtol * max|expected|`, relative to the tensor's largest magnitude."""
        scale = float(np.max(np.abs(expected))) if np.size(expected) else 0.0
        np.testing.assert_allclose(got, expected, rtol=0.0, atol=self.atol + self.rtol * scale,
                                   err_msg=f"{err_msg} [tolerance: {self.name}]")


def _row(name, rtol, atol, reason):
    tolerance = Tolerance(name, float(rtol), float(atol), " ".join(reason.split()))
    ROWS.append(tolerance)
    return tolerance


EXACT = _row("exact", 0, 0, """
    Integer and boolean results, stateless random ops (Philox counters defined bit for bit),
    float32 -> float16 casts and copies (correctly rounded, round-to-nearest-even on every
    processor), a kernel against the same float32 formula in numpy (the same operations in
    the same order), the loss scale state of a mixed-precision run (powers of two and
    counters), and weights that must be untouched (a failed or skipped execution, a save
    and load). Any difference is a bug.""")

FLOAT32 = _row("float32", 1e-5, 1e-6, """
    A float32 op, layer, model or short training run on the simulator against TensorFlow on
    the CPU. Both round each op to float32 (u32 = 2**-24 = 6e-8) but sum in different
    orders and approximate exp, tanh, erf, ... differently: a few u32 per op. 1e-5 is
    about 170 u32, room for tens of ops on a path with condition numbers of a few; a wrong
    formula, axis, term or step is off by far more. atol 1e-6 covers values that cancel to
    near zero, whose error is that of their O(1) terms: about 16 u32, enough for sums of up
    to about 16 terms; longer sums have their own rows (`float32_sum`).""")

FLOAT32_KERNEL = _row("float32 kernel vs float64", 2e-6, 1e-6, """
    A float32 kernel of the simulator against the same formula evaluated in float64 by
    numpy: only the kernel rounds, a handful of times (each at most u32 = 6e-8) with
    condition numbers of a few for the sampled inputs. 2e-6 is about 32 u32.""")

FLOAT32_ULP = _row("float32 1 ulp", EPS32, EPS32, """
    A float32 elementary function (log, sin, cos) of the simulator's own implementation
    against float64 numpy: correctly rounded would be u32 off; at most one ulp (2**-23 of
    the value, or absolutely for values below 1 such as sin and cos) is the accuracy the
    implementation is written to.""")

FLOAT32_ERF = _row("float32 erf (2 ulps)", 2 * EPS32, 0, """
    The simulator's erf against float64 math.erf: evaluated in float64 (a Taylor series
    below 0.5, the Chebyshev-fitted erfc of Numerical Recipes above, relative error below
    1.2e-7) and rounded to float32 (u32 = 6e-8): below 1.8e-7, within 2 ulps (2 * 2**-23)
    of the value.""")

FLOAT32_ERFC = _row("float32 erfc (3 ulps)", 3 * EPS32, 0, """
    The simulator's erfc against float64 math.erfc: the Chebyshev-fitted erfc of
    Numerical Recipes everywhere (relative error below 1.2e-7 for x >= 0, and
    erfc(-x) = 2 - erfc(x) >= 1 has a smaller one), evaluated in float64 and rounded to
    float32 (u32 = 6e-8): below 1.8e-7, within 3 ulps (3 * 2**-23) of the value.""")

FLOAT64_BOX_MULLER = _row("float64 normal samples", 1e-15, 0, """
    float64 normal random numbers from the same Philox bits: Box-Muller's log, sqrt, sin
    and cos in numpy and in glibc/Eigen each round correctly or one ulp off (numpy's log
    differs from glibc's in the last bit for ~0.3% of values): a few u64 = 2**-53 = 1.1e-16
    each, 1e-15 (9 u64) for the four.""")


FLOAT32_FEW_OPS = _row("float32, a few ops", 16 * U32, 0, """
    Two float32 computations of the same few elementwise ops or short sums (an outfeed of
    w * x and its total, the same model trained again on the simulator from the same
    start, a graph converted or placed differently): each side rounds each op once (at
    most u32 = 6e-8 relative) in possibly a different order: 16 u32 = 9.5e-7 relative
    covers a path of up to eight roundings on each side.""")

PROPAGATED = _row("fuzzer: propagated error bound", 0, 0, """
    The randomized differential test (tests/fuzz) carries for each value a bound `err` on
    |computed - exact| that holds for any correct implementation: each rounding of a result
    of magnitude <= M adds u * M (u32 or u16), a sum of n terms (n - 1) u M, a matmul of
    depth K adds K u M, a transcendental a few ulps, an L-Lipschitz op multiplies the
    incoming bound by L. Both sides are within err of the truth, so they agree within
    atol = 2 * err of that value (rtol 0); `propagated(err)` gives the row for one value,
    listed here with atol 0 because it is per value.""")


def propagated(err):
    """The PROPAGATED row for one value whose propagated error bound is `err`.

    Not added to `ROWS` (one per fuzzed value); docs/tolerances.md lists `PROPAGATED`.
    """
    return Tolerance(f"{PROPAGATED.name} 2 * {err:.3g}", 0.0, 2.0 * err, PROPAGATED.reason)


def float32_sum(name, terms, term_rms, reason=""):
    """A row for float32 sums of `terms` terms of root-mean-square size `term_rms`.

    Two float32 implementations summing in different orders (sequential, blocked,
    pairwise) each make an error sum_k d_k * S_k over the partial sums S_k, |d_k| <= u32.
    With independent roundings and E[S_k**2] = k * term_rms**2, each has a standard
    deviation of u32 * term_rms * terms / sqrt(6); the difference of two, sqrt(2) times
    that; atol is four such deviations: 2.3 * u32 * term_rms * terms. rtol stays FLOAT32's.
    """
    atol = 2.3 * U32 * term_rms * terms
    return _row(name, FLOAT32.rtol, atol, f"""
        float32 sums of {terms} terms of rms {term_rms:g}, in a different order on each
        side: the difference of two random walks of roundings, four standard deviations
        is 2.3 * u32 * rms * n = {atol:.2g} absolute (float32 rtol on top). {reason}""")


def float32_product(name, factors, reason=""):
    """A row for float32 products of `factors` factors: each multiplication rounds once
    (at most u32 relative, whatever the order), on both sides."""
    rtol = 2 * (factors - 1) * U32
    return _row(name, rtol, 0, f"""
        float32 products of up to {factors} factors multiplied in a different order on each
        side: (n - 1) roundings of at most u32 each, on both sides: 2 (n - 1) u32 =
        {rtol:.2g} relative, independent of the order. {reason}""")


FLOAT32_SUM_1000 = float32_sum("float32 sum of 1000", 1000, 4 / np.sqrt(12), """
    Sum over 1000 uniform(-2, 2) values (rms 1.15).""")
FLOAT32_MATMUL_96 = float32_sum("float32 matmul, 96 products", 96, 4 / 3, """
    MatMul 64x96 @ 96x32 of uniform(-2, 2) values: products of rms 4/3.""")
FLOAT32_CONV_144 = float32_sum("float32 convolution, 144 products", 144, 4 / 3, """
    Conv2D of 16 channels with a 3x3 filter, uniform(-2, 2) values: each output sums 144
    products of rms 4/3. TensorFlow's order changes with its thread count and kernel path:
    an output that cancels to 0.09 was 1.1e-5 off on this machine under load.""")
FLOAT32_CONV_FILTER_576 = float32_sum("float32 conv filter gradient, 576 products", 576, 2.5, """
    Conv2DBackpropFilter of a 4x12x12 batch: each filter tap sums 576 products of inputs
    (rms 1.15) and upstream gradients weighted 1..3 (rms 2.2).""")
FLOAT32_CONV_81 = float32_sum("float32 small convolutions, up to 81 products", 81, 2.5, """
    The small convolutions of the op tests and their two gradients: each output sums at most
    81 products (a 3x3x3 filter over 3 channels, a Conv3D filter gradient over 2x3x3x3
    outputs) of uniform(-2, 2) values (rms 1.15) and upstream gradients weighted 1..3
    (rms 2.2): products of rms at most 2.5. Above 16 terms the float32 row's atol no longer
    covers the order: a filter-gradient tap of 24 products that cancels to 0.14 was 3.3e-6
    off on an AVX2 machine.""")
FLOAT32_ATTENTION_GRAD_30 = float32_sum("float32 attention gradients, 30 products", 30, 8, """
    Keras MultiHeadAttention (2 heads of 4, query [2, 5, 6], value [2, 3, 6], uniform(-2, 2))
    and the loss sum(y * y): a weight gradient sums over the 10 query positions and, for the
    query and key kernels, the 3 key positions, products of an activation (rms ~1) and
    2 * y (|y| up to 8): at most 30 terms of rms up to 8. An output-kernel gradient that
    cancels to 0.057 was 2.6e-6 off.""")
FLOAT32_BATCH_NORM_GRAD_24 = float32_sum("float32 batch-norm gradients, 24 terms", 24, 2.2, """
    FusedBatchNormGrad of the op tests (a 2x4x3 batch per channel): the scale's and the
    input's gradients sum over the channel's 24 elements the upstream gradient (weighted
    1..3, rms 2.2) times the normalised input (rms 1). A scale gradient that cancels to
    0.061 was 3.1e-6 off.""")
FLOAT32_DENSE_GRAD_24 = float32_sum("float32 Dense gradients, 24 products", 24, 4, """
    The kernel and bias gradients of a Dense layer (SerialDense against keras Dense) for a
    3x8 batch of standard normal inputs and the loss sum(y * y): each sums 24 products of
    an input (rms 1) and 2 * y (rms up to 4).""")
FLOAT32_EFFECTIVE_TRANSFORMER_440 = float32_sum(
    "float32 EffectiveTransformer weight gradients, 440 products", 440, 4, """
    The weight gradients of EffectiveTransformer (5 sequences of up to 8 queries and 11 keys)
    against a float64 formulation: a value weight's gradient sums 5 x 8 x 11 products of an
    attention probability (rms about 0.2 over 11 keys) and a context gradient (rms 6 to 19 for
    the test's loss, weights 1..12 through the output Dense and LayerNorm): rms at most 4.""")
_LN_ROUNDINGS = 40 * 4  # roundings on the forward and backward path x LayerNorm's cancellation
FLOAT32_TRAIN_THROUGH_LAYERNORM = _row(
    "float32 training through LayerNorm of small embeddings", FLOAT32.rtol,
    8 * 0.1 * 3 * 2 * _LN_ROUNDINGS * U32, """
    An addons model (Embedding, LayerNorm, SerialDense, GroupNorm, softmax) trained for 8
    SGD steps at rate 0.1 on the simulator and in Keras. The embeddings start at
    uniform(-0.05, 0.05) (std 0.03), and LayerNorm divides their gradient by that std:
    embedding gradients reach G = 3 while the layers above see about 0.1. Each side's
    gradient carries about 40 roundings on the forward and backward path, and LayerNorm's
    input gradient (g - mean(g) - x * mean(g x)) cancels to about a quarter of its terms:
    4 * 40 u32 of G per side. Over the steps, the embedding weights differ by at most
    steps * rate * G * 2 sides * 160 u32 = 4.6e-5 absolute; FLOAT32's rtol on top. The
    trained models' predictions (probabilities below 1) are compared with the same row: the
    same gradient paths, run forward, carry the weights' differences.""")
FLOAT32_PROD_60 = float32_product("float32 product of 60", 60, """
    reduce_prod over up to 3 * 4 * 5 positive values.""")


def float16_training(name, forward, backward, steps, learning_rate, reduction=1, reason=""):
    """A row for a mixed_float16 catalogue item compared with its float32 twin.

    The simulator computes the item's float16 ops in float32 and rounds each result to
    float16 once (a matmul or convolution accumulates in float32), exactly as the graph's
    dtypes say. A rounding changes a value by at most u16 = 2**-11 of itself, so by at most
    u16 of its tensor's largest magnitude; through layers that do not expand that measure,
    the errors of the roundings on a path add up. `forward` counts the float16 roundings on
    the longest path from the input to the output (a cast to float16, each matmul, einsum
    or convolution, bias add, elementwise arithmetic op or activation that rounds, and the
    float16 result of a layer computing in float32 inside; data movement and relu are
    exact), `backward` those on the longest path of the gradient back to the first weights.
    The weights move by the learning rate times gradients whose relative error is that of
    the forward and backward paths, and the predictions after training add their forward
    path: every tensor of the run is within (forward + backward) * u16 of its float32 twin
    relative to its largest magnitude. Sums of up to `reduction` terms accumulate in float32
    (reduction * u32) and the float32 twin is itself FLOAT32 off the exact values.

    A weight whose exact gradient is zero (a bias feeding a normalization, the key bias of
    attention) collects the rounding noise of a gradient sum that cancels: at most
    (forward + backward) * u16 of its terms' magnitudes, which are at most 1 for these
    mean-reduced losses on unit-variance data, per step: atol = steps * learning_rate *
    (forward + backward) * u16.
    """
    roundings = forward + backward
    rtol = roundings * U16 + reduction * U32 + FLOAT32.rtol
    atol = steps * learning_rate * roundings * U16
    return _row(name, rtol, atol, f"""
        mixed_float16 against the same model in float32 (TensorFlow on the CPU, same
        weights and data): {forward} float16 roundings on the forward path + {backward} on
        the backward path, each at most u16 = 2**-11 of the tensor: rtol = {roundings} u16
        + {reduction} u32 (float32 sums) + FLOAT32 = {rtol:.3g}; a zero gradient's rounding
        noise over {steps} steps at learning rate {learning_rate:g}: atol = steps * rate *
        {roundings} u16 = {atol:.2g}. {reason}""")


def float16_inference(name, forward, reduction, reason=""):
    """A row for a model run with float16 inside (a mixed_float16 policy or a SavedModel
    converted with `--precision_mode FP16`) compared with the same model in float32.

    As `float16_training` without the backward path and the steps: `forward` float16
    roundings on the longest path (casts of the input and of each weight count), each at
    most u16 of its tensor's largest magnitude; sums of up to `reduction` terms in float32.
    """
    rtol = forward * U16 + reduction * U32 + FLOAT32.rtol
    return _row(name, rtol, 0, f"""
        float16 inside against the same model in float32 (TensorFlow on the CPU, same
        weights and inputs), relative to the output's largest magnitude: {forward} float16
        roundings on the forward path, each at most u16 = 2**-11 of its tensor: rtol =
        {forward} u16 + {reduction} u32 (float32 sums) + FLOAT32 = {rtol:.3g}. {reason}""")


MIXED_FP16_CNN = float16_inference("mixed_float16 FP16-converted CNN", 12, 36, """
    `convert ipu --precision_mode FP16` of Conv2D(relu) -> MaxPooling2D -> Dense(softmax):
    casts of the image, the filter, the conv bias, the dense kernel and bias (5), the
    convolution (18 taps) and its bias add, the matmul (36 terms) and its bias add (4),
    softmax's exp and normalization (2), relu and pooling exact = 12.""")
MIXED_FP16_GELU = float16_inference("mixed_float16 FP16-converted GELU MLP", 6, 7, """
    `convert ipu --precision_mode FP16` of x @ w1 -> GELU -> @ w2 (also sharded over 2 IPUs):
    casts of x, w1 and w2 (3), the two matmuls (5 and 7 terms) and the GELU function (a
    1.13-Lipschitz op rounded once) = 6.""")

MIXED_RESNEXT = float16_inference("mixed_float16 ResNeXt listing (TF1)", 19, 784, """
    The TF1 seed listing's ResNeXt (DTYPE float16: input and weights are float16 on both
    sides, so no cast rounds) against its float32 twin: the stem convolution (196 taps) and
    its batch norm (2); per bottleneck block, the 1x1, group and 1x1 convolutions, their
    three batch norms and the shortcut add (7, two blocks: 14); the spatial mean over 28 x
    28 (784 terms summed in float32, one rounding); the fc matmul and bias add (2) = 19.""")


FLOAT16_CTC_LOSS = float16_inference("mixed_float16 CTC loss (float16 logits)", 1, 0, """
    The CTC op computes in float64 and rounds each example's loss once to float16; the
    oracle is TensorFlow's float32 loss of the same logits (its own float16 CTC rounds at
    every step of its loop, and differs between instruction sets).""")

_DENSE_PATH = """Dense -> Dense: forward cast, matmul, bias add, (relu exact), matmul, bias
    add = 5; backward the float16 upstream gradient, the matmul for the first layer's
    input gradient, the kernel-gradient matmul and the bias-gradient sum = 4."""
MIXED_DENSE = float16_training("mixed_float16 Dense stack", 5, 4, 3, 0.05, 8, _DENSE_PATH)
MIXED_DENSE_ADAM = float16_training(
    "mixed_float16 Dense stack, Adam", 5, 4, 3, 0.01, 8, _DENSE_PATH + """ Adam normalizes
    its step, m / sqrt(v), which has the relative error of the gradients it divides.""")
MIXED_CLASSIFIER = float16_training("mixed_float16 Dense + float32 softmax", 3, 3, 3, 0.05, 8, """
    A float16 Dense (cast, matmul, bias add = 3) feeding a float32 softmax Dense (exact
    up-cast); back: the float16 gradient, the kernel matmul and bias sum = 3. Accuracy is
    compared too: an argmax flips only on a near tie within the bound.""")
MIXED_CONV_BN = float16_training(
    "mixed_float16 Conv2D + BatchNormalization", 6, 5, 3, 0.05, 200, """
    Forward: cast, convolution (36 taps summed in float32), bias add, the float16 result of
    BatchNormalization (computed in float32), head matmul (75 terms), bias add = 6; back:
    the float16 gradient, head matmul, BatchNormalization's input gradient, the filter
    gradient (sums of 200 products), bias sum = 5. The convolution's bias has a zero
    gradient (BatchNormalization removes its mean): atol.""")
MIXED_ATTENTION = float16_training(
    "mixed_float16 MultiHeadAttention + LayerNormalization", 13, 10, 3, 0.05, 30, """
    Forward: cast; query projection einsum and bias add; the 1/sqrt(key_dim) scale; the
    score einsum; softmax (exp, normalize); the value einsum; the output projection einsum
    and bias add; LayerNormalization's float16 result (it computes in float32); head matmul
    and bias add = 13. Back to the query kernel: the float16 gradient, head matmul,
    LayerNormalization, output einsum, value einsum, softmax gradient (2), score einsum,
    scale, query kernel einsum = 10. The key bias has a zero gradient (softmax does not
    change when a constant is added to a row of scores): atol. This item failed the old
    TensorFlow-float16 comparison on an AVX512-BF16 processor.""")
MIXED_LSTM = float16_training("mixed_float16 LSTM", 19, 15, 3, 0.05, 8, """
    The longest path runs along the cell state: cast, x @ W, + h @ U, bias add, gate
    activation, i * g, + f * c (7) to c_1, then f * c and the add per step (2 * 4) to c_5,
    tanh(c_5), o * tanh, head matmul and bias add (4) = 19 forward; back through time
    along the same chain: the float16 gradient, head matmul, o * and tanh' (2), 2 per step
    (8), the gate gradients (2) and the kernel matmul = 15.""")
_OVERFLOW_ROUNDINGS = 9 + 26  # the simulator's (MIXED_DENSE) + TensorFlow's at most
MIXED_OVERFLOW = _row(
    "mixed_float16 Dense stack vs TensorFlow float16", _OVERFLOW_ROUNDINGS * U16 + FLOAT32.rtol,
    4 * 0.05 * _OVERFLOW_ROUNDINGS * U16, """
    Loss scale overflow can only be checked against TensorFlow's own float16 run: in
    float32 nothing overflows, and a float32 twin would apply every step. Which steps are
    skipped is decided by float16 infinities (gradients times 2**16), far outside any
    rounding. Both runs are compared with the exact run that skips the same steps: the
    simulator within its 9 roundings (MIXED_DENSE); TensorFlow's float16 kernels may
    accumulate in float16 on some processors, one rounding per term: forward cast, 6 and
    5 terms, two bias adds (14), back the float16 gradient, 3 terms, 8 terms (12) = 26.
    So within (9 + 26) u16 + FLOAT32 = 1.71e-2 of each other; atol as for a zero gradient
    over the 4 steps at rate 0.05.""")


def render():
    """The text of docs/tolerances.md."""
    lines = [
        "# Tolerances",
        "",
        "Generated from `ipu_keras/_src/conformance/tolerances.py` by",
        "`python -m ipu_keras._src.conformance.docs`; do not edit by hand",
        "(`tests/conformance/test_tolerances.py` checks that it is current).",
        "",
        "Every comparison with TensorFlow (or a float64 reference) names one of these rows.",
        "A value passes when `|got - expected| <= atol + rtol * |expected|` (the conformance",
        "catalogue takes `|expected|` as the tensor's largest magnitude).",
        "u32 = 2**-24 and u16 = 2**-11 are the unit roundoffs of float32 and float16.",
        "",
        "| tolerance | rtol | atol | why |",
        "|---|---|---|---|",
    ]
    lines += [f"| {t.name} | {t.rtol:.3g} | {t.atol:.3g} | {t.reason} |" for t in ROWS]
    return "\n".join(lines) + "\n"

