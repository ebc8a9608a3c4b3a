"""`ipu.embedding_ops.embedding_lookup` (issue 31, item 7) on the simulated IPU against
`tf.nn.embedding_lookup` on the CPU: forward and the table's gradient, serialised or not."""
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T
from ipu_keras.errors import OpArgumentError
from ipu_keras.ops import embedding_ops as E

RNG = np.random.default_rng(7)
TABLE = RNG.normal(size=(8, 2, 3)).astype(np.float32)
IDS = np.array([[1, 7, 2, 2, 0], [5, 5, 5, 3, 6]], np.int32)   # repeats: gradients add up
WEIGHT = np.linspace(-1, 1, IDS.size * 6, dtype=np.float32).reshape(2, 5, 2, 3)


def _lookup_and_gradient(lookup):
    def fn(table, ids):
        with tf.GradientTape() as tape:
            tape.watch(table)
            rows = lookup(table, ids)
            loss = tf.reduce_sum(rows * WEIGHT)
        return rows, tf.convert_to_tensor(tape.gradient(loss, table))

    return fn


@pytest.mark.parametrize("factor", [1, 2, 4, 8])
def test_lookup_and_gradient_match_tf_nn_embedding_lookup(factor, executions):
    fn = _lookup_and_gradient(
        lambda t, i: E.embedding_lookup(t, i, serialization_factor=factor))
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        rows, grad = strategy.run(tf.function(fn), args=(TABLE, IDS))
    assert len(executions) == 1
    want_rows, want_grad = _lookup_and_gradient(tf.nn.embedding_lookup)(
        tf.constant(TABLE), tf.constant(IDS))
    assert rows.shape == (2, 5, 2, 3)
    T.EXACT.assert_close(rows.numpy(), want_rows.numpy())   # a lookup moves values only
    T.FLOAT32.assert_close(grad.numpy(), want_grad.numpy())


def test_a_variable_table_on_the_cpu_and_the_sdk_paths():
    table = tf.Variable(TABLE)
    np.testing.assert_array_equal(E.embedding_lookup(table, IDS, 2).numpy(),
                                  tf.nn.embedding_lookup(TABLE, IDS).numpy())
    assert ipu.embedding_ops is ipu.ops.embedding_ops is E


@pytest.mark.parametrize("factor, match", [
    (0, "at least 1. Received: serialization_factor=0"),
    (3, "dividing the 8 rows of params. Received: serialization_factor=3"),
])
def test_a_bad_serialization_factor_is_named(factor, match):
    with pytest.raises(OpArgumentError, match=match):
        E.embedding_lookup(TABLE, IDS, serialization_factor=factor)


def test_ids_of_unknown_shape_are_refused():
    with tf.Graph().as_default():
        ids = tf.compat.v1.placeholder(tf.int32, [None])
        with pytest.raises(OpArgumentError, match="ids of a fully known shape"):
            E.embedding_lookup(TABLE, ids)


def test_the_positional_order_of_sdk_2_is_recognised():
    want = tf.nn.embedding_lookup(TABLE, IDS).numpy()
    np.testing.assert_array_equal(E.embedding_lookup(TABLE, IDS, "emb").numpy(), want)
    np.testing.assert_array_equal(E.embedding_lookup(TABLE, IDS, None, 4).numpy(), want)
    with pytest.raises(OpArgumentError, match="Received: serialization_factor=\\[2\\]"):
        E.embedding_lookup(TABLE, IDS, serialization_factor=[2])
