"""The rules of the 'random', 'lists' and 'einsum' op families, without TensorFlow.

Every registered op has every rule and a sample; kernels return exactly what their
shape rule says after a JSON round trip of params; random kernels reproduce fixed
vectors recorded from TensorFlow 2.21 on the CPU and have the right statistics; cost
rules return valid work; the families import without TensorFlow.
"""
import json
import subprocess
import sys

import numpy as np
import pytest

from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.ir.types import TensorType, type_of
from ipu_keras._src.ops import einsum, get_op, lists, random
from ipu_keras._src.ops.registry import MAPPINGS, WORK_KINDS, Work

KEY = np.array([0x0123456789ABCDEF], np.uint64)
COUNTER = np.array([2**64 - 3, 77], np.uint64)
SEED = np.array([7, -123], np.int32)
LIST = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
ITEM = np.full((2, 3), -1.0, np.float32)
I1 = np.array(1, np.int32)

SAMPLES = [
    ("random_key_counter", (SEED,), {}),
    ("random_uniform", (KEY, COUNTER), {"shape": (3, 5), "dtype": "float32"}),
    ("random_uniform", (KEY, COUNTER), {"shape": (7,), "dtype": "float16"}),
    ("random_normal", (KEY, COUNTER), {"shape": (3, 3), "dtype": "float32"}),
    ("random_normal", (KEY, COUNTER), {"shape": (3,), "dtype": "float64"}),
    ("random_truncated_normal", (KEY, COUNTER), {"shape": (2, 7), "dtype": "float32"}),
    ("random_truncated_normal", (KEY, COUNTER), {"shape": (5,), "dtype": "float64"}),
    ("random_uniform_int", (KEY, COUNTER, np.int32(-3), np.int32(9)),
     {"shape": (4,), "dtype": "int32"}),
    ("random_uniform_full_int", (KEY, COUNTER), {"shape": (3,), "dtype": "uint64"}),
    ("list_reserve", (), {"shape": (3, 2), "dtype": "float32"}),
    ("list_get", (LIST, I1), {}),
    ("list_set", (LIST, I1, ITEM), {}),
    ("list_push", (LIST, ITEM), {}),
    ("list_pop", (LIST,), {}),
    ("einsum", (LIST, np.ones((3, 5), np.float32)), {"equation": "abc,cd->abd"}),
]

# Recorded from TensorFlow 2.21 on the CPU (x86-64, glibc 2.36).
TF_KEY_COUNTER = ([12127918963864414686], [0, 14871780402866435803])  # seed [7, 123]


def _round_trip(params):
    return json.loads(json.dumps(params))


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s[0])
def test_kernel_returns_what_the_rule_says(sample):
    op, inputs, params = sample
    opdef = get_op(op)
    types = opdef.shape([type_of(x) for x in inputs], **params)
    outputs = opdef.kernel(*inputs, **_round_trip(params))
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    assert [type_of(o) for o in outputs] == types
    work = opdef.cost([type_of(x) for x in inputs], types, **params)
    assert isinstance(work, Work) and work.kind in WORK_KINDS and work.amount >= 0


def test_every_op_has_all_rules_and_a_sample():
    sampled = {s[0] for s in SAMPLES}
    for name in random.IR_OPS + lists.IR_OPS + einsum.IR_OPS:
        opdef = get_op(name)
        assert callable(opdef.shape) and callable(opdef.kernel) and callable(opdef.cost), name
        assert opdef.mapping in MAPPINGS and not opdef.engine and not opdef.effect, name
        assert name in sampled, f"no sample for {name}"


def test_key_counter_matches_tensorflow():
    key, counter = get_op("random_key_counter").kernel(np.array([7, 123], np.int64))
    assert key.tolist() == TF_KEY_COUNTER[0] and counter.tolist() == TF_KEY_COUNTER[1]


def test_streams_are_counter_based():
    """Element i depends on the counter only: a longer draw extends a shorter one."""
    uniform = get_op("random_uniform").kernel
    short = uniform(KEY, COUNTER, shape=[5], dtype="float32")
    long = uniform(KEY, COUNTER, shape=[1001], dtype="float32")
    np.testing.assert_array_equal(long[:5], short)
    assert 0 <= long.min() and long.max() < 1


def test_statistics():
    n = 1 << 16
    normal = get_op("random_normal").kernel(KEY, COUNTER, shape=[n], dtype="float32")
    assert abs(normal.mean()) < 0.02 and abs(normal.std() - 1) < 0.02
    trunc = get_op("random_truncated_normal").kernel(KEY, COUNTER, shape=[n], dtype="float32")
    assert np.abs(trunc).max() < 2 and abs(trunc.std() - 0.8796) < 0.02
    ints = get_op("random_uniform_int").kernel(KEY, COUNTER, np.int64(-3), np.int64(4),
                                               shape=[n], dtype="int64")
    assert set(np.unique(ints).tolist()) == set(range(-3, 4))


def test_glibc_emulation_against_float64():
    """logf and sincosf are within one float32 ulp of the exact values."""
    rng = np.random.default_rng(0)
    x = rng.uniform(1e-7, 1, 4096).astype(np.float32)
    T.FLOAT32_ULP.assert_close(random._logf(x), np.log(x.astype(np.float64)))
    v = rng.uniform(0, 2 * np.pi, 4096).astype(np.float32)
    sin, cos = random._sincosf(v)
    T.FLOAT32_ULP.assert_close(sin, np.sin(v.astype(np.float64)))
    T.FLOAT32_ULP.assert_close(cos, np.cos(v.astype(np.float64)))


def test_uniform_int_rejects_an_empty_range():
    with pytest.raises(ValueError, match="minval < maxval"):
        get_op("random_uniform_int").kernel(KEY, COUNTER, np.int32(3), np.int32(3), shape=[2],
                                            dtype="int32")


def test_rules_reject_bad_operands():
    with pytest.raises(ValueError, match="shape \\(2,\\)"):
        get_op("random_key_counter").shape([TensorType((3,), "int32")])
    with pytest.raises(ValueError, match="dtype"):
        get_op("random_normal").shape([type_of(KEY), type_of(COUNTER)], shape=(2,),
                                      dtype="int32")


def test_families_import_without_tensorflow():
    code = ("import sys, ipu_keras._src.ops.random, ipu_keras._src.ops.lists, ipu_keras._src.ops.einsum; "
            "assert 'tensorflow' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_einsum_rule_parses_ellipsis_and_implicit_output():
    rule = get_op("einsum").shape
    a, b = TensorType((2, 1, 3, 4), "float32"), TensorType((5, 4, 6), "float32")
    assert rule([a, b], equation="...ij,...jk->...ik")[0].shape == (2, 5, 3, 6)
    assert rule([TensorType((3, 4), "float32"), TensorType((4, 2), "float32")],
                equation="ab,bc")[0].shape == (3, 2)
    with pytest.raises(ValueError, match="operands"):
        rule([a], equation="ab,bc->ac")
