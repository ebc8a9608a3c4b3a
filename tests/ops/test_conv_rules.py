"""The rules of the 'conv', 'pool' and 'norm' op families, without TensorFlow.

Each registered op has every rule; each kernel returns exactly what its shape rule says
and agrees with a float64 reference written as plain loops over windows; cost rules
count the stated units; params survive a JSON round trip; shape rules reject bad
operands; importers build the expected equations from a fake node.
"""
import itertools
import json
import subprocess
import sys

import numpy as np
import pytest

from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.ir.types import TensorType, type_of
from ipu_keras._src.ops import conv, get_importer, get_op, norm, pool
from ipu_keras._src.ops.registry import WORK_KINDS, Work
from tests.ops.rules import FakeNode, every_op_is_sampled

rng = np.random.default_rng(0)


def f32(*shape):
    return rng.uniform(-2, 2, shape).astype(np.float32)


# -- float64 references: loops over (output position, kernel offset, input position) ------


def _taps(x_shape, kernel, strides, dilations, padding):
    """Every (output index, kernel offset, input index) of a window that is not padding."""
    spatial = x_shape[1:-1]
    out = conv.out_spatial(spatial, kernel, strides, dilations, padding)
    for o in itertools.product(*map(range, out)):
        for k in itertools.product(*map(range, kernel)):
            i = tuple(a * s + b * d - lo for a, b, s, d, (lo, _) in zip(
                o, k, strides, dilations, padding))
            if all(0 <= j < n for j, n in zip(i, spatial)):
                yield (slice(None),) + o, k, (slice(None),) + i


def _groups(c, filter_shape):
    cg, o = filter_shape[-2:]
    g = c // cg
    return [(slice(j * cg, (j + 1) * cg), slice(j * o // g, (j + 1) * o // g)) for j in range(g)]


def ref_conv(x, w, strides, dilations, padding):
    out = conv.out_spatial(x.shape[1:-1], w.shape[:-2], strides, dilations, padding)
    y = np.zeros((x.shape[0],) + out + (w.shape[-1],))
    for o, k, i in _taps(x.shape, w.shape[:-2], strides, dilations, padding):
        for cs, os_ in _groups(x.shape[-1], w.shape):
            y[o + (os_,)] += x[i + (cs,)] @ w[k + (slice(None), os_)]
    return y


def ref_input_grad(w, dy, input_shape, strides, dilations, padding):
    dx = np.zeros(input_shape)
    for o, k, i in _taps(input_shape, w.shape[:-2], strides, dilations, padding):
        for cs, os_ in _groups(input_shape[-1], w.shape):
            dx[i + (cs,)] += dy[o + (os_,)] @ w[k + (slice(None), os_)].T
    return dx


def ref_filter_grad(x, dy, filter_shape, strides, dilations, padding):
    dw = np.zeros(filter_shape)
    for o, k, i in _taps(x.shape, filter_shape[:-2], strides, dilations, padding):
        for cs, os_ in _groups(x.shape[-1], filter_shape):
            dw[k + (slice(None), os_)] += x[i + (cs,)].T @ dy[o + (os_,)]
    return dw


def _windows(x, ksize, strides, padding):
    """(output index, its window's non-padded input indices in row-major order) pairs."""
    ones = (1,) * len(ksize)
    taps = {}
    for o, _, i in _taps(x.shape, ksize, strides, ones, padding):
        taps.setdefault(o[1:], []).append(i)
    return [((slice(None),) + o, window) for o, window in taps.items()]


def ref_max_pool(x, ksize, strides, padding):
    out = conv.out_spatial(x.shape[1:-1], ksize, strides, (1,) * len(ksize), padding)
    y = np.zeros((x.shape[0],) + out + (x.shape[-1],))
    for o, taps in _windows(x, ksize, strides, padding):
        y[o] = np.max([x[i] for i in taps], axis=0)
    return y


def ref_avg_pool(x, ksize, strides, padding):
    out = conv.out_spatial(x.shape[1:-1], ksize, strides, (1,) * len(ksize), padding)
    y = np.zeros((x.shape[0],) + out + (x.shape[-1],))
    for o, taps in _windows(x, ksize, strides, padding):
        y[o] = np.mean([x[i] for i in taps], axis=0)
    return y


def ref_max_pool_grad(x, y, dy, ksize, strides, padding, ties="first"):
    dx = np.zeros(x.shape)
    for o, taps in _windows(x, ksize, strides, padding):
        values = np.array([x[i] for i in taps])
        winners = values == values.max(axis=0)
        if ties == "first":
            winners = np.arange(len(taps))[:, None, None] == winners.argmax(axis=0)
        for i, won in zip(taps, winners):
            dx[i] += np.where(won, dy[o], 0)
    return dx


def ref_avg_pool_grad(dy, input_shape, ksize, strides, padding):
    dx = np.zeros(input_shape)
    for o, taps in _windows(np.zeros(input_shape), ksize, strides, padding):
        for i in taps:
            dx[i] += dy[o] / len(taps)
    return dx


def ref_batch_norm(x, scale, offset, mean, var, epsilon, factor=1.0, training=True, **_):
    if not training:
        return (x - mean) / np.sqrt(var + epsilon) * scale + offset, mean, var, mean, var
    axes = tuple(range(x.ndim - 1))
    n = x.size // x.shape[-1]
    m, v = x.mean(axes), x.var(axes)
    running = ((1 - factor) * mean + factor * m, (1 - factor) * var + factor * v * n / (n - 1))
    return ((x - m) / np.sqrt(v + epsilon) * scale + offset,) + running + (m, v)


def ref_batch_norm_grad(dy, x, scale, mean, var, epsilon, training=True, **_):
    axes = tuple(range(x.ndim - 1))
    xhat = (x - mean) / np.sqrt(var + epsilon)
    dscale, doffset = (dy * xhat).sum(axes), dy.sum(axes)
    if not training:
        return dy * scale / np.sqrt(var + epsilon), dscale, doffset
    n = x.size // x.shape[-1]
    dx = scale / np.sqrt(var + epsilon) * (dy - doffset / n - xhat * dscale / n)
    return dx, dscale, doffset


# -- samples ------------------------------------------------------------------------------

SAME2 = {"strides": (2, 2), "dilations": (1, 1), "padding": ((1, 1), (0, 1))}
DIL = {"strides": (1, 2), "dilations": (2, 1), "padding": ((2, 1), (0, 0))}
P1 = {"strides": (2,), "dilations": (3,), "padding": ((1, 2),)}
P3 = {"strides": (1, 2, 1), "dilations": (1, 1, 2), "padding": ((0, 0), (1, 1), (2, 2))}
X4, W4 = f32(2, 5, 6, 4), f32(3, 2, 4, 3)
XG, WG = f32(2, 5, 6, 4), f32(3, 2, 2, 6)           # two groups
XD, WD = f32(1, 6, 5, 3), f32(3, 3, 1, 6)           # depthwise: three groups
X1, W1 = f32(2, 9, 2), f32(3, 2, 3)
X5, W5 = f32(1, 3, 5, 4, 2), f32(2, 3, 2, 2, 3)
POOL = {"ksize": (3, 2), "strides": (2, 1), "padding": ((1, 1), (0, 1))}
POOL3 = {"ksize": (2, 2, 3), "strides": (1, 2, 2), "padding": ((0, 1), (0, 0), (1, 1))}
TIES = rng.integers(0, 3, (2, 5, 6, 3)).astype(np.float32)
TIES3 = rng.integers(0, 3, (1, 3, 4, 5, 2)).astype(np.float32)
BN_X, BN_S, BN_O, BN_M, BN_V = f32(2, 3, 4, 5), f32(5), f32(5), f32(5), f32(5) ** 2 + 0.5
BN = {"epsilon": 1e-3, "data_format": "NHWC"}


def _conv_samples():
    for x, w, p in ((X4, W4, SAME2), (X4, W4, DIL), (XG, WG, SAME2), (XD, WD, DIL),
                    (X1, W1, P1), (X5, W5, P3)):
        dy = f32(*ref_conv(x, w, **p).shape)
        yield "conv", (x, w), p, lambda x, w, p=p: ref_conv(x, w, **p)
        yield ("conv_input_grad", (w, dy), {"input_shape": x.shape, **p},
               lambda w, dy, p=p, s=x.shape: ref_input_grad(w, dy, s, **p))
        yield ("conv_filter_grad", (x, dy), {"filter_shape": w.shape, **p},
               lambda x, dy, p=p, s=w.shape: ref_filter_grad(x, dy, s, **p))


def _pool_samples():
    for x, p in ((X4, POOL), (TIES, POOL), (TIES3, POOL3)):
        y = ref_max_pool(x, **p).astype(np.float32)
        dy = f32(*y.shape)
        yield "max_pool", (x,), p, lambda x, p=p: ref_max_pool(x, **p)
        yield "avg_pool", (x,), p, lambda x, p=p: ref_avg_pool(x, **p)
        for ties in ("first", "all"):
            yield ("max_pool_grad", (x, y, dy), {"ties": ties, **p},
                   lambda x, y, dy, p=p, t=ties: ref_max_pool_grad(x, y, dy, ties=t, **p))
        yield ("avg_pool_grad", (dy,), {"input_shape": x.shape, **p},
               lambda dy, p=p, s=x.shape: ref_avg_pool_grad(dy, s, **p))


def _norm_samples():
    args = (BN_X, BN_S, BN_O, BN_M, BN_V)
    for params in ({"factor": 1.0}, {"factor": 0.25}, {"training": False}):
        p = {**BN, **params}
        yield "batch_norm", args, p, lambda *a, p=p: ref_batch_norm(*a, **p)
    dy = f32(*BN_X.shape)
    for training in (True, False):
        p = {**BN, "training": training}
        yield ("batch_norm_grad", (dy, BN_X, BN_S, BN_M, BN_V), p,
               lambda *a, p=p: ref_batch_norm_grad(*a, **p))


XI, WI = rng.integers(-9, 9, (1, 4, 5, 2)).astype(np.int32), rng.integers(-9, 9, (2, 2, 2, 3))
SAMPLES = list(_conv_samples()) + list(_pool_samples()) + list(_norm_samples()) + [
    ("conv", (XI, WI.astype(np.int32)), SAME2, lambda x, w: ref_conv(x, w, **SAME2)),
]


def _round_trip(params):
    return json.loads(json.dumps(params))


def test_every_op_has_all_rules_and_a_sample():
    every_op_is_sampled(conv.IR_OPS + pool.IR_OPS + norm.IR_OPS, SAMPLES)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s[0])
def test_kernel_matches_rule_and_reference(sample):
    op, inputs, params, reference = sample
    opdef = get_op(op)
    types = opdef.shape([type_of(x) for x in inputs], **params)
    outputs = opdef.kernel(*inputs, **_round_trip(params))
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    expected = reference(*(x.astype(np.float64) for x in inputs))  # exact for the integers
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert [type_of(o) for o in outputs] == types
    for got, want in zip(outputs, expected):
        T.FLOAT32_KERNEL.assert_close(got, want)
    work = opdef.cost([type_of(x) for x in inputs], types, **params)
    assert isinstance(work, Work) and work.kind in WORK_KINDS and work.amount >= 0


# -- rules --------------------------------------------------------------------------------


def _t(*shape):
    return TensorType(shape, "float32")


def test_cost_units():
    x, w, dy = _t(2, 5, 6, 4), _t(3, 2, 2, 6), _t(2, 3, 3, 6)
    params = SAME2
    macs = Work("amp", dy.size * 3 * 2 * 2)  # per output: kernel volume x group channels
    assert get_op("conv").cost([x, w], [dy], **params) == macs
    assert get_op("conv_input_grad").cost([w, dy], [x], input_shape=x.shape, **params) == macs
    assert get_op("conv_filter_grad").cost([x, dy], [w], filter_shape=w.shape,
                                           **params) == macs
    pooled = get_op("max_pool").shape([x], **POOL)
    assert get_op("max_pool").cost([x], pooled, **POOL) == Work("reduce", x.size)
    assert get_op("avg_pool_grad").cost(pooled, [x], input_shape=x.shape,
                                        **POOL) == Work("reduce", x.size)
    stats = [_t(4)] * 4
    assert get_op("batch_norm").cost([x] + stats, [x] + stats, **BN).kind == "vector"
    assert get_op("conv").mapping == "matmul" and get_op("max_pool").mapping == "reduce"


@pytest.mark.parametrize("mode, size, kernel, stride, dilation, expected", [
    ("SAME", 7, 3, 2, 1, (1, 1)),
    ("SAME", 6, 3, 2, 1, (0, 1)),
    ("SAME", 5, 3, 1, 2, (2, 2)),
    ("SAME", 4, 1, 3, 1, (0, 0)),
    ("VALID", 7, 3, 2, 1, (0, 0)),
])
def test_padding_follows_tensorflow(mode, size, kernel, stride, dilation, expected):
    assert conv.resolve_padding(mode, (size,), (kernel,), (stride,), (dilation,)) == (expected,)
    out = conv.out_spatial((size,), (kernel,), (stride,), (dilation,), (expected,))
    assert out == ((-(-size // stride)) if mode == "SAME" else
                   (size - (kernel - 1) * dilation - 1) // stride + 1,)


@pytest.mark.parametrize("op, in_types, params, match", [
    ("conv", [_t(1, 5, 5, 3), _t(3, 3, 2, 4)], SAME2, "groups"),
    ("conv", [_t(1, 5, 5, 4), _t(3, 3, 2, 3)], SAME2, "groups"),
    ("conv", [_t(1, 5, 5, 4), _t(3, 4, 4)], SAME2, "rank"),
    ("conv_input_grad", [_t(3, 3, 4, 2), _t(1, 2, 2, 2)],
     {"input_shape": (1, 5, 6, 4), **SAME2}, "output of shape"),
    ("max_pool", [_t(1, 2, 2, 3)], {"ksize": (3, 3), "strides": (1, 1),
                                    "padding": ((0, 0), (0, 0))}, "fits"),
    ("max_pool_grad", [_t(1, 5, 6, 3), _t(1, 3, 6, 3), _t(1, 3, 6, 3)],
     {"ties": "last", **POOL}, "ties"),
    ("batch_norm", [_t(2, 3, 4), _t(3)] + [_t(3)] * 3, BN, "one entry per channel"),
])
def test_shape_rules_reject_bad_operands(op, in_types, params, match):
    with pytest.raises(ValueError, match=match):
        get_op(op).shape(in_types, **params)


def test_max_pool_of_integers_pads_with_the_lowest_value():
    x = -rng.integers(1, 9, (1, 3, 3, 1)).astype(np.int32)
    y = get_op("max_pool").kernel(x, ksize=(2, 2), strides=(2, 2),
                                  padding=((0, 1), (0, 1)))
    assert y.dtype == np.int32 and y[0, 1, 1, 0] == x[0, 2, 2, 0]


# -- importers ----------------------------------------------------------------------------


CONV_ATTRS = {"strides": [1, 2, 2, 1], "padding": "SAME", "data_format": "NHWC"}


def test_conv2d_importer_resolves_same_padding():
    node = FakeNode("Conv2D", [X4, W4], dilations=[1, 1, 1, 1], **CONV_ATTRS)
    y, ops, eqns = node.run()
    assert ops == ["conv"] and y.type == TensorType((2, 3, 3, 3), "float32")
    assert eqns[0].params == {"strides": (2, 2), "dilations": (1, 1),
                              "padding": ((1, 1), (0, 0))}


def test_conv2d_importer_takes_explicit_padding_and_nchw():
    x = X4.transpose(0, 3, 1, 2)
    node = FakeNode("Conv2D", [x, W4], strides=[1, 1, 1, 1], padding="EXPLICIT",
                    explicit_paddings=[0, 0, 0, 0, 1, 2, 0, 1], data_format="NCHW")
    y, ops, eqns = node.run()
    assert ops == ["transpose", "conv", "transpose"]
    assert eqns[1].params["padding"] == ((1, 2), (0, 1))
    assert y.type == TensorType((2, 3, 6, 6), "float32")


def test_depthwise_importers_reshape_the_filter():
    w = f32(3, 3, 4, 2)
    _, ops, eqns = FakeNode("DepthwiseConv2dNative", [X4, w], **CONV_ATTRS).run()
    assert ops == ["reshape", "conv"] and eqns[0].params == {"shape": (3, 3, 1, 8)}
    dy = f32(2, 3, 3, 8)
    node = FakeNode("DepthwiseConv2dNativeBackpropFilter", [X4, np.int32([3, 3, 4, 2]), dy],
                    statics={1: np.int32([3, 3, 4, 2])}, **CONV_ATTRS)
    dw, ops, eqns = node.run()
    assert ops == ["conv_filter_grad", "reshape"] and dw.type == type_of(w)
    assert eqns[0].params["filter_shape"] == (3, 3, 1, 8)


def test_backprop_input_importer_uses_the_static_input_sizes():
    dy = f32(2, 3, 3, 3)
    node = FakeNode("Conv2DBackpropInput", [np.int32(X4.shape), W4, dy],
                    statics={0: np.int32(X4.shape)}, **CONV_ATTRS)
    dx, ops, eqns = node.run()
    assert ops == ["conv_input_grad"] and dx.type == type_of(X4)
    assert eqns[0].params["input_shape"] == X4.shape


def test_unsupported_batch_strides_are_reported():
    from ipu_keras.errors import UnsupportedOpError

    node = FakeNode("Conv2D", [X4, W4], strides=[2, 1, 1, 1], padding="VALID")
    with pytest.raises(UnsupportedOpError, match="batch and channel"):
        node.run()


def test_pool_importers():
    attrs = {"ksize": [1, 3, 2, 1], "strides": [1, 2, 1, 1], "padding": "VALID"}
    y, ops, eqns = FakeNode("MaxPool", [X4], **attrs).run()
    assert ops == ["max_pool"] and eqns[0].params == {
        "ksize": (3, 2), "strides": (2, 1), "padding": ((0, 0), (0, 0))}
    x5, y5 = f32(1, 4, 4, 4, 2), f32(1, 2, 2, 2, 2)
    attrs3 = {"ksize": [1, 2, 2, 2, 1], "strides": [1, 2, 2, 2, 1], "padding": "VALID"}
    _, ops, eqns = FakeNode("MaxPool3DGrad", [x5, y5, y5], **attrs3).run()
    assert ops == ["max_pool_grad"] and eqns[0].params["ties"] == "all"
    node = FakeNode("AvgPoolGrad", [np.int32(X4.shape), f32(*y.type.shape)],
                    statics={0: np.int32(X4.shape)}, **attrs)
    dx, ops, _ = node.run()
    assert ops == ["avg_pool_grad"] and dx.type == type_of(X4)


def test_batch_norm_importers_give_one_value_per_output():
    args = [BN_X, BN_S, BN_O, np.zeros(0, np.float32), np.zeros(0, np.float32)]
    outputs, ops, _ = FakeNode("FusedBatchNormV3", args, epsilon=1e-3).run()
    assert ops == ["batch_norm", "const"] and len(outputs) == 6
    assert outputs[5].type == TensorType((0,), "float32")
    outputs, _, _ = FakeNode("FusedBatchNorm", args, epsilon=1e-3).run()
    assert len(outputs) == 5
    grads, ops, _ = FakeNode("FusedBatchNormGradV3", [BN_X, BN_X, BN_S, BN_M, BN_V,
                                                      np.zeros(0, np.float32)]).run()
    assert ops[0] == "batch_norm_grad" and len(grads) == 5 and grads[0].type == type_of(BN_X)


def test_every_tf_type_has_an_importer():
    assert all(get_importer(t) for t in conv.TF_TYPES + pool.TF_TYPES + norm.TF_TYPES)


def test_ops_import_without_tensorflow():
    code = "import sys, ipu_keras._src.ops.conv, ipu_keras._src.ops.pool, ipu_keras._src.ops.norm; " \
           "assert 'tensorflow' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
