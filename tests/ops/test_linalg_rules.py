"""The rules of the 'linalg' and 'image' op families, without TensorFlow.

Each registered op has every rule and a sample; each kernel returns what its shape
rule says and agrees with a plain numpy reference; params survive a JSON round trip;
the space/batch importers compose ops that invert each other.
"""
import json

import numpy as np
import pytest

from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.ir.types import type_of
from ipu_keras._src.ops import get_op, image, linalg
from ipu_keras._src.ops.registry import WORK_KINDS, Work
from tests.ops.rules import FakeNode, every_op_is_sampled

rng = np.random.default_rng(0)
M = rng.uniform(-3, 3, (2, 3, 4)).astype(np.float32)
ZERO = np.float32(0)


def _band_reference(x, lower, upper):
    i, j = np.indices(x.shape[-2:])
    return np.where(((lower < 0) | (i - j <= lower)) & ((upper < 0) | (j - i <= upper)), x, 0)


def _bilinear_reference(x, size):
    """Half-pixel-centre bilinear resizing, one output pixel at a time, in float64."""
    n, h, w, c = x.shape
    out = np.zeros((n,) + tuple(size) + (c,))
    for oy in range(size[0]):
        for ox in range(size[1]):
            sy, sx = (oy + 0.5) * h / size[0] - 0.5, (ox + 0.5) * w / size[1] - 0.5
            y0, x0 = int(np.floor(sy)), int(np.floor(sx))
            fy, fx = sy - y0, sx - x0
            ys, xs = (max(y0, 0), min(y0 + 1, h - 1)), (max(x0, 0), min(x0 + 1, w - 1))
            out[:, oy, ox] = ((1 - fy) * ((1 - fx) * x[:, ys[0], xs[0]] + fx * x[:, ys[0], xs[1]])
                              + fy * ((1 - fx) * x[:, ys[1], xs[0]] + fx * x[:, ys[1], xs[1]]))
    return out


def _bilinear_grad_reference(dy, shape):
    """The adjoint of `_bilinear_reference`, from its matrix, column by column."""
    n, h, w, c = shape
    basis = np.eye(h * w).reshape(h * w, 1, h, w, 1)
    columns = np.stack([_bilinear_reference(e, dy.shape[1:3])[0, ..., 0] for e in basis])
    return np.einsum("khw,nhwc->nkc", columns, dy).reshape(shape)


IMG = rng.uniform(-1, 1, (2, 3, 4, 2)).astype(np.float32)
DY = rng.uniform(-1, 1, (2, 5, 7, 2)).astype(np.float32)
HALF = {"align_corners": False, "half_pixel_centers": True}

# (op, inputs, params, reference of every output)
SAMPLES = [
    ("matrix_diag", (M[0, :, :3], ZERO), {"k": (-1, 1), "rows": 3, "cols": 3,
                                          "align": "LEFT_LEFT"},
     lambda d, p: np.diag(d[0, :2], 1) + np.diag(d[1]) + np.diag(d[2, :2], -1)),
    ("matrix_diag", (M[0, 0], np.float32(5)), {"k": (1, 1), "rows": 4, "cols": 5,
                                               "align": "RIGHT_LEFT"},
     lambda d, p: np.where(np.eye(4, 5, 1) == 1, np.diag(d, 1)[:4], 5)),
    ("matrix_diag_part", (M, np.float32(9)), {"k": (0, 0), "align": "RIGHT_LEFT"},
     lambda x, p: np.diagonal(x, axis1=1, axis2=2)),
    ("matrix_diag_part", (M[0, :, :3], np.float32(9)), {"k": (-1, 1), "align": "RIGHT_LEFT"},
     lambda x, p: np.stack([np.append(9, np.diagonal(x, 1)), np.diagonal(x),
                            np.append(np.diagonal(x, -1), 9)])),
    ("matrix_set_diag", (M, M[:, :2, 1]), {"k": (-1, -1), "align": "RIGHT_LEFT"},
     lambda x, d: np.where(np.eye(3, 4, -1) == 1,
                           np.stack([np.pad(np.diag(r, -1), ((0, 0), (0, 1))) for r in d]), x)),
    ("band_part", (M,), {"lower": 1, "upper": 0}, lambda x: _band_reference(x, 1, 0)),
    ("band_part", (M,), {"lower": -1, "upper": 1}, lambda x: _band_reference(x, -1, 1)),
    ("resize_bilinear", (IMG,), {"size": (5, 7), **HALF},
     lambda x: _bilinear_reference(x, (5, 7))),
    ("resize_bilinear_grad", (DY,), {"input_shape": IMG.shape, "dtype": "float32", **HALF},
     lambda dy: _bilinear_grad_reference(dy, IMG.shape)),
]


def _run(op, inputs, params):
    opdef = get_op(op)
    types = opdef.shape([type_of(x) for x in inputs], **params)
    outputs = opdef.kernel(*inputs, **json.loads(json.dumps(params)))
    return opdef, types, outputs if isinstance(outputs, tuple) else (outputs,)


def test_every_op_has_all_rules_and_a_sample():
    every_op_is_sampled(linalg.IR_OPS + image.IR_OPS, SAMPLES)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s[0])
def test_kernel_matches_rule_and_reference(sample):
    op, inputs, params, reference = sample
    opdef, types, outputs = _run(op, inputs, params)
    expected = reference(*(x.astype(np.float64) for x in inputs))
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert [type_of(o) for o in outputs] == types
    for got, want in zip(outputs, expected):
        T.FLOAT32_KERNEL.assert_close(got, want)
    work = opdef.cost([type_of(x) for x in inputs], types, **params)
    assert isinstance(work, Work) and work.kind in WORK_KINDS and work.amount >= 0


def _import(tf_type, x, block, pads, out_shape):
    node = FakeNode(tf_type, [x, np.int32(block), np.int32(pads)], [(out_shape, "float32")])
    results, ops, equations = node.run()
    value = {v.id: a for v, a in zip(node.inputs, node.arrays)}
    for eq in equations:
        args = [value.get(v.id, None) for v in eq.inputs]
        outs = eq.params["value"] if eq.op == "const" else get_op(eq.op).kernel(*args,
                                                                                 **eq.params)
        value[eq.outputs[0].id] = outs
    return value[results.id], ops


def test_space_to_batch_and_back_invert_each_other():
    x = rng.uniform(-1, 1, (2, 3, 5, 2)).astype(np.float32)
    spaced, ops = _import("SpaceToBatchND", x, [2, 3], [[1, 0], [0, 1]], (12, 2, 2, 2))
    assert ops == ["const", "pad", "reshape", "transpose", "reshape"]
    back, ops = _import("BatchToSpaceND", spaced, [2, 3], [[1, 0], [0, 1]], (2, 3, 5, 2))
    assert "strided_slice" in ops
    np.testing.assert_array_equal(back, x)
