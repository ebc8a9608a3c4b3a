"""Rules and kernels of `ops/array.py` and `ops/indexing.py` against numpy; no TensorFlow."""
import json

import numpy as np
import pytest

from ipu_keras.errors import IndexOutOfRangeError
from ipu_keras._src.ir.types import TensorType, type_of
from ipu_keras._src.ops import all_ops, get_importer, get_op
from ipu_keras._src.ops import array as array_ops
from ipu_keras._src.ops import indexing
from ipu_keras._src.ops.builder import Builder
from ipu_keras._src.ops.registry import MAPPINGS, WORK_KINDS
from tests.ops.rules import FakeNode

MODULES = (array_ops, indexing)
IR_OPS = array_ops.IR_OPS + indexing.IR_OPS

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5
I = np.array([[2, -3, 0], [1, 4, -1]], np.int32)
IDX = np.array([[1, 0], [0, 2], [1, 0]], np.int32)

SAMPLES = [
    ("reshape", (X,), {"shape": (4, 6)}, X.reshape(4, 6)),
    ("transpose", (X,), {"perm": (2, 0, 1)}, X.transpose(2, 0, 1)),
    ("concat", (X, X[:, :1]), {"axis": 1}, np.concatenate([X, X[:, :1]], 1)),
    ("split", (X,), {"axis": 2, "sizes": (1, 3)}, tuple(np.split(X, [1], 2))),
    ("tile", (I,), {"multiples": (2, 1)}, np.tile(I, (2, 1))),
    ("broadcast_to", (I[:1],), {"shape": (3, 2, 3)}, np.broadcast_to(I[:1], (3, 2, 3))),
    ("pad", (I, np.int32(9)), {"paddings": ((1, 0), (0, 2)), "mode": "constant"},
     np.pad(I, ((1, 0), (0, 2)), constant_values=9)),
    ("pad", (X,), {"paddings": ((0, 1), (2, 1), (0, 0)), "mode": "reflect"},
     np.pad(X, ((0, 1), (2, 1), (0, 0)), mode="reflect")),
    ("reverse", (X,), {"axes": (0, 2)}, X[::-1, :, ::-1]),
    ("bitcast", (I,), {"dtype": "uint32"}, I.view(np.uint32)),
    ("bitcast", (I,), {"dtype": "int16"}, I.view(np.int16).reshape(2, 3, 2)),
    ("bitcast", (I[:, :2],), {"dtype": "int64"}, I[:, :2].copy().view(np.int64)[:, 0]),
    ("cumsum", (I,), {"axis": 1, "exclusive": True, "reverse": True},
     np.array([[-3, 0, 0], [3, -1, 0]], np.int32)),
    ("invert_permutation", (np.array([2, 0, 1], np.int32),), {},
     np.array([1, 2, 0], np.int32)),
    ("strided_slice", (X,), {"begin": (1, 2, 3), "sizes": (1, 2, 2), "strides": (1, -2, -3)},
     X[1:2, 2::-2, 3::-3]),
    ("strided_slice_grad", (np.ones((1, 2, 1), np.float32),),
     {"shape": (2, 3, 4), "begin": (1, 0, 3), "sizes": (1, 2, 1), "strides": (1, 2, 1)},
     np.isin(np.arange(24).reshape(2, 3, 4), [15, 23]).astype(np.float32)),
    # X[:, 1:] += X[:, :2] * 3: a run of 8 per row of X's (2, 12), every 12 from 4.
    ("slice_apply", (X, X[:, :2] * 3), {"binary": "add", "runs": (0, 8, 8, 2, 4, 12),
                                        "params": {}},
     np.concatenate([X[:, :1], X[:, 1:] + X[:, :2] * 3], 1)),
    ("slice_apply", (I, I[:1]), {"binary": "maximum", "runs": (0, 3, 3, 1, 3, 3),
                                 "params": {}},
     np.stack([I[0], np.maximum(I[1], I[0])])),
    ("gather", (X, IDX), {"axis": 1, "batch_dims": 0}, X[:, IDX]),
    ("gather", (X, IDX[:2]), {"axis": 1, "batch_dims": 1}, np.stack([X[0, IDX[0]],
                                                                      X[1, IDX[1]]])),
    ("gather_nd", (X, IDX), {}, X[IDX[:, 0], IDX[:, 1]]),
    ("scatter_nd", (I, np.array([[1, 2], [1, 2]]), np.int32([5, 6])), {"mode": "add"},
     I + np.array([[0, 0, 0], [0, 0, 11]], np.int32)),
    ("scatter_nd", (I, np.array([[0]]), np.int32([[7, 8, 9]])), {"mode": "update"},
     np.array([[7, 8, 9], [1, 4, -1]], np.int32)),
    ("segment_sum", (X[:, :, 0], np.array([[2, -1, 0], [2, 2, 1]])), {"num_segments": 3},
     np.array([X[0, 2, 0], X[1, 2, 0], X[0, 0, 0] + X[1, 0, 0] + X[1, 1, 0]], np.float32)),
    ("one_hot", (I, np.float32(2), np.float32(-1)), {"depth": 3, "axis": 1},
     np.where(I[:, None, :] == np.arange(3)[None, :, None], 2, -1).astype(np.float32)),
]


def run(op, *arrays, **params):
    """The kernel's results, checked against the types the shape rule promises."""
    opdef = get_op(op)
    expected = opdef.shape([type_of(a) for a in arrays], **params)
    got = opdef.kernel(*[np.asarray(a) for a in arrays], **params)
    got = got if isinstance(got, tuple) else (got,)
    assert all(isinstance(g, np.ndarray) for g in got), (op, [type(g) for g in got])
    assert [type_of(g) for g in got] == list(expected), (op, got, expected)
    return got if len(got) > 1 else got[0]


def test_every_op_has_all_rules():
    mine = {n for n, d in all_ops().items() if d.module in {m.__name__ for m in MODULES}}
    assert mine == set(IR_OPS)
    for name in IR_OPS:
        opdef = get_op(name)
        assert callable(opdef.shape) and callable(opdef.kernel) and callable(opdef.cost)
        assert opdef.mapping in MAPPINGS and not opdef.effect and not opdef.engine


def test_every_tf_type_has_an_importer():
    types = array_ops.TF_TYPES + indexing.TF_TYPES
    assert len(set(types)) == len(types)
    for tf_type in types:
        assert get_importer(tf_type) is not None, tf_type


def test_every_op_has_a_sample():
    assert {s[0] for s in SAMPLES} == set(IR_OPS)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s[0])
def test_kernel_matches_numpy(sample):
    op, arrays, params, want = sample
    got = run(op, *arrays, **params)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s[0])
def test_params_survive_json(sample):
    op, arrays, params, want = sample
    params = json.loads(json.dumps(params))
    got = run(op, *arrays, **params)
    np.testing.assert_array_equal(got[0] if isinstance(got, tuple) else got,
                                  want[0] if isinstance(want, tuple) else want)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s[0])
def test_cost_is_work(sample):
    op, arrays, params, _ = sample
    opdef = get_op(op)
    in_types = [type_of(a) for a in arrays]
    work = opdef.cost(in_types, opdef.shape(in_types, **params), **params)
    assert work.kind in WORK_KINDS and work.amount >= 0
    assert (work.kind == "none") == (op in ("reshape", "bitcast"))


@pytest.mark.parametrize("index", [
    np.s_[1:3, ::2], np.s_[::-1], np.s_[-1], np.s_[..., None, 1], np.s_[:, None, -10:10, ...],
    np.s_[3:0:-2, 5:], np.s_[None, 2, ..., ::-3], np.s_[..., 0, :], np.s_[-2:-9:-1],
])
def test_strided_slice_spec_matches_numpy_indexing(index):
    x = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    index = index if isinstance(index, tuple) else (index,)
    begin, end, strides, masks = _tf_spec(index)
    starts, sizes, steps, shape = indexing.strided_slice_spec(x.shape, begin, end, strides,
                                                              **masks)
    got = run("strided_slice", x, begin=starts, sizes=sizes, strides=steps).reshape(shape)
    np.testing.assert_array_equal(got, x[index])


def _tf_spec(index):
    """A numpy basic index as TF's (begin, end, strides, masks), like `Tensor.__getitem__`."""
    begin, end, strides, masks = [], [], [], dict.fromkeys(
        ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"), 0)
    for i, item in enumerate(index):
        b, e, s = 0, 0, 1
        if item is Ellipsis:
            masks["ellipsis_mask"] |= 1 << i
        elif item is None:
            masks["new_axis_mask"] |= 1 << i
        elif isinstance(item, int):
            b, e = item, item + 1
            masks["shrink_axis_mask"] |= 1 << i
        else:
            b, e, s = item.start or 0, item.stop or 0, item.step or 1
            masks["begin_mask"] |= (item.start is None) << i
            masks["end_mask"] |= (item.stop is None) << i
        begin.append(b), end.append(e), strides.append(s)
    return begin, end, strides, masks


def test_strided_slice_spec_rejects_what_tensorflow_rejects():
    with pytest.raises(IndexError):
        indexing.strided_slice_spec((3,), [3], [4], [1], shrink_axis_mask=1)
    with pytest.raises(ValueError):
        indexing.strided_slice_spec((3,), [0], [3], [0])
    with pytest.raises(IndexError):
        indexing.strided_slice_spec((3,), [0, 0], [1, 1], [1, 1])


@pytest.mark.parametrize("op, arrays, params", [
    ("gather", (X, np.array([0, 3])), {"axis": 1, "batch_dims": 0}),
    ("gather", (X, np.array([-1])), {"axis": 0, "batch_dims": 0}),
    ("gather_nd", (X, np.array([[2, 0]])), {}),
    ("scatter_nd", (I, np.array([[0, 3]]), np.int32([1])), {"mode": "update"}),
    ("segment_sum", (I, np.array([0, 2])), {"num_segments": 2}),
])
def test_out_of_range_indices_raise(op, arrays, params):
    with pytest.raises(IndexOutOfRangeError, match="Received: index="):
        get_op(op).kernel(*arrays, **params)


def test_shape_rules_reject_bad_operands():
    f32 = TensorType((2, 3), "float32")
    with pytest.raises(ValueError, match="Received"):
        get_op("reshape").shape([f32], shape=(4, 2))
    with pytest.raises(ValueError, match="Received"):
        get_op("concat").shape([f32, TensorType((2, 3), "int32")], axis=0)
    with pytest.raises(ValueError, match="Received"):
        get_op("bitcast").shape([TensorType((3,), "int16")], dtype="int32")
    with pytest.raises(ValueError, match="Received"):
        get_op("scatter_nd").shape([f32, TensorType((4, 1), "int32"), f32], mode="add")
    with pytest.raises(ValueError, match="every element of the update. Received"):
        get_op("slice_apply").shape([f32, TensorType((2, 2), "float32")], binary="add",
                                    runs=(0, 2, 2, 2, 2, 3), params={})
    with pytest.raises(ValueError, match="runs inside both"):
        get_op("slice_apply").shape([f32, TensorType((1, 2), "float32")], binary="add",
                                    runs=(0, 2, 2, 2, 0, 3), params={})
    with pytest.raises(ValueError, match="non-negative paddings. Received"):
        get_op("pad").shape([f32], paddings=((0, 1), (-1, 0)), mode="constant")


@pytest.mark.parametrize("s0, s1, r0, r1", [
    ([1], [1], [], []), ([2, 3], [3], [], [0]), ([2, 1], [1, 3], [1], [0]),
    ([1, 1, 4], [4], [0, 1], [0, 1]), ([], [2, 3], [0, 1], []),
    ([5, 1, 1], [1, 1], [1, 2], [0, 1, 2]),
])
def test_broadcast_gradient_args_like_tensorflow(s0, s1, r0, r1):
    assert array_ops.broadcast_gradient_args(s0, s1) == (r0, r1)


def test_range_values_follow_tensorflow_sizes():
    np.testing.assert_array_equal(array_ops.range_values(5, -4, -2, "int32"), [5, 3, 1, -1, -3])
    assert array_ops.range_values(3, 3, 1, "int64").shape == (0,)
    assert array_ops.range_values(3, 0, 1, "int32").shape == (0,)
    got = array_ops.range_values(0.1, 7.3, 0.37, "float32")
    assert got.dtype == np.float32 and got.shape == (20,)


def import_op(tf_type, *arrays, **attrs):
    node = FakeNode(tf_type, arrays, **attrs)
    out, ops, _ = node.run()
    return node, out, ops


def test_pass_throughs_and_no_op_reshapes_emit_nothing():
    for tf_type in ("StopGradient", "Snapshot", "PreventGradient", "CheckNumerics"):
        node, out, ops = import_op(tf_type, X)
        assert out is node.inputs[0] and ops == []
    assert import_op("Transpose", X, [0, 1, 2])[2] == []
    assert import_op("Tile", X, [1, 1, 1])[2] == []
    assert import_op("ReverseV2", X[:1], [0])[2] == []


def test_static_results_are_constants():
    _, out, ops = import_op("Shape", X, out_type="int64")
    assert ops == ["const"] and out.type == TensorType((3,), "int64")
    _, out, ops = import_op("BroadcastGradientArgs", [2, 1], [1, 3], T="int32")
    assert ops == ["const", "const"]
    assert import_op("InvertPermutation", np.int32([1, 2, 0]))[2] == ["const"]


def test_strided_slice_import_reshapes_shrunk_and_new_axes():
    begin, end, strides = np.int32([0, 1]), np.int32([0, 2]), np.int32([1, 1])
    _, out, ops = import_op("StridedSlice", X, begin, end, strides, ellipsis_mask=1,
                            new_axis_mask=0, shrink_axis_mask=2)
    assert ops == ["strided_slice", "reshape"] and out.type.shape == (2, 3)


def test_resource_gather_reads_the_variable_then_gathers():
    b, node = Builder(), FakeNode("ResourceGather", [np.int32([2, 0])], batch_dims=0)
    ref = object()
    node.inputs = [ref] + node.inputs
    node.variable_index = lambda r: 0 if r is ref else None
    node.variable_type = lambda r: TensorType((5, 3), "float32")
    out = get_importer("ResourceGather")(node, b)
    assert [eq.op for eq in b.equations] == ["read_var", "gather"]
    assert out.type == TensorType((2, 3), "float32")


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
@pytest.mark.parametrize("ids", ["uniform", "padding", "two-axes"])
def test_layered_adds_have_the_bits_of_numpys_add_at(ids, dtype):
    rng = np.random.default_rng(0)
    out = (rng.standard_normal((40, 6, 3)) * 8).astype(dtype)
    n = 3 * indexing._LAYERED_ADDS
    where = (rng.integers(0, 40, n),)
    if ids == "padding":      # one index far more often than `_MAX_LAYERS`
        where[0][: n // 2] = 7
    elif ids == "two-axes":
        where = (where[0], rng.integers(0, 6, n))
    updates = (rng.standard_normal((n,) + out.shape[len(where):]) * 8).astype(dtype)
    expected = out.copy()
    np.add.at(expected, where, updates)
    indexing._add_at(out, where, updates)
    np.testing.assert_array_equal(out.view(f"u{out.itemsize}"),
                                  expected.view(f"u{expected.itemsize}"))
