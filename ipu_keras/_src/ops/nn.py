"""Op family 'nn': dense layers, activations, softmax and losses.

Owns the IR ops `matmul` (every MatMul/BatchMatMul variant, transposes and batch
broadcasting folded into params), `bias_add`, `bias_add_grad`, one op per activation
and one per activation gradient (`relu`, `relu_grad`, ... from `_ACTIVATIONS`),
`softmax`, `log_softmax`, `softmax_xent`, `sparse_softmax_xent` and `l2_loss`, with
their TensorFlow importers. Kernels compute in the input dtype with the formulas of
TensorFlow's CPU kernels, so results agree with TensorFlow up to rounding.
"""
import math

import numpy as np

from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops import cores, simd
from ipu_keras._src.ops._common import (
    broadcast_shape, channel_axis, per_input_element, per_output_element, same_type,
)
from ipu_keras._src.ops.registry import FULL, Work, register_op, tf_import
from ipu_keras.errors import IndexOutOfRangeError

TF_TYPES = (
    "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "BiasAdd", "BiasAddV1",
    "BiasAddGrad", "Relu", "ReluGrad", "Relu6", "Relu6Grad", "Elu", "EluGrad", "Selu",
    "SeluGrad", "LeakyRelu", "LeakyReluGrad", "Softplus", "SoftplusGrad", "Softsign",
    "SoftsignGrad", "Softmax", "LogSoftmax", "SparseSoftmaxCrossEntropyWithLogits",
    "SoftmaxCrossEntropyWithLogits", "L2Loss", "InTopKV2",
)
"""The TensorFlow op types this module imports."""

IR_OPS = (
    "matmul", "bias_add", "bias_add_grad", "relu", "relu_grad", "relu6", "relu6_grad", "elu",
    "elu_grad", "selu", "selu_grad", "leaky_relu", "leaky_relu_grad", "softplus",
    "softplus_grad", "softsign", "softsign_grad", "softmax", "log_softmax", "softmax_xent",
    "sparse_softmax_xent", "l2_loss", "in_top_k",
)
"""The IR ops this module registers."""

# -- matmul -------------------------------------------------------------------------------


def _matrix(shape, transpose):
    rows, cols = shape[-2:]
    return (cols, rows) if transpose else (rows, cols)


def _matmul_shape(in_types, *, transpose_a=False, transpose_b=False, dtype=None):
    a, b = in_types
    if a.rank < 2 or b.rank < 2:
        raise ValueError(f"matmul expected operands of rank >= 2. Received: a={a}, b={b}")
    (m, k), (k2, n) = _matrix(a.shape, transpose_a), _matrix(b.shape, transpose_b)
    if k != k2:
        raise ValueError(
            "matmul expected the contracted dimensions to match. Received: "
            f"a={a}, b={b}, transpose_a={transpose_a}, transpose_b={transpose_b}"
        )
    batch = broadcast_shape(a.shape[:-2], b.shape[:-2])
    return [TensorType(batch + (m, n), dtype or a.dtype)]


def _matmul(a, b, *, transpose_a=False, transpose_b=False, dtype=None):
    dtype = np.dtype(dtype or a.dtype)
    work = np.float32 if dtype == np.float16 else dtype
    a, b = a.astype(work, copy=False), b.astype(work, copy=False)
    if transpose_a:
        a = np.swapaxes(a, -1, -2)
    if transpose_b:
        b = np.swapaxes(b, -1, -2)
    return cores.matmul(a, b).astype(dtype, copy=False)


def _matmul_cost(in_types, out_types, *, transpose_a=False, **_):
    contracted = _matrix(in_types[0].shape, transpose_a)[1]
    return Work("amp", out_types[0].size * contracted)


def _matmul_problem(in_types, out, params):
    """The planner's problem: `groups` products (the batch axes) of m x k by k x n."""
    a, b = in_types
    m, k = a.shape[-2:][::-1] if params.get("transpose_a") else a.shape[-2:]
    n = b.shape[-2] if params.get("transpose_b") else b.shape[-1]
    return dict(groups=math.prod(out.shape[:-2]), m=m, k=k, n=n, dtype=a.dtype,
                out_itemsize=out.itemsize, a_grouped=math.prod(a.shape[:-2]) > 1,
                b_grouped=math.prod(b.shape[:-2]) > 1)


def _matmul_is_function(in_types, out_types, **params):
    """A dot runs as a cached Poplar function unless IPU TensorFlow's algebraic
    simplifier makes it elementwise: once size-1 dimensions are dropped, an operand with
    only batch and contracting dimensions (m or n is 1) becomes a multiply and a reduce
    (graphcore/tensorflow@b2127bb, tensorflow/compiler/plugin/poplar/driver/passes/
    poplar_algebraic_simplifier.cc, `HandleDot`: `RemoveDegenerateDimensionFromDot`, then
    poplar_algebraic_simplifier/poplar_algebraic_simplifier_dot.cc,
    `OptimizeDotStrengthReduction`, on by default: IPUConfig's `dot_strength`)."""
    problem = _matmul_problem(in_types, out_types[0], params)
    return problem["m"] > 1 and problem["n"] > 1


register_op("matmul", shape=_matmul_shape, kernel=_matmul, cost=_matmul_cost, mapping="matmul",
            tile_rule="matmul", problem=_matmul_problem, function=_matmul_is_function)


@tf_import("MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
def _import_matmul(node, b):
    names = ("transpose_a", "transpose_b") if node.type == "MatMul" else ("adj_x", "adj_y")
    return b.emit(
        "matmul", node.inputs, transpose_a=bool(node.attr(names[0], False)),
        transpose_b=bool(node.attr(names[1], False)), dtype=node.out_types[0].dtype,
    )


# -- bias ---------------------------------------------------------------------------------


def _channel_axis(rank, data_format):
    return 1 if str(data_format).startswith("NC") else rank - 1


def _bias_shape(x, bias, data_format):
    return [1 if i != _channel_axis(x.ndim, data_format) else -1 for i in range(x.ndim)]


def _bias_add(x, bias, *, data_format="NHWC"):
    if _channel_axis(x.ndim, data_format) == x.ndim - 1 and x.ndim > 2 and x.size \
            and x.flags.c_contiguous:
        # One row per batch element with the bias tiled along it: numpy's loop then runs
        # over rows of H * W * C elements instead of C (0.71 -> 0.41 ms for the tutorial
        # CNN's first convolution). Same sums.
        rows = x.reshape(len(x), -1)
        row = np.tile(bias.astype(x.dtype, copy=False), rows.shape[1] // max(len(bias), 1))
        return np.add(rows, row, dtype=x.dtype).reshape(x.shape)
    return np.add(x, bias.reshape(_bias_shape(x, bias, data_format)), dtype=x.dtype)


def _bias_add_grad_shape(in_types, *, data_format="NHWC"):
    (dy,) = in_types
    return [TensorType((dy.shape[_channel_axis(dy.rank, data_format)],), dy.dtype)]


def _bias_add_grad(dy, *, data_format="NHWC"):
    channel = _channel_axis(dy.ndim, data_format)
    if channel == dy.ndim - 1 and dy.ndim > 2 and dy.size and dy.flags.c_contiguous:
        # The batch's rows added first (long contiguous rows), then the positions of the
        # row per channel: 1.03 -> 0.19 ms against one sum over the three axes.
        rows = dy.reshape(len(dy), -1).sum(axis=0, dtype=_accumulator(dy.dtype))
        sums = rows.reshape(-1, dy.shape[-1]).sum(axis=0)
    else:
        axes = tuple(i for i in range(dy.ndim) if i != channel)
        sums = np.sum(dy, axis=axes, dtype=_accumulator(dy.dtype))
    return sums.astype(dy.dtype, copy=False)


def _accumulator(dtype):
    """The dtype TensorFlow sums in: float32 for float16, else the dtype itself."""
    return np.float32 if dtype == np.float16 else dtype


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def _bias_add_tile_axes(shapes, out, params):
    """Strict tile rule: x element for element, the bias by the output's channel axis."""
    c_out = channel_axis(len(out), params)
    return [tuple(range(len(out)))] + [
        tuple(c_out if a == channel_axis(len(s), params) else FULL for a in range(len(s)))
        for s in shapes[1:]]


register_op("bias_add", shape=same_type, kernel=_bias_add, cost=per_output_element(),
            mapping="elementwise", rowwise=True, tile_rule="channel",
            tile_axes=_bias_add_tile_axes)
register_op("bias_add_grad", shape=_bias_add_grad_shape, kernel=_bias_add_grad,
            cost=per_input_element("reduce"), mapping="reduce", tile_rule="channel")


@tf_import("BiasAdd", "BiasAddV1", "BiasAddGrad")
def _import_bias(node, b):
    op = "bias_add_grad" if node.type == "BiasAddGrad" else "bias_add"
    return b.emit(op, node.inputs, data_format=_text(node.attr("data_format", "NHWC")))


# -- activations and their gradients ------------------------------------------------------

_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_SCALE_ALPHA = 1.7580993408473768599402175208123


def _relu(x):
    return simd.against(np.maximum, x, 0)


def relu_grad(g, x):
    """TensorFlow's ReluGrad, `g * (x > 0)`, the comparison written straight into an
    array of g's dtype (ones and zeros) and multiplied by g in place: the same products
    without a bool-to-float cast inside the multiply (64x26x26x32 float32: 0.71 -> 0.48
    ms)."""
    g, x = np.asarray(g), np.asarray(x)
    if g.shape != x.shape or g.dtype.kind != "f":
        return g * (x > 0)
    out = np.empty(g.shape, g.dtype)
    np.greater(x, 0, out=out, casting="unsafe")
    return np.multiply(out, g, out=out)


def _relu6(x):
    return simd.against(np.minimum, simd.against(np.maximum, x, 0), 6)


def _elu(x):
    return np.where(x < 0, np.exp(simd.against(np.minimum, x, 0)) - 1, x)


def _selu(x):
    return np.where(x < 0, _SELU_SCALE_ALPHA * (np.exp(simd.against(np.minimum, x, 0)) - 1),
                    _SELU_SCALE * x)


def _softplus(x):
    # Like TensorFlow: x where exp(x) may overflow, exp(x) where log1p(exp(x)) == exp(x).
    threshold = float(np.log(np.finfo(x.dtype).eps)) + 2.0
    e = np.exp(simd.against(np.minimum, x, -threshold))
    return np.where(x > -threshold, x, np.where(x < threshold, e, np.log1p(e)))


def _softplus_grad(g, x):
    with np.errstate(over="ignore"):
        return g / (np.exp(-x) + 1)


_ACTIVATIONS = (
    # (IR op, TensorFlow op, work kind, kernel, float attrs with defaults)
    ("relu", "Relu", "vector", _relu, ()),
    ("relu_grad", "ReluGrad", "vector", relu_grad, ()),
    ("relu6", "Relu6", "vector", _relu6, ()),
    ("relu6_grad", "Relu6Grad", "vector", lambda g, x: g * ((x > 0) & (x < 6)), ()),
    ("elu", "Elu", "transcendental", _elu, ()),
    ("elu_grad", "EluGrad", "vector", lambda g, y: np.where(y < 0, g * (y + 1), g), ()),
    ("selu", "Selu", "transcendental", _selu, ()),
    ("selu_grad", "SeluGrad", "vector",
     lambda g, y: np.where(y < 0, g * (y + _SELU_SCALE_ALPHA), g * _SELU_SCALE), ()),
    ("leaky_relu", "LeakyRelu", "vector",
     lambda x, alpha=0.2: np.where(x > 0, x, x * alpha), (("alpha", 0.2),)),
    ("leaky_relu_grad", "LeakyReluGrad", "vector",
     lambda g, x, alpha=0.2: np.where(x > 0, g, g * alpha), (("alpha", 0.2),)),
    ("softplus", "Softplus", "transcendental", _softplus, ()),
    ("softplus_grad", "SoftplusGrad", "transcendental", _softplus_grad, ()),
    ("softsign", "Softsign", "vector", lambda x: x / (np.abs(x) + 1), ()),
    ("softsign_grad", "SoftsignGrad", "vector", lambda g, x: g / np.square(np.abs(x) + 1), ()),
)


def _import_activation(op, attrs):
    def importer(node, b):
        params = {name: float(node.attr(name, default)) for name, default in attrs}
        return b.emit(op, node.inputs, **params)

    return importer


_CHAIN = {"relu": "nonlinearity", "relu_grad": "nonlinearity_grad"}
"""The activations of IPU TensorFlow's recomputed Conv -> Norm -> non-linearity chain."""

for _op, _tf_type, _kind, _kernel, _attrs in _ACTIVATIONS:
    register_op(_op, shape=same_type, cost=per_output_element(_kind), mapping="elementwise",
                kernel=cores.rowwise_kernel(_kernel) if _kind == "transcendental" else _kernel,
                rowwise=True, tile_rule="elementwise", chain=_CHAIN.get(_op))
    tf_import(_tf_type)(_import_activation(_op, _attrs))


# -- softmax and losses -------------------------------------------------------------------


def _shifted(logits):
    """logits - max along the last axis."""
    # The ufuncs' reduce: np.max and np.sum call it too, through a slower Python layer
    # (these kernels run every step on small batches, where that layer is most of the time).
    return logits - np.maximum.reduce(logits, axis=-1, keepdims=True)


def _shifted_exp_sum(logits):
    """(logits - max, sum(exp(logits - max))) along the last axis, keeping dims."""
    shifted = _shifted(logits)
    return shifted, np.add.reduce(np.exp(shifted), axis=-1, keepdims=True)


def _softmax(logits):
    if logits.ndim > 1:   # rows are independent: a slab of them per core when large
        return cores.rowwise(_softmax_rows, (logits,), logits.dtype)
    return _softmax_rows(logits)


def _softmax_rows(logits):
    exp = np.exp(_shifted(logits))   # one exp pass, for the sum and the result
    return exp * (1 / np.add.reduce(exp, axis=-1, keepdims=True))


def _log_softmax(logits):
    shifted, total = _shifted_exp_sum(logits)
    return shifted - np.log(total)


def _xent_shape(in_types, **_):
    logits = TensorType(broadcast_shape(in_types[0].shape, in_types[1].shape), in_types[0].dtype)
    return [TensorType(logits.shape[:-1], logits.dtype), logits]


def _sparse_xent_shape(in_types, **_):
    logits = in_types[0]
    return [TensorType(logits.shape[:-1], logits.dtype), logits]


def _softmax_xent(logits, labels):
    logits, labels = np.broadcast_arrays(logits, labels)
    shifted, total = _shifted_exp_sum(logits)
    loss = np.sum(labels * (np.log(total) - shifted), axis=-1)
    return loss, np.exp(shifted) / total - labels


def _sparse_softmax_xent(logits, labels):
    """An out-of-range label raises, as TensorFlow on the CPU does (on a GPU it gives NaN
    rows, which then train every weight into NaN)."""
    classes = logits.shape[-1]
    if labels.size and (labels.min() < 0 or labels.max() >= classes):
        bad = labels[(labels < 0) | (labels >= classes)].reshape(-1)[0]
        raise IndexOutOfRangeError(
            f"A sparse cross-entropy label expected a class index in [0, {classes}). "
            f"Received: label={int(bad)}. Check the labels fed to the loss (their number of "
            "classes, and no negative or NaN labels cast to integers); TensorFlow on the "
            "CPU rejects them too.", op="sparse_softmax_xent")
    shifted, total = _shifted_exp_sum(logits)
    rows = shifted.reshape(-1, classes)
    picked = rows[np.arange(len(rows)), labels.ravel()].reshape(np.shape(labels))
    loss = np.log(total[..., 0]) - picked
    backprop = np.exp(shifted) / total - (np.arange(classes) == labels[..., None])
    return loss.astype(logits.dtype, copy=False), backprop.astype(logits.dtype, copy=False)


def _per_logit(kind):
    """Cost rule: one unit of `kind` work per element of the first input."""
    return lambda in_types, out_types, **_: Work(kind, in_types[0].size)


def _l2_loss_shape(in_types, **_):
    return [TensorType((), in_types[0].dtype)]


def _l2_loss(x):
    return np.sum(np.square(x) * 0.5, dtype=_accumulator(x.dtype)).astype(x.dtype)


for _op, _shape, _kernel, _kind, _tf_type in (
    ("softmax", same_type, _softmax, "transcendental", "Softmax"),
    ("log_softmax", same_type, _log_softmax, "transcendental", "LogSoftmax"),
    ("softmax_xent", _xent_shape, _softmax_xent, "transcendental",
     "SoftmaxCrossEntropyWithLogits"),
    ("sparse_softmax_xent", _sparse_xent_shape, _sparse_softmax_xent, "transcendental",
     "SparseSoftmaxCrossEntropyWithLogits"),
    ("l2_loss", _l2_loss_shape, _l2_loss, "reduce", "L2Loss"),
):
    # l2_loss: whole rows for the strict tile rule, but exchanged as a reduction tree
    # (`exchange` stays "tree"), as the two tables it replaces had it: no behaviour change.
    register_op(_op, shape=_shape, kernel=_kernel, cost=_per_logit(_kind), mapping="reduce",
                tile_rule="rows", exchange="tree" if _op == "l2_loss" else "rows")
    tf_import(_tf_type)(lambda node, b, _op=_op: list(_as_tuple(b.emit(_op, node.inputs))))


def _as_tuple(outputs):
    return outputs if isinstance(outputs, tuple) else (outputs,)


# -- in_top_k -----------------------------------------------------------------------------
# TensorFlow's rule: a row is in the top k when fewer than k predictions are strictly
# greater than the target's; a target out of range or a non-finite prediction is not.


def _in_top_k_shape(in_types, *, k):
    predictions, targets = in_types
    return [TensorType(targets.shape, "bool")]


def _in_top_k(predictions, targets, *, k):
    rows = np.arange(predictions.shape[0])
    valid = (targets >= 0) & (targets < predictions.shape[1])
    target = predictions[rows, np.where(valid, targets, 0)]
    greater = np.sum(predictions > target[:, None], axis=1)
    finite = np.all(np.isfinite(predictions), axis=1)
    return valid & finite & (greater < k)


register_op("in_top_k", shape=_in_top_k_shape, kernel=_in_top_k,
            cost=lambda in_types, out_types, **_: Work("reduce", in_types[0].size),
            mapping="reduce", tile_rule="rows", exchange="rows")


@tf_import("InTopKV2")
def _import_in_top_k(node, b):
    predictions, targets = node.inputs[:2]
    return b.emit("in_top_k", [predictions, targets], k=int(node.static(2)))
