"""The 'random' op family against TensorFlow on the CPU: bit for bit.

Raw stateless ops over shapes (odd sizes included), seeds and dtypes, then Keras'
own random draws: `keras.random.*` with int seeds and a `SeedGenerator`, and Dropout
called twice per step, over two consecutive executions (the seed lives in a variable).
"""
import keras
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras
from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.ops import random
from tests.ops.harness import case, check_case

raw = tf.raw_ops
KEY = np.array([0x0123456789ABCDEF], np.uint64)
COUNTER = np.array([2**64 - 3, 77], np.uint64)  # the low word carries into the high one
SEED32 = np.array([7, -123], np.int32)
SEED64 = np.array([2**40 + 5, 99], np.int64)


def exact(tf_op, fn, *inputs, label=""):
    return case(tf_op, fn, *inputs, tolerance=T.EXACT, label=label)


def _v2(op, shape, dtype, **bounds):
    def fn(key, counter):
        return getattr(raw, op)(shape=shape, key=key, counter=counter, alg=1, dtype=dtype,
                                **bounds)

    return fn


def _int_v2(shape, lo, hi, dtype):
    def fn(key, counter):
        return raw.StatelessRandomUniformIntV2(
            shape=shape, key=key, counter=counter, alg=1, minval=tf.constant(lo, dtype),
            maxval=tf.constant(hi, dtype))

    return fn


def _v1(op, shape, dtype, **bounds):
    return lambda seed: getattr(raw, op)(shape=shape, seed=seed, dtype=dtype, **bounds)


def _int_v1(shape, lo, hi, dtype):
    return lambda seed: raw.StatelessRandomUniformInt(
        shape=shape, seed=seed, minval=tf.constant(lo, dtype), maxval=tf.constant(hi, dtype))


KC = (KEY, COUNTER)

CASES = [
    exact("StatelessRandomGetKeyCounter",
          lambda s: raw.StatelessRandomGetKeyCounter(seed=s), SEED32, label="int32"),
    exact("StatelessRandomGetKeyCounter",
          lambda s: raw.StatelessRandomGetKeyCounter(seed=s), SEED64, label="int64"),
    exact("StatelessRandomGetKeyCounterAlg",
          lambda s: raw.StatelessRandomGetKeyCounterAlg(seed=s), SEED64),
    exact("StatelessRandomGetAlg", lambda s: raw.StatelessRandomGetAlg() + s[:1], SEED32),
    exact("StatelessRandomUniformV2", _v2("StatelessRandomUniformV2", [7, 5], tf.float32), *KC),
    exact("StatelessRandomUniformV2", _v2("StatelessRandomUniformV2", [9], tf.float16), *KC,
          label="float16"),
    exact("StatelessRandomUniformV2", _v2("StatelessRandomUniformV2", [2, 3, 3], tf.float64),
          *KC, label="float64"),
    exact("StatelessRandomNormalV2", _v2("StatelessRandomNormalV2", [5, 7], tf.float32), *KC),
    exact("StatelessRandomNormalV2", _v2("StatelessRandomNormalV2", [4099], tf.float32), *KC,
          label="large"),
    exact("StatelessRandomNormalV2", _v2("StatelessRandomNormalV2", [13], tf.float16), *KC,
          label="float16"),
    case("StatelessRandomNormalV2", _v2("StatelessRandomNormalV2", [3, 5], tf.float64), *KC,
         tolerance=T.FLOAT64_BOX_MULLER, label="float64"),
    exact("StatelessTruncatedNormalV2", _v2("StatelessTruncatedNormalV2", [4, 5, 3],
                                            tf.float32), *KC),
    exact("StatelessTruncatedNormalV2", _v2("StatelessTruncatedNormalV2", [2001], tf.float32),
          *KC, label="large"),
    exact("StatelessTruncatedNormalV2", _v2("StatelessTruncatedNormalV2", [13], tf.float16),
          *KC, label="float16"),
    case("StatelessTruncatedNormalV2", _v2("StatelessTruncatedNormalV2", [7], tf.float64),
         *KC, tolerance=T.FLOAT64_BOX_MULLER, label="float64"),
    exact("StatelessRandomUniformIntV2", _int_v2([3, 7], -5, 17, tf.int32), *KC),
    exact("StatelessRandomUniformIntV2", _int_v2([11], -2**40, 2**62, tf.int64), *KC,
          label="int64"),
    exact("StatelessRandomUniformIntV2", _int_v2([5], -2**31, 2**31 - 1, tf.int32), *KC,
          label="full-range"),
    exact("StatelessRandomUniformFullIntV2",
          _v2("StatelessRandomUniformFullIntV2", [7], tf.int32), *KC),
    exact("StatelessRandomUniformFullIntV2",
          _v2("StatelessRandomUniformFullIntV2", [3, 3], tf.uint64), *KC, label="uint64"),
    exact("StatelessRandomUniformFullIntV2",
          _v2("StatelessRandomUniformFullIntV2", [5], tf.int64), *KC, label="int64"),
    exact("StatelessRandomUniform", _v1("StatelessRandomUniform", [3, 7], tf.float32), SEED32),
    exact("StatelessRandomNormal", _v1("StatelessRandomNormal", [7, 3], tf.float32), SEED64),
    exact("StatelessTruncatedNormal", _v1("StatelessTruncatedNormal", [5, 5], tf.float16),
          SEED32),
    exact("StatelessRandomUniformInt", _int_v1([9], 3, 1000, tf.int64), SEED64),
    exact("StatelessRandomUniformFullInt",
          _v1("StatelessRandomUniformFullInt", [6], tf.uint32), SEED32),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_matches_tensorflow(c):
    check_case(c)


def test_every_tf_type_has_a_case():
    assert set(random.TF_TYPES) <= {c.tf_op for c in CASES}


def _keras_draws():
    dropout = keras.layers.Dropout(0.3, seed=7)
    seeds = keras.random.SeedGenerator(11)

    def fn(x):
        return (dropout(x, training=True), dropout(x, training=True),
                keras.random.normal((3, 5), seed=seeds),
                keras.random.truncated_normal((7,), seed=seeds),
                keras.random.randint((5,), 0, 10, seed=seeds),
                keras.random.uniform((2, 3), seed=5), keras.random.normal((3,), seed=9))

    return fn, seeds


def test_keras_random_and_dropout_match_over_two_executions():
    expected_fn, expected_seeds = _keras_draws()
    got_fn, got_seeds = _keras_draws()
    x = np.arange(1, 25, dtype=np.float32).reshape(4, 6)
    for _ in range(2):
        expected = [np.asarray(t) for t in expected_fn(tf.constant(x))]
        got = ipu_keras.ipu_compiler.compile(got_fn, [x])
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert g.dtype == e.dtype
            np.testing.assert_array_equal(g, e)
        np.testing.assert_array_equal(got_seeds.state.numpy(), expected_seeds.state.numpy())
