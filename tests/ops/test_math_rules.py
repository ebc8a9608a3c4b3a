"""Rules and kernels of `ipu_keras/_src/ops/math.py` against plain numpy and Python; no TensorFlow."""
import math

import numpy as np
import pytest

from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.ir.types import TensorType, type_of
from ipu_keras._src.ops import all_ops, cores, get_importer, get_op
from ipu_keras._src.ops import math as math_ops
from ipu_keras._src.ops.registry import WORK_KINDS
from tests.ops.rules import FakeNode, zeros_of

F = np.array([[-2.5, -0.5, 0.0], [0.5, 1.5, 3.0]], np.float32)
P = np.array([0.25, 0.5, 2.0], np.float32)      # positive, broadcasts against F
U = np.array([-0.5, 0.0, 0.75], np.float32)     # inside (-1, 1)
I = np.array([[-7, 7, 0], [5, -5, 3]], np.int32)
J = np.array([2, -2, 3], np.int32)              # non-zero, broadcasts against I
B = np.array([[True, False, True], [False, False, True]])
C = np.array([True, False, False])

UNARY_FLOAT = (
    "neg", "abs", "sign", "square", "floor", "ceil", "round", "exp", "expm1", "tanh",
    "sigmoid", "erf", "erfc", "sin", "cos", "tan", "atan", "sinh", "cosh", "asinh", "zeros_like",
    "ones_like",
)
UNARY_POSITIVE = ("sqrt", "rsqrt", "log", "log1p", "reciprocal", "acosh")
UNARY_UNIT = ("asin", "acos", "atanh")
BINARY_FLOAT = (
    "add", "sub", "mul", "div", "div_no_nan", "mul_no_nan", "floor_div", "floor_mod",
    "truncate_div", "truncate_mod", "maximum", "minimum", "pow", "squared_difference",
    "atan2", "xlogy", "xdivy", "xlog1py", "less", "less_equal", "greater", "greater_equal",
    "equal", "not_equal", "tanh_grad", "sigmoid_grad", "sqrt_grad", "rsqrt_grad",
    "reciprocal_grad",
)
BINARY_INT = (
    "add", "sub", "mul", "floor_div", "floor_mod", "truncate_div", "truncate_mod", "maximum",
    "minimum", "squared_difference", "bitwise_and", "bitwise_or", "bitwise_xor", "equal",
)
SAMPLES = (
    [(op, (F,)) for op in UNARY_FLOAT]
    + [(op, (P,)) for op in UNARY_POSITIVE]
    + [(op, (U,)) for op in UNARY_UNIT]
    + [(op, (F, P)) for op in BINARY_FLOAT]
    + [(op, (I, J)) for op in BINARY_INT]
    + [(op, (F,)) for op in ("is_finite", "is_nan", "is_inf")]
    + [(op, (B, C)) for op in ("logical_and", "logical_or")]
    + [("logical_not", (B,)), ("invert", (I,)), ("pow", (I, np.abs(J)))]
    + [("clip", (F, np.float32(-1), np.float32(1))), ("add_n", (F, F, F))]
    + [("cast", (F,), {"dtype": "int32"}), ("cast", (I,), {"dtype": "bool"})]
    + [("select", (B, F, np.float32(0))), ("select", (C, I, I), {"expand": 0})]
    + [("select", (np.array([True, False]), F, F), {"expand": 1})]
)


def run(op, *arrays, **params):
    """The kernel's result, checked against the type the shape rule promises.

    Float exceptions are ignored as the engine ignores them around every execution.
    """
    opdef = get_op(op)
    (expected,) = opdef.shape([type_of(a) for a in arrays], **params)
    with np.errstate(all="ignore"):
        got = opdef.kernel(*arrays, **params)
    assert isinstance(got, np.ndarray), (op, type(got))
    assert type_of(got) == expected, (op, str(type_of(got)), str(expected))
    return got


def test_every_op_has_all_rules():
    mine = {name for name, d in all_ops().items() if d.module == math_ops.__name__}
    assert mine == set(math_ops.IR_OPS)
    for name in math_ops.IR_OPS:
        opdef = get_op(name)
        assert callable(opdef.shape) and callable(opdef.kernel) and callable(opdef.cost)
        assert opdef.mapping == "elementwise" and not opdef.effect and not opdef.engine


def test_every_tf_type_has_an_importer():
    assert len(set(math_ops.TF_TYPES)) == len(math_ops.TF_TYPES)
    for tf_type in math_ops.TF_TYPES:
        assert get_importer(tf_type) is not None, tf_type


def test_every_op_has_a_sample():
    assert {s[0] for s in SAMPLES} == set(math_ops.IR_OPS)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s[0])
def test_kernel_returns_the_rule_type(sample):
    op, arrays, params = sample[0], sample[1], (sample[2] if len(sample) > 2 else {})
    run(op, *arrays, **params)
    run(op, *[np.asarray(a).reshape(-1)[:1].reshape(()) for a in arrays], **params)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s[0])
def test_cost_counts_output_elements(sample):
    op, arrays, params = sample[0], sample[1], (sample[2] if len(sample) > 2 else {})
    opdef = get_op(op)
    in_types = [type_of(a) for a in arrays]
    out_types = opdef.shape(in_types, **params)
    work = opdef.cost(in_types, out_types, **params)
    assert work.kind in WORK_KINDS and work.kind != "none"
    per_element = len(arrays) - 1 if op == "add_n" else 1
    assert work.amount == per_element * out_types[0].size


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s[0])
def test_a_rowwise_kernel_computes_each_row_from_the_same_rows(sample):
    """What the engine's chains rely on (`simulator/fusion.py`): the kernel on each row of
    its output, its operands cut there as the chains cut them, gives the bits of the whole.
    select is not rowwise: a vector condition picks whole rows."""
    op, arrays, params = sample[0], sample[1], (sample[2] if len(sample) > 2 else {})
    assert get_op(op).rowwise == (op != "select")
    if op == "select":
        return
    whole = run(op, *arrays, **params)
    rows = [run(op, *[cores.rows_of(a, whole.shape, slice(r, r + 1)) for a in arrays],
                **params) for r in range(len(whole))]
    assert np.concatenate(rows).tobytes() == whole.tobytes()


def test_broadcasting_and_predicate_types():
    rule = get_op("add").shape
    assert rule([TensorType((4, 1), "float32"), TensorType((3,), "float32")]) == [
        TensorType((4, 3), "float32")]
    assert get_op("less").shape([TensorType((2, 1), "int32"), TensorType((), "int32")]) == [
        TensorType((2, 1), "bool")]
    with pytest.raises(AssertionError):
        rule([TensorType((3,), "float32"), TensorType((3,), "int32")])


def test_integer_division_signs_follow_python_and_c():
    x = np.arange(-9, 10, dtype=np.int32).repeat(4)
    y = np.tile(np.array([2, -2, 3, -7], np.int32), 19)
    pairs = list(zip(x.tolist(), y.tolist()))
    np.testing.assert_array_equal(run("floor_div", x, y), [a // b for a, b in pairs])
    np.testing.assert_array_equal(run("floor_mod", x, y), [a % b for a, b in pairs])
    np.testing.assert_array_equal(run("truncate_div", x, y), [int(a / b) for a, b in pairs])
    np.testing.assert_array_equal(run("truncate_mod", x, y),
                                  [int(math.fmod(a, b)) for a, b in pairs])


def test_float_floor_division_is_floor_of_quotient():
    x, y = np.float32([1.0, -1.0, -7.5, 7.5]), np.float32([0.1, 0.1, 2.0, -2.0])
    np.testing.assert_array_equal(run("floor_div", x, y), np.floor(x / y))
    np.testing.assert_allclose(run("floor_mod", x, y), [0.1, 1.5e-8, 0.5, -0.5],
                               **T.FLOAT32_KERNEL.kwargs)
    np.testing.assert_array_equal(run("truncate_div", x, y), [10.0, -10.0, -3.0, -3.0])


def test_round_is_half_to_even():
    x = np.float32([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.51])
    np.testing.assert_array_equal(run("round", x), [-2, -2, -0, 0, 2, 2, 3])


def test_no_nan_variants_and_x_ops_give_zero():
    x, y = np.float32([1.0, np.inf, 0.0, 2.0]), np.float32([0.0, 0.0, 0.0, 4.0])
    np.testing.assert_array_equal(run("div_no_nan", x, y), [0, 0, 0, 0.5])
    np.testing.assert_array_equal(run("mul_no_nan", x, y), [0, 0, 0, 8])
    np.testing.assert_array_equal(run("xlogy", np.float32([0, 0]), np.float32([0, -1])), [0, 0])
    np.testing.assert_array_equal(run("xdivy", np.float32([0, 3]), np.float32([0, 2])), [0, 1.5])


def test_erf_matches_math_erf():
    x = np.concatenate([np.linspace(-6, 6, 2001), np.geomspace(1e-20, 1, 50)])
    want = [math.erf(v) for v in x]
    T.FLOAT32_ERF.assert_close(run("erf", x), want)
    np.testing.assert_array_equal(run("erf", np.float32([np.inf, -np.inf])), [1, -1])
    assert np.isnan(run("erf", np.float32([np.nan])))[0]


def test_erfc_matches_math_erfc_without_cancellation():
    x = np.concatenate([np.linspace(-6, 9, 3001), np.geomspace(1e-20, 1, 50)])
    want = [math.erfc(v) for v in x]
    T.FLOAT32_ERFC.assert_close(run("erfc", x), want)


def test_unary_gradients():
    y, dy = np.float32([0.25, 0.5, 2.0]), np.float32([1.0, -2.0, 3.0])
    T.EXACT.assert_close(run("tanh_grad", y, dy), dy * (1 - y * y))
    T.EXACT.assert_close(run("sigmoid_grad", y, dy), dy * y * (1 - y))
    T.EXACT.assert_close(run("sqrt_grad", y, dy), 0.5 * dy / y)
    T.EXACT.assert_close(run("rsqrt_grad", y, dy), -0.5 * dy * y ** 3)
    T.EXACT.assert_close(run("reciprocal_grad", y, dy), -dy * y * y)


def test_cast_truncates_wraps_and_tests_nonzero():
    x = np.float32([-1.7, 1.7, 0.0, np.nan])
    np.testing.assert_array_equal(run("cast", x, dtype="int32")[:3], [-1, 1, 0])
    np.testing.assert_array_equal(run("cast", x, dtype="bool"), [True, True, False, True])
    np.testing.assert_array_equal(run("cast", np.int32([300, -1]), dtype="uint8"), [44, 255])


def test_clip_add_n_and_select():
    np.testing.assert_array_equal(run("clip", np.float32([0, 5]), np.float32(3), np.float32(1)),
                                  [3, 3])
    np.testing.assert_array_equal(run("add_n", I, I, I), 3 * I)
    rows = run("select", np.array([True, False]), F, -F, expand=1)
    np.testing.assert_array_equal(rows, np.stack([F[0], -F[1]]))


def import_op(tf_type, types, **attrs):
    node = FakeNode(tf_type, zeros_of(*types), **attrs)
    out, _, equations = node.run()
    return node.inputs, out, [(eq.op, eq.params) for eq in equations]


def test_div_import_depends_on_dtype():
    ints, floats = TensorType((3,), "int32"), TensorType((3,), "float32")
    assert import_op("Div", [ints, ints])[2] == [("truncate_div", {})]
    assert import_op("Div", [floats, floats])[2] == [("div", {})]


def test_round_of_integers_and_same_dtype_cast_are_free():
    ints = TensorType((3,), "int32")
    inputs, out, eqs = import_op("Round", [ints])
    assert out is inputs[0] and eqs == []
    inputs, out, eqs = import_op("Cast", [ints], DstT="int32")
    assert out is inputs[0] and eqs == []
    assert import_op("Cast", [ints], DstT="float16")[2] == [("cast", {"dtype": "float16"})]


def test_select_with_a_vector_condition_picks_rows():
    cond, x = TensorType((4,), "bool"), TensorType((4, 2, 3), "float32")
    _, out, eqs = import_op("Select", [cond, x, x])
    assert eqs == [("select", {"expand": 2})] and out.type == x
    assert import_op("Select", [TensorType((4, 2, 3), "bool"), x, x])[2] == [("select", {})]
