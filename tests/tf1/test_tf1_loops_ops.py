"""`loops.repeat` with bodies returning operations beside (or instead of) loop values.

As the SDK: the body returns zero or more tensors (the new loop values) followed by zero
or more operations, which run every iteration as control dependencies of the carried
values; no inputs -> the loop's operation, one -> a tensor, several -> a list. The
TensorFlow 1 scenarios run with v2 behaviour off in a process of their own
(`scenarios_loops.py`), against the same step run by TensorFlow on the CPU.
"""
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T
from tests.tf1.v1_driver import drive

v1 = tf.compat.v1


@pytest.fixture(scope="module")
def runs():
    return drive("scenarios_loops")


def test_body_returning_values_then_train_and_enqueue_ops(runs):
    got, cpu = runs["ops_beside_values"], runs["cpu"]
    assert got["returned"] == [True] and got["lr"] == pytest.approx([0.1, 0.1])
    np.testing.assert_allclose(got["losses"], cpu["losses"], **T.FLOAT32.kwargs)
    np.testing.assert_allclose(got["weights"], cpu["weights"], **T.FLOAT32.kwargs)


def test_body_returning_only_ops_makes_the_loop_an_op(runs):
    got, cpu = runs["ops_only"], runs["cpu"]
    assert got["loop"] == "Operation" and got["returned"] == "Operation"
    assert got["results"] == [None, None]
    np.testing.assert_allclose(got["losses"], cpu["losses"], **T.FLOAT32.kwargs)
    np.testing.assert_allclose(got["weights"], cpu["weights"], **T.FLOAT32.kwargs)


def test_an_op_before_a_tensor_is_refused_with_the_originals_message():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="zero or more Tensor values followed by zero or "
                                             "more Operations. Received: .*Operation"):
            ipu.ipu_compiler.compile(
                lambda: ipu.loops.repeat(2, lambda x: (tf.no_op(), x), [tf.constant(1.0)]), [])


def test_loop_values_of_other_dtypes_are_refused():
    with tf.Graph().as_default():
        with pytest.raises(TypeError, match="Mismatch between input types and output types"):
            ipu.ipu_compiler.compile(
                lambda: ipu.loops.repeat(2, lambda x: tf.cast(x, tf.int32), [tf.constant(1.0)]),
                [])


def test_one_input_gives_a_tensor_and_several_a_list():
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        one = strategy.run(lambda: ipu.loops.repeat(3, lambda x: x * 2.0, [tf.constant(1.0)]))
        two = strategy.run(lambda: ipu.loops.repeat(
            3, lambda x, n: (x * 2.0, n + 1), [tf.constant(1.0), tf.constant(0)]))
    assert tf.is_tensor(one) and float(one) == 8.0
    assert isinstance(two, list) and [float(two[0]), int(two[1])] == [8.0, 3]
