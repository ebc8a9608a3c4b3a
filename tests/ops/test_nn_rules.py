"""The rules of the 'nn' and 'reduce' op families, without TensorFlow.

Each registered op has every rule; each kernel returns exactly what its shape rule
says and agrees with a float64 numpy reference; cost rules return valid work; params
survive a JSON round trip; importers build the expected equations from a fake node.
"""
import json
import subprocess
import sys

import numpy as np
import pytest

from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.ir.types import TensorType, type_of
from ipu_keras._src.ops import cores, get_importer, get_op, nn, reduce
from ipu_keras._src.ops.registry import WORK_KINDS, Work
from ipu_keras.errors import IndexOutOfRangeError
from tests.ops.rules import FakeNode, every_op_is_sampled

rng = np.random.default_rng(0)
SCALE, SCALE_ALPHA = 1.0507009873554805, 1.0507009873554805 * 1.6732632423543772


def f32(*shape):
    return rng.uniform(-3, 3, shape).astype(np.float32)


def i32(*shape):
    return rng.integers(-9, 9, shape).astype(np.int32)


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def log_softmax(x):
    return x - x.max(-1, keepdims=True) - np.log(np.exp(x - x.max(-1, keepdims=True))
                                                   .sum(-1, keepdims=True))


X, G, A3, B3 = f32(3, 4), f32(3, 4), f32(2, 3, 4), f32(4, 5)
LABELS = np.array([0, 3, 1], np.int64)
ONEHOT = np.eye(4)[LABELS]
P = softmax(f32(3, 4)).astype(np.float32)

# (op, inputs, params, float64 reference of every output)
SAMPLES = [
    ("matmul", (A3, B3), {}, lambda a, b: a @ b),
    ("matmul", (A3, f32(1, 5, 4)), {"transpose_b": True}, lambda a, b: a @ b.swapaxes(1, 2)),
    ("matmul", (f32(4, 3), f32(4, 2)), {"transpose_a": True}, lambda a, b: a.T @ b),
    ("matmul", (i32(2, 3).astype(np.int8), i32(3, 2).astype(np.int8)), {"dtype": "int32"},
     lambda a, b: a.astype(int) @ b),
    ("bias_add", (A3, f32(4)), {}, lambda x, b: x + b),
    ("bias_add", (A3, f32(3)), {"data_format": "NCHW"}, lambda x, b: x + b[:, None]),
    ("bias_add_grad", (A3,), {}, lambda g: g.sum((0, 1))),
    ("bias_add_grad", (A3,), {"data_format": "NCHW"}, lambda g: g.sum((0, 2))),
    ("relu", (X,), {}, lambda x: np.where(x > 0, x, 0)),
    ("relu_grad", (G, X), {}, lambda g, x: np.where(x > 0, g, 0)),
    ("relu6", (X * 3,), {}, lambda x: np.clip(x, 0, 6)),
    ("relu6_grad", (G, X * 3), {}, lambda g, x: np.where((x > 0) & (x < 6), g, 0)),
    ("elu", (X,), {}, lambda x: np.where(x < 0, np.expm1(x), x)),
    ("elu_grad", (G, X), {}, lambda g, y: np.where(y < 0, g * (y + 1), g)),
    ("selu", (X,), {}, lambda x: np.where(x < 0, SCALE_ALPHA * np.expm1(x), SCALE * x)),
    ("selu_grad", (G, X), {},
     lambda g, y: np.where(y < 0, g * (y + SCALE_ALPHA), g * SCALE)),
    ("leaky_relu", (X,), {"alpha": 0.1}, lambda x: np.where(x > 0, x, 0.1 * x)),
    ("leaky_relu_grad", (G, X), {"alpha": 0.1}, lambda g, x: np.where(x > 0, g, 0.1 * g)),
    ("softplus", (X * 10,), {}, lambda x: np.logaddexp(0, x)),
    ("softplus_grad", (G, X * 10), {}, lambda g, x: g / (1 + np.exp(-x))),
    ("softsign", (X,), {}, lambda x: x / (1 + abs(x))),
    ("softsign_grad", (G, X), {}, lambda g, x: g / (1 + abs(x)) ** 2),
    ("softmax", (A3 * 10,), {}, softmax),
    ("log_softmax", (A3 * 10,), {}, log_softmax),
    ("softmax_xent", (X, P), {},
     lambda x, p: (-(p * log_softmax(x)).sum(-1), softmax(x) - p)),
    ("sparse_softmax_xent", (X, LABELS), {},
     lambda x, y: (-(ONEHOT * log_softmax(x)).sum(-1), softmax(x) - ONEHOT)),
    ("l2_loss", (X,), {}, lambda x: (x ** 2).sum() / 2),
    ("in_top_k", (np.float32([[0.1, 0.5, 0.4], [0.3, 0.3, 0.3], [1, np.inf, 0]]),
                  np.int32([2, 1, 0])), {"k": 2}, lambda p, t: np.array([True, True, False])),
    ("reduce_sum", (A3,), {"axes": (0, 2)}, lambda x: x.sum((0, 2))),
    ("reduce_sum", (A3,), {"axes": (), "keep_dims": True}, lambda x: x),
    ("reduce_mean", (A3,), {"axes": (1,), "keep_dims": True}, lambda x: x.mean(1, keepdims=1)),
    ("reduce_mean", (np.array([[-7, 0], [7, 1]], np.int32),), {"axes": (1,)},
     lambda x: np.array([-3, 4])),
    ("reduce_max", (A3,), {"axes": (0, 1, 2)}, lambda x: x.max()),
    ("reduce_min", (i32(3, 4),), {"axes": (1,)}, lambda x: x.min(1)),
    ("reduce_prod", (A3,), {"axes": (2,)}, lambda x: x.prod(2)),
    ("reduce_all", (A3 > -2,), {"axes": (0,)}, lambda x: x.all(0)),
    ("reduce_any", (A3 > 2,), {"axes": (1, 2)}, lambda x: x.any((1, 2))),
    ("reduce_euclidean_norm", (A3,), {"axes": (2,)}, lambda x: np.sqrt((x ** 2).sum(2))),
    ("reduce_euclidean_norm", (np.array([3, 5], np.int32),), {"axes": (0,)}, lambda x: 5),
    ("argmax", (np.array([[np.nan, 1, 3, 3]], np.float32),), {"axis": 1},
     lambda x: np.array([2])),
    ("argmin", (np.array([[2, 1], [1, 1]], np.int32),), {"axis": 0, "dtype": "int32"},
     lambda x: np.array([1, 0])),
    ("top_k", (np.array([[3, 1, 3, 2], [0, 5, 5, 5]], np.float32),), {"k": 3},
     lambda x: (np.array([[3, 3, 2], [5, 5, 5]]), np.array([[0, 2, 3], [1, 2, 3]]))),
]


def _round_trip(params):
    return json.loads(json.dumps(params))


def _run(op, inputs, params):
    opdef = get_op(op)
    types = opdef.shape([type_of(x) for x in inputs], **params)
    outputs = opdef.kernel(*inputs, **_round_trip(params))
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    return opdef, types, outputs


def test_every_op_has_all_rules_and_a_sample():
    every_op_is_sampled(nn.IR_OPS + reduce.IR_OPS, SAMPLES)


@pytest.mark.parametrize("sample", [s for s in SAMPLES if get_op(s[0]).rowwise],
                         ids=lambda s: s[0])
def test_a_rowwise_kernel_computes_each_row_from_the_same_rows(sample):
    """The engine's chains cut the operands' rows (`simulator/fusion.py`): the kernel on
    each row gives the bits of the whole (bias_add in both layouts, the activations)."""
    op, inputs, params, _ = sample
    whole = get_op(op).kernel(*inputs, **params)
    rows = [get_op(op).kernel(*[cores.rows_of(x, whole.shape, slice(r, r + 1))
                                for x in inputs], **params) for r in range(len(whole))]
    assert np.concatenate(rows).tobytes() == whole.tobytes()


def test_the_rowwise_ops_are_the_activations_and_bias_add():
    rowwise = {name for name in nn.IR_OPS if get_op(name).rowwise}
    assert rowwise == {"bias_add"} | {op for op, *_ in nn._ACTIVATIONS}


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s[0])
def test_kernel_matches_rule_and_reference(sample):
    op, inputs, params, reference = sample
    opdef, types, outputs = _run(op, inputs, params)
    expected = reference(*(x.astype(np.float64) if x.dtype.kind == "f" else x for x in inputs))
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert [type_of(o) for o in outputs] == types
    for got, want in zip(outputs, expected):
        T.FLOAT32_KERNEL.assert_close(got, want)
    work = opdef.cost([type_of(x) for x in inputs], types, **params)
    assert isinstance(work, Work) and work.kind in WORK_KINDS and work.amount >= 0


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_relu_grad_has_the_bits_of_tensorflows_product(dtype):
    """`g * (x > 0)` as TensorFlow computes it: negative zeros where g < 0, NaN where g is
    infinite or NaN, whatever x."""
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 2.5, -2.5])
    g, x = (np.array(a, dtype) for a in np.meshgrid(specials, specials))
    g = np.concatenate([g.ravel(), f32(4096).astype(dtype)])
    x = np.concatenate([x.ravel(), f32(4096).astype(dtype)])
    with np.errstate(invalid="ignore"):
        want = g * (x > 0)
        got = get_op("relu_grad").kernel(g, x)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_cost_units():
    a, b = TensorType((2, 3, 4), "float32"), TensorType((4, 5), "float32")
    out = get_op("matmul").shape([a, b])
    assert get_op("matmul").cost([a, b], out) == Work("amp", 2 * 3 * 5 * 4)
    assert get_op("reduce_sum").cost([a], [], axes=(0,)) == Work("reduce", 24)
    assert get_op("relu").cost([a], [a]) == Work("vector", 24)
    assert get_op("softmax").cost([a], [a]).kind == "transcendental"


def test_matmul_rule_rejects_mismatched_operands():
    with pytest.raises(ValueError, match="contracted"):
        get_op("matmul").shape([TensorType((2, 3), "float32"), TensorType((2, 3), "float32")])


@pytest.mark.parametrize("labels, bad", [([0, 4, 1], 4), ([0, 1, -1], -1),
                                         ([0, np.iinfo(np.int32).min, 1], -2**31)],
                         ids=["too large", "negative", "NaN cast to int"])
def test_sparse_xent_out_of_range_label_raises_as_on_the_cpu(labels, bad):
    kernel = get_op("sparse_softmax_xent").kernel
    with pytest.raises(IndexOutOfRangeError, match=rf"in \[0, {X.shape[-1]}\)\. "
                                                   rf"Received: label={bad}\.") as info:
        kernel(X, np.array(labels, np.int32))
    assert info.value.op == "sparse_softmax_xent"


def test_empty_reductions_start_from_the_identity():
    empty = np.zeros((0, 2), np.float32)
    assert (get_op("reduce_max").kernel(empty, axes=[0]) == -np.inf).all()
    assert (get_op("reduce_min").kernel(empty.astype(np.int32), axes=[0]) == 2**31 - 1).all()
    assert (get_op("reduce_prod").kernel(empty, axes=[0]) == 1).all()

@pytest.mark.parametrize("tf_type, kwargs, op, params", [
    ("MatMul", {"transpose_b": True}, "matmul",
     {"transpose_a": False, "transpose_b": True, "dtype": "float32"}),
    ("BatchMatMulV3", {"adj_x": True}, "matmul",
     {"transpose_a": True, "transpose_b": False, "dtype": "float32"}),
    ("BiasAddGrad", {"data_format": b"NCHW"}, "bias_add_grad", {"data_format": "NCHW"}),
    ("LeakyRelu", {"alpha": 0.3}, "leaky_relu", {"alpha": 0.3}),
    ("Mean", {"keep_dims": True}, "reduce_mean", {"axes": (0, 1), "keep_dims": True}),
    ("ArgMin", {"output_type": "int32"}, "argmin", {"axis": 1, "dtype": "int32"}),
])
def test_importers(tf_type, kwargs, op, params):
    x = f32(4, 4)
    out_types = [((4,), params.get("dtype", "float32"))]
    node = FakeNode(tf_type, [x, x][:1 + (op == "matmul")], out_types,
                    statics={1: np.array([-1, 0])} if op.startswith("reduce") else {1: -1},
                    **kwargs)
    eq = node.run()[2][-1]
    assert eq.op == op and eq.params == params


def test_every_tf_type_has_an_importer():
    assert all(get_importer(t) for t in nn.TF_TYPES + reduce.TF_TYPES)


def test_ops_import_without_tensorflow():
    code = "import sys, ipu_keras._src.ops; assert 'tensorflow' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_multi_output_importer_returns_one_value_per_output():
    node = FakeNode("SparseSoftmaxCrossEntropyWithLogits", [X, LABELS])
    outputs = get_importer(node.type)(node, node.builder)
    assert [v.type for v in outputs] == [TensorType((3,), "float32"), type_of(X)]
