"""The 'einsum' op family against TensorFlow: the equations of Keras' EinsumDense and
MultiHeadAttention, their gradients, and a whole MultiHeadAttention forward and backward."""
import keras
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras
from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.ops import einsum
from tests.ops.harness import case, check_case, f32, grad


def _eq(equation):
    return lambda *xs: tf.einsum(equation, *xs)


CASES = [
    case("Einsum", _eq("abc,cde->abde"), f32(2, 5, 4), f32(4, 2, 3), label="mha-project"),
    case("Einsum", _eq("abcd,cde->abe"), f32(2, 5, 2, 3), f32(2, 3, 4), label="mha-output"),
    case("Einsum", _eq("aecd,abcd->acbe"), f32(2, 5, 2, 3), f32(2, 4, 2, 3), label="mha-scores"),
    case("Einsum", _eq("acbe,aecd->abcd"), f32(2, 2, 4, 5), f32(2, 5, 2, 3), label="mha-values"),
    case("Einsum", _eq("ab,bc->ac"), f32(3, 4), f32(4, 5), label="dense"),
    case("Einsum", _eq("...b,bc->...c"), f32(2, 3, 4), f32(4, 5), label="ellipsis"),
    case("Einsum", _eq("ii->i"), f32(4, 4), label="diagonal"),
    case("Einsum", _eq("ij->"), f32(3, 4), label="sum"),
    case("Einsum", _eq("abc,abd->cd"), f32(2, 5, 4), f32(2, 5, 3), label="kernel-grad"),
    case("Einsum", _eq("bij,bjk->bik"), f32(3, 4, 5), f32(3, 5, 2), label="batched"),
    case("Einsum", _eq("ab,bc->ca"), f32(3, 4), f32(4, 5), label="transposed-out"),
    case("Einsum", _eq("ab,bc->c"), f32(3, 4), f32(4, 5), label="summed-in-one"),
    case("Einsum", grad(_eq("abc,cde->abde")), f32(2, 5, 4), f32(4, 2, 3), label="grad"),
    case("Einsum", grad(_eq("aecd,abcd->acbe")), f32(2, 5, 2, 3), f32(2, 4, 2, 3),
         label="grad-scores"),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_matches_tensorflow(c):
    check_case(c)


@pytest.mark.parametrize("equation, shapes, product", [
    ("aecd,abcd->acbe", ((2, 5, 2, 3), (2, 4, 2, 3)), True),    # batch labels a, c
    ("abc,cde->abde", ((2, 5, 4), (4, 2, 3)), True),
    ("ab,bc->c", ((3, 4), (4, 5)), False),          # 'a' summed within one operand
    ("ii->i", ((4, 4),), False),                    # one operand
    ("aij,ajk->aik", ((1, 4, 5), (3, 5, 2)), False),   # 'a' broadcast from size 1
    ("...b,bc->...c", ((2, 3, 4), (4, 5)), False),  # an ellipsis
])
def test_which_equations_run_as_one_batched_product(equation, shapes, product):
    assert (einsum._product_plan(equation, shapes) is not None) == product


def test_every_tf_type_has_a_case():
    assert set(einsum.TF_TYPES) <= {c.tf_op for c in CASES}


def test_multi_head_attention_forward_and_gradient():
    keras.utils.set_random_seed(3)   # the weights, whatever ran before
    layer = keras.layers.MultiHeadAttention(2, 4)
    q, v = f32(2, 5, 6), f32(2, 3, 6)
    layer(q, v)

    def fn(q, v):
        with tf.GradientTape() as tape:
            tape.watch(q)
            y = layer(q, v)
            loss = tf.reduce_sum(y * y)
        return [y] + tape.gradient(loss, [q] + layer.trainable_variables)

    expected = fn(tf.constant(q), tf.constant(v))
    got = ipu_keras.ipu_compiler.compile(fn, [q, v])
    assert len(got) == len(expected)
    T.FLOAT32.assert_close(got[0], np.asarray(expected[0]))
    for g, e in zip(got[1:], expected[1:]):
        T.FLOAT32_ATTENTION_GRAD_30.assert_close(g, np.asarray(e))
