"""The array op family (ops/array.py, ops/indexing.py) against TensorFlow on the CPU."""
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras
from ipu_keras._src.ops import array, indexing
from tests.ops.harness import boolean, case, check_case, f32, grad, i32, op_types

raw = tf.raw_ops


def _idx(values, dtype=np.int32):
    return np.asarray(values, dtype)


def dense(fn):
    """`fn` with its (possibly IndexedSlices) results converted to dense tensors."""
    return lambda *xs: tuple(tf.convert_to_tensor(g) for g in fn(*xs))


SHAPES = [
    case("Reshape", lambda x: tf.reshape(x, (6, 2)), f32(3, 4)),
    case("Reshape", lambda x: tf.reshape(x, (-1,)), i32(2, 3, 2), label="int-flatten"),
    case("Reshape", lambda x: tf.reshape(x, [tf.shape(x)[0], -1]), f32(2, 3, 4), label="dyn"),
    case("ExpandDims", lambda x: tf.expand_dims(x, -1), f32(3, 4)),
    case("Squeeze", lambda x: tf.squeeze(x, axis=[1]), f32(3, 1, 4)),
    case("Squeeze", lambda x: tf.squeeze(x), boolean(1, 3, 1), label="all"),
    case("Transpose", lambda x: tf.transpose(x, (2, 0, 1)), f32(2, 3, 4)),
    case("Transpose", lambda x: tf.transpose(x), i32(3, 5), label="default"),
    case("ConcatV2", lambda x, y: tf.concat([x, y, x], axis=-1), f32(2, 3), f32(2, 1)),
    case("ConcatV2", lambda x, y: tf.concat([x, y], 0), i32(1, 3), i32(2, 3), label="int"),
    case("Pack", lambda x, y: tf.stack([x, y], axis=1), f32(2, 3), f32(2, 3)),
    case("Pack", lambda x: tf.stack([x, x, x], axis=-1), i32(4), label="last"),
    case("Unpack", lambda x: tf.unstack(x, axis=1), f32(2, 3, 2)),
    case("Split", lambda x: tf.split(x, 3, axis=1), f32(2, 6)),
    case("SplitV", lambda x: tf.split(x, [1, -1, 2], axis=0), f32(6, 2)),
    case("Tile", lambda x: tf.tile(x, (2, 1, 3)), f32(2, 3, 1)),
    case("BroadcastTo", lambda x: tf.broadcast_to(x, (2, 3, 4)), f32(3, 1)),
    case("Fill", lambda x: tf.fill((2, 3), x[0]), f32(2)),
    case("Fill", lambda x: x + tf.fill((2, 3), 7), i32(2, 3), label="int-const"),
    case("Empty", lambda x: x + raw.Empty(shape=[2, 3], dtype=tf.float32, init=True),
         f32(2, 3)),
    case("Pad", lambda x: tf.pad(x, [[1, 0], [2, 3]]), f32(2, 3)),
    case("PadV2", lambda x: tf.pad(x, [[0, 1], [1, 1]], constant_values=-4), i32(2, 2)),
    case("MirrorPad", lambda x: tf.pad(x, [[1, 1], [2, 0]], mode="REFLECT"), f32(3, 3)),
    case("MirrorPad", lambda x: tf.pad(x, [[2, 1], [0, 3]], mode="SYMMETRIC"), f32(3, 3),
         label="symmetric"),
    case("ReverseV2", lambda x: tf.reverse(x, [0, -1]), f32(2, 3, 4)),
    case("Bitcast", lambda x: tf.bitcast(x, tf.uint32), i32(3, 2, low=-100, high=100)),
    case("Bitcast", lambda x: tf.bitcast(x, tf.int64), i32(3, 2, low=-100, high=100),
         label="widen"),
    case("Bitcast", lambda x: tf.bitcast(x, tf.int32), f32(4), label="float"),
    case("Cumsum", lambda x: tf.cumsum(x, axis=1), f32(3, 4)),
    case("Cumsum", lambda x: tf.cumsum(x, axis=0, exclusive=True, reverse=True), i32(4, 2),
         label="exclusive-reverse"),
]

STATIC = [
    case("Shape", lambda x: raw.Shape(input=x), f32(2, 3)),
    case("Shape", lambda x: raw.Shape(input=x, out_type=tf.int64), f32(4), label="int64"),
    case("ShapeN", lambda x, y: raw.ShapeN(input=[x, y]), f32(2, 3), f32(5)),
    case("Size", lambda x: raw.Size(input=x), f32(2, 3)),
    case("Rank", lambda x: raw.Rank(input=x) + tf.cast(x[0, 0], tf.int32), f32(2, 3)),
    case("Range", lambda x: tf.cast(x, tf.int32) + tf.range(1, 9, 3), f32(3)),
    case("Range", lambda x: x * tf.range(0.1, 7.3, 0.37), f32(20), label="float"),
    case("Range", lambda x: x + tf.range(5, -4, -2), i32(5), label="negative"),
    case("BroadcastGradientArgs",
         lambda x, y: raw.BroadcastGradientArgs(s0=raw.Shape(input=x), s1=raw.Shape(input=y)),
         f32(5, 1, 1), f32(1, 1)),
    case("InvertPermutation",
         lambda x: tf.transpose(x, tf.math.invert_permutation([2, 0, 1])), f32(2, 3, 4)),
    case("InvertPermutation", lambda x: tf.math.invert_permutation(x), _idx([3, 0, 2, 1]),
         label="output"),
]

PASS_THROUGH = [
    case("StopGradient", lambda x: tf.stop_gradient(x) * 2.0, f32(3)),
    case("Snapshot", lambda x: raw.Snapshot(input=x), f32(3)),
    case("PreventGradient", lambda x: raw.PreventGradient(input=x), f32(3)),
    case("EnsureShape", lambda x: tf.ensure_shape(x, (2, None)), f32(2, 3)),
    case("CheckNumerics", lambda x: tf.debugging.check_numerics(x, "bad"), f32(2, 3)),
]

INDEXING = [
    case("Slice", lambda x: tf.slice(x, [1, 0], [2, -1]), f32(4, 3)),
    case("StridedSlice", lambda x: x[1:3, ::2], f32(4, 5)),
    case("StridedSlice", lambda x: x[-1], f32(4, 5), label="shrink-negative"),
    case("StridedSlice", lambda x: x[..., None, 1], f32(2, 3, 4), label="ellipsis-newaxis"),
    case("StridedSlice", lambda x: x[::-1, 3:0:-2], f32(3, 5), label="negative-stride"),
    case("StridedSlice", lambda x: x[:, tf.newaxis, -10:10, ..., ::3], f32(2, 3, 4, 7),
         label="clamp"),
    case("StridedSlice", lambda x: x[5:, 2:1], i32(3, 4), label="empty"),
    case("GatherV2", lambda x: tf.gather(x, [2, 0, 2]), f32(3, 4)),
    case("GatherV2", lambda x, i: tf.gather(x, i, axis=-1), f32(2, 5), i32(3, 2, low=0),
         label="axis"),
    case("GatherV2", lambda x, i: tf.gather(x, i, axis=1, batch_dims=1), f32(2, 3, 4),
         i32(2, 5, low=0, high=3), label="batch-dims"),
    # Found by tests/fuzz: batch_dims with an empty result raised numpy's reshape error,
    case("GatherV2", lambda x, i: tf.gather(x, i, axis=1, batch_dims=1), f32(2, 1, 0),
         i32(2, 1, low=0, high=1), label="batch-dims-empty"),
    # ... and with one index per batch row (scalar rows) it raised a TypeError.
    case("GatherV2", lambda x, i: tf.gather(x, i, axis=-1, batch_dims=1), f32(2, 4),
         i32(2, low=0, high=4), label="batch-dims-scalar-rows"),
    case("GatherNd", lambda x, i: tf.gather_nd(x, i), f32(3, 4, 2),
         np.stack([i32(5, low=0, high=3), i32(5, low=0, high=4)], -1)),
    case("OneHot", lambda i: tf.one_hot(i, 4), i32(5, low=-1, high=5)),
    case("OneHot", lambda i: tf.one_hot(i, 3, on_value=5, off_value=-1, axis=0),
         i32(2, 2, low=0, high=3), label="axis0-int"),
    case("UnsortedSegmentSum", lambda x, s: tf.math.unsorted_segment_sum(x, s, 4),
         f32(6, 2), _idx([0, 3, 3, -1, 1, 0])),
    case("TensorScatterUpdate",
         lambda x: tf.tensor_scatter_nd_update(x, [[1], [3]], tf.ones((2, 3))), f32(4, 3)),
    case("TensorScatterAdd",
         lambda x, u: tf.tensor_scatter_nd_add(x, [[1, 0], [1, 0], [2, 2]], u), f32(4, 3),
         f32(3)),
    case("ScatterNd", lambda u: tf.scatter_nd([[0], [2], [0]], u, (4, 2)), f32(3, 2)),
    # Enough rows for the layered adds (ops/indexing.py `_add_at`), one index repeated past
    # `_MAX_LAYERS` (a padding token), in TensorFlow's order of addition.
    case("UnsortedSegmentSum", lambda x, s: tf.math.unsorted_segment_sum(x, s, 40),
         f32(600, 3), np.where(i32(600, low=0, high=3) == 0, 0, i32(600, low=-1, high=40)),
         label="many-rows"),
    case("TensorScatterAdd", lambda x, i, u: tf.tensor_scatter_nd_add(x, i, u), f32(6, 5, 2),
         np.stack([i32(400, low=0, high=6), i32(400, low=0, high=5)], -1), f32(400, 2),
         label="many-rows"),
]

GRADIENTS = [
    case("StridedSliceGrad", grad(lambda x: x[1:3, ::-2]), f32(4, 5)),
    case("StridedSliceGrad", grad(lambda x: x[:, 1, None]), f32(3, 4), label="shrink"),
    case("UnsortedSegmentSum", dense(grad(lambda x: tf.gather(x, [0, 2, 0, 1]))), f32(3, 2),
         label="gather-grad"),
    case("Transpose", grad(lambda x: tf.gather(x, [[1], [0]], axis=1)), f32(2, 3, 2),
         label="gather-axis-grad"),
    case("Pad", grad(lambda x: tf.slice(x, [1, 1], [2, 2])), f32(3, 4), label="slice-grad"),
    case("GatherNd", grad(lambda x: tf.tensor_scatter_nd_update(x, [[1]], [[5.0, 6.0]])),
         f32(3, 2), label="scatter-grad"),
    case("Tile", grad(lambda x: tf.broadcast_to(x, (2, 3, 2)), ), f32(3, 1), label="bcast"),
    case("Sum", grad(lambda x: tf.tile(x, (2, 3))), f32(2, 2), label="tile-grad"),
    case("Slice", grad(lambda x: tf.pad(x, [[1, 2], [0, 1]])), f32(2, 3), label="pad-grad"),
    case("Cumsum", grad(lambda x: tf.cumsum(x, axis=1, exclusive=True)), f32(2, 4),
         label="cumsum-grad"),
    case("ReverseV2", grad(lambda x: tf.reverse(x, [1])), f32(2, 3), label="reverse-grad"),
    case("Pack", grad(lambda x: tf.unstack(x)[1]), f32(3, 2), label="unpack-grad"),
    case("ConcatOffset", grad(lambda x, y: tf.concat([x, y, x], axis=1)), f32(2, 3), f32(2, 1),
         label="concat-grad"),
]

CASES = SHAPES + STATIC + PASS_THROUGH + INDEXING + GRADIENTS


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_matches_tensorflow(c):
    check_case(c)


def test_every_imported_type_has_a_case():
    covered = {c.tf_op for c in CASES}
    missing = set(array.TF_TYPES + indexing.TF_TYPES) - covered - set(RESOURCE_OPS)
    assert not missing, f"TF types registered without a case: {sorted(missing)}"


RESOURCE_OPS = {
    "ResourceGather": lambda v, i: v.sparse_read(i),
    "ResourceScatterAdd": lambda v, i: v.scatter_add(tf.IndexedSlices(tf.ones((4, 3)), i)),
    "ResourceScatterSub": lambda v, i: v.scatter_sub(tf.IndexedSlices(
        tf.reshape(tf.range(12.0), (4, 3)), i)),
    "ResourceScatterUpdate": lambda v, i: v.scatter_update(tf.IndexedSlices(
        tf.fill((4, 3), 7.0), i)),
}


@pytest.mark.parametrize("tf_op", sorted(RESOURCE_OPS))
def test_resource_ops_match_tensorflow(tf_op):
    """Ops on variables: one variable for TensorFlow, an identical one for the IPU."""
    initial = np.arange(15, dtype=np.float32).reshape(5, 3)
    indices = np.array([3, 0, 3, 1], np.int32)  # a repeated index accumulates
    on_cpu, on_ipu = tf.Variable(initial), tf.Variable(initial)

    def fn(variable):
        def step(i):
            out = RESOURCE_OPS[tf_op](variable, i)
            return out if tf_op == "ResourceGather" else variable.read_value()
        return step

    traced = op_types(tf.function(fn(on_cpu)).get_concrete_function(
        tf.TensorSpec((4,), tf.int32)).graph)
    assert tf_op in traced
    expected = fn(on_cpu)(tf.constant(indices)).numpy()
    (got,) = ipu_keras.ipu_compiler.compile(fn(on_ipu), [indices])
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(on_ipu.numpy(), on_cpu.numpy())


def test_an_add_of_a_concatenation_of_outlined_products_is_tensorflows():
    """IPU TensorFlow's serialized product test, small: x + concat of y-slice @ z, each an
    outlined function; the compiler makes the add three slice applies
    (`compiler/passes/slice_apply.py`)."""
    from ipu_keras._src.conformance import tolerances as T
    from ipu_keras.ops.functional_ops import outlined_function

    rng = np.random.default_rng(11)
    x, y, z = (rng.standard_normal(s).astype(np.float32) for s in ((12, 8), (12, 5), (5, 8)))

    def model(x, y, z):
        @outlined_function
        def product(lhs, rhs):
            return tf.matmul(lhs, rhs)
        return x + tf.concat([product(y[i * 4:(i + 1) * 4], z) for i in range(3)], 0)

    with ipu_keras.scopes.ipu_scope("/device:IPU:0"):
        (got,) = ipu_keras.ipu_compiler.compile(model, [x, y, z])
    T.FLOAT32.assert_close(np.asarray(got), model(x, y, z).numpy())
