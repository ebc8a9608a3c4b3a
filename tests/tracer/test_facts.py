"""Compile-time facts through TensorLists and while loops (`ipu_keras._src.tracer.facts`).

Each function runs in TensorFlow and compiled on the simulated IPU; results must agree.
The shapes in these loops are operands computed inside loop bodies, which TensorFlow
itself cannot see as constants: only the tracer's facts make them static.
"""
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras
from ipu_keras._src.conformance import tolerances as T
from ipu_keras.errors import StaticShapeRequiredError
from ipu_keras._src.ir.graph import Graph, Value
from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.tracer import facts as F
from ipu_keras._src.tracer import importer

raw = tf.raw_ops
N = 4
X = np.random.default_rng(7).standard_normal((N, 6)).astype(np.float32)


def _check(fn, *inputs):
    expected = tf.nest.flatten(tf.function(fn)(*[tf.constant(x) for x in inputs]))
    got = ipu_keras.ipu_compiler.compile(fn, list(inputs))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        T.FLOAT32.assert_close(g, np.asarray(e))


def _pop(lst, shape, dtype):
    return raw.TensorListPopBack(input_handle=lst, element_shape=shape, element_dtype=dtype)


def _push_constants_then_pop(x):
    """A forward loop pushes the constant shape (3, 2) and length 5 every iteration; a
    backward loop pops them and uses them as a list's element shape and length and as
    a reshape target, as TensorFlow's while-loop gradients do."""
    shapes = raw.EmptyTensorList(element_shape=[2], max_num_elements=N, element_dtype=tf.int32)
    lengths = raw.EmptyTensorList(element_shape=tf.constant([], tf.int32), max_num_elements=N,
                                  element_dtype=tf.int32)

    def forward(i, shapes, lengths, acc):
        shapes = raw.TensorListPushBack(input_handle=shapes, tensor=tf.constant([3, 2]))
        lengths = raw.TensorListPushBack(input_handle=lengths, tensor=tf.constant(5))
        return i + 1, shapes, lengths, acc + tf.gather(x, i)

    _, shapes, lengths, acc = tf.while_loop(
        lambda i, *_: i < N, forward, (0, shapes, lengths, tf.zeros(6)), maximum_iterations=N)

    def backward(i, shapes, lengths, total):
        shapes, shape = _pop(shapes, [2], tf.int32)
        lengths, length = _pop(lengths, tf.constant([], tf.int32), tf.int32)
        lst = raw.TensorListReserve(element_shape=shape, num_elements=length,
                                    element_dtype=tf.float32)
        lst = raw.TensorListSetItem(input_handle=lst, index=i + 1,
                                    item=tf.reshape(tf.gather(x, i), shape))
        item = raw.TensorListGetItem(input_handle=lst, index=i + 1, element_shape=shape,
                                     element_dtype=tf.float32)
        return i + 1, shapes, lengths, total + tf.ensure_shape(item, (3, 2)) * 2.0

    *_, total = tf.while_loop(lambda i, *_: i < N, backward,
                              (0, shapes, lengths, tf.zeros((3, 2))), maximum_iterations=N)
    return acc, total


def test_constant_pushed_in_a_loop_is_static_where_it_is_popped():
    _check(_push_constants_then_pop, X)


def _invariant_shape(x, shape):
    """A loop-invariant carry used as a reshape target inside the body and after it."""
    def body(i, shape, acc):
        return i + 1, shape, acc + tf.reshape(tf.gather(x, i), shape)

    _, shape, acc = tf.while_loop(lambda i, *_: i < N, body, (0, shape, tf.zeros((2, 3))))
    return acc, tf.reshape(x, tf.concat([[N], shape], 0))


def test_loop_invariant_constant_is_static_in_the_body():
    def fn(x):
        return _invariant_shape(x, tf.constant([2, 3]))

    _check(fn, X)


def test_constant_operand_is_static_in_branches():
    def fn(x):
        shape = tf.constant([3, 2])
        return tf.cond(tf.reduce_sum(x) > 0, lambda: tf.reshape(x[0], shape) * 2.0,
                       lambda: tf.reshape(x[1], shape) - 1.0)

    _check(fn, X)
    _check(fn, -X)


def _changing_carries(x):
    """Carries that start as constants but change: a power of two, and the counter pushed
    into a list that a second loop pops and weighs."""
    ids = raw.EmptyTensorList(element_shape=tf.constant([], tf.int32), max_num_elements=N,
                               element_dtype=tf.float32)

    def forward(i, k, ids, acc):
        ids = raw.TensorListPushBack(input_handle=ids, tensor=tf.cast(i, tf.float32))
        return i + 1, k * 2.0, ids, acc + k * tf.gather(x, i)

    _, k, ids, acc = tf.while_loop(lambda i, *_: i < N, forward,
                                   (0, tf.constant(1.0), ids, tf.zeros(6)))

    def backward(i, ids, out):
        ids, item = _pop(ids, tf.constant([], tf.int32), tf.float32)
        return i + 1, ids, out + item * tf.gather(x, i)

    *_, out = tf.while_loop(lambda i, *_: i < N, backward, (0, ids, tf.zeros(6)))
    return k, acc, out


def test_carries_that_change_are_not_constants():
    _check(_changing_carries, X)


def test_swapped_carries_are_not_constants():
    """Two constant carries that swap every iteration: neither is loop-invariant, which
    only importing the body shows. InvertPermutation folds a static operand to a
    constant, so a wrong fact would give wrong results."""
    def fn(x):
        def body(i, p, q, acc):
            return i + 1, q, p, acc + tf.cast(tf.math.invert_permutation(p), tf.float32) * x

        start = (0, tf.constant([1, 2, 0]), tf.constant([2, 0, 1]), tf.zeros(3))
        return tf.while_loop(lambda i, *_: i < 3, body, start)[3]

    _check(fn, np.array([1.0, 10.0, 100.0], np.float32))


def test_a_shape_that_changes_is_not_static():
    def fn(x):
        def body(i, shape, other, acc):
            part = tf.reduce_sum(tf.reshape(tf.gather(x, i), shape))
            return i + 1, other, shape, acc + part

        start = (0, tf.constant([2, 3]), tf.constant([3, 2]), 0.0)
        return tf.while_loop(lambda i, *_: i < N, body, start)[3]

    with pytest.raises(StaticShapeRequiredError, match="static output shape"):
        ipu_keras.ipu_compiler.compile(fn, [X])


def test_loop_body_is_imported_again_only_when_facts_weaken(monkeypatch):
    imported = []
    original = importer.GraphImporter.import_function

    def counting(self, name, *args, **kwargs):
        imported.append(name)
        return original(self, name, *args, **kwargs)

    monkeypatch.setattr(importer.GraphImporter, "import_function", counting)

    def invariant_only(x, n):
        return tf.while_loop(lambda x, n: tf.reduce_sum(x) < 100.0,
                             lambda x, n: (x * n, n), (x, n))[0]

    ipu_keras.ipu_compiler.compile(invariant_only, [np.abs(X) + 1, np.float32(2.0)])
    assert sum("body" in name for name in imported) == 1   # the counter is seen to change
    imported.clear()
    ipu_keras.ipu_compiler.compile(lambda x: _changing_carries(x), [X])
    # the forward loop once more: its list of counters is no list of one constant
    assert sum("body" in name for name in imported) == 3


def test_join_is_the_least_common_fact():
    a, b = np.array([3, 2], np.int32), np.array([2, 3], np.int32)
    assert F.join(F.Fact(a, F.EMPTY), F.Fact(a.copy(), b)) == F.Fact(a, b)
    assert F.join(F.Fact(a, a), F.Fact(b, b)) == F.UNKNOWN
    assert F.join(F.Fact(a), F.Fact(a.astype(np.int64))).const is None
    assert F.join(F.Fact(items=F.EMPTY), F.Fact(items=F.EMPTY)).items is F.EMPTY
    assert F.join(F.Fact(items=a), F.UNKNOWN) == F.UNKNOWN


def test_a_round_failing_on_false_assumptions_goes_on_from_sure_facts():
    """`import_loop` with a body that fails while it assumes carry 0 is the constant 2."""
    facts, two = F.Facts(), np.array(2, np.int32)
    args = [Value(TensorType((), "int32")), Value(TensorType((), "int32"))]
    facts.assume(args[0], F.Fact(two))
    tried = []

    def import_body(assumed):
        tried.append(assumed)
        if assumed[0].const is not None:
            raise ValueError("a shape from a false assumption")
        out = Value(args[0].type)
        facts.assume(out, F.Fact(two))
        return Graph(args, [args[0], out], [])

    start, passed = [facts.of(a) for a in args], [F.UNKNOWN, F.UNKNOWN]
    assumed, _ = F.import_loop(facts, import_body, args, start, passed)
    assert assumed == [F.UNKNOWN, F.UNKNOWN] and len(tried) == 2
    with pytest.raises(ValueError, match="false assumption"):
        F.import_loop(facts, import_body, args, start, start)
