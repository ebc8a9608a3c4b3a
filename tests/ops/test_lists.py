"""The 'lists' op family against TensorFlow: TensorArrays in while loops and Keras RNNs.

RNN gradients (`test_rnn_gradients`) take the gradient loop's list shapes from
forward-loop accumulators of constants, which the tracer's facts make static
(`ipu_keras._src.tracer.facts`; more cases in tests/tracer).
"""
import keras
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras
from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.ops import lists
from tests.ops.harness import case, check_case, f32

raw = tf.raw_ops


def _write_read_stack(x):
    """TensorArray write/read/stack in a while loop: y[i] = x[i] * 2 + y[i - 1]."""
    n = x.shape[0]
    ta = tf.TensorArray(tf.float32, size=n, element_shape=x.shape[1:])
    xs = tf.TensorArray(tf.float32, size=n, element_shape=x.shape[1:]).unstack(x)

    def body(i, prev, ta):
        y = xs.read(i) * 2 + prev
        return i + 1, y, ta.write(i, y)

    _, last, ta = tf.while_loop(lambda i, *_: i < n, body,
                                (tf.constant(0), tf.zeros(x.shape[1:]), ta))
    return ta.stack(), last


def _push_pop(x):
    lst = raw.EmptyTensorList(element_shape=[3], max_num_elements=4, element_dtype=tf.float32)
    for i in range(4):
        lst = raw.TensorListPushBack(input_handle=lst, tensor=x[i] * (i + 1))
    lst, a = raw.TensorListPopBack(input_handle=lst, element_shape=[3], element_dtype=tf.float32)
    lst, b = raw.TensorListPopBack(input_handle=lst, element_shape=[3], element_dtype=tf.float32)
    return a, b


def _set_get(x, i):
    lst = raw.TensorListReserve(element_shape=[3], num_elements=4, element_dtype=tf.float32)
    lst = raw.TensorListSetItem(input_handle=lst, index=i, item=x[0])
    lst = raw.TensorListSetItem(input_handle=lst, index=i + 2, item=x[1])
    got = raw.TensorListGetItem(input_handle=lst, index=i, element_shape=[3],
                                element_dtype=tf.float32)
    length = raw.TensorListLength(input_handle=lst)
    shape = raw.TensorListElementShape(input_handle=lst, shape_type=tf.int32)
    return raw.TensorListStack(input_handle=lst, element_shape=[3], element_dtype=tf.float32,
                               num_elements=4), got, length, shape


def _from_tensor(x):
    lst = raw.TensorListFromTensor(tensor=x, element_shape=[3])
    return raw.TensorListGetItem(input_handle=lst, index=2, element_shape=[3],
                                 element_dtype=tf.float32)


I1 = np.array(1, np.int32)
CASES = [
    case("TensorListSetItem", _write_read_stack, f32(5, 2, 3)),
    case("TensorListGetItem", _write_read_stack, f32(4, 3), label="while"),
    case("TensorListReserve", _set_get, f32(2, 3), I1),
    case("TensorListStack", _set_get, f32(2, 3), I1, label="static"),
    case("TensorListLength", _set_get, f32(2, 3), I1, label="length"),
    case("TensorListElementShape", _set_get, f32(2, 3), I1, label="shape"),
    case("TensorListFromTensor", _from_tensor, f32(4, 3)),
    case("EmptyTensorList", _push_pop, f32(4, 3)),
    case("TensorListPushBack", _push_pop, f32(4, 3), label="lifo"),
    case("TensorListPopBack", _push_pop, f32(4, 3), label="lifo"),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_matches_tensorflow(c):
    check_case(c)


def test_every_tf_type_has_a_case():
    assert set(lists.TF_TYPES) <= {c.tf_op for c in CASES}


RNNS = ("LSTM", "GRU", "SimpleRNN")
X = np.random.default_rng(3).standard_normal((2, 5, 3)).astype(np.float32)


def _layer(kind):
    layer = getattr(keras.layers, kind)(8)
    layer(X)
    return layer


@pytest.mark.parametrize("kind", RNNS)
def test_rnn_forward(kind):
    layer = _layer(kind)
    got = ipu_keras.ipu_compiler.compile(lambda x: layer(x), [X])[0]
    T.FLOAT32.assert_close(got, np.asarray(layer(X)))


@pytest.mark.parametrize("kind", RNNS)
def test_rnn_gradients(kind):
    layer = _layer(kind)

    def fn(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(tf.square(layer(x)))
        return tape.gradient(loss, [x] + layer.trainable_variables)

    expected = fn(tf.constant(X))
    got = ipu_keras.ipu_compiler.compile(fn, [X])
    for g, e in zip(got, expected):
        T.FLOAT32.assert_close(g, np.asarray(e))
