"""Graphs the differential fuzzer found failing, pinned so they keep passing.

Each is written out as the fuzzer printed it (shrunk); its facts are those the
generator derived. Fixes that belong to one op also have a row in the op family's
table in `tests/ops/`.
"""
import numpy as np
import pytest

from tests.fuzz.check import check_graph, check_strict_mode
from tests.fuzz.facts import Facts
from tests.fuzz.graph import Graph, Input, Op


def _f32(*shape):
    return Facts(shape, "float32", -2.0, 2.0, 0.0, 0.125)


REGRESSIONS = {
    # A zero-length contraction (k == 0): a product of zeros, mapped without a plan.
    "matmul-empty-k": Graph(
        steps=(Input(np.zeros((3, 0), np.float32)), Input(np.zeros((0, 4), np.float32)),
               Op("matmul", (0, 1), (("transpose_a", False), ("transpose_b", False)))),
        facts=(_f32(3, 0), _f32(0, 4), Facts((3, 4), "float32", 0.0, 0.0, 0.0, 2.0 ** -6)),
        outputs=(2,)),
    # The matmul planner divided by zero on an empty product (m == 0, transposed operands).
    "matmul-empty-m": Graph(
        steps=(Input(np.zeros((0, 2, 0), np.float32)),
               Input(np.arange(8, dtype=np.float32).reshape(4, 2) / 8),
               Op("matmul", (0, 1), (("transpose_a", True), ("transpose_b", True)))),
        facts=(_f32(0, 2, 0), _f32(4, 2), Facts((0, 0, 4), "float32", 0.0, 0.0, 0.0, 2.0 ** -6)),
        outputs=(2,)),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_regression(name):
    check_graph(REGRESSIONS[name])


def _i32(*shape):
    return Facts(shape, "int32", -5, 5)


STRICT_REGRESSIONS = {
    # The strict mode's probe rule gave a gather's tiles none of the indices they need.
    "gather-indices": Graph(
        steps=(Input(np.array([[0, 1], [-2, -2]], np.int32)), Input(np.array(1, np.int32)),
               Op("gather", (0, 1), (("axis", -2), ("batch_dims", 0)))),
        facts=(_i32(2, 2), Facts((), "int32", 0, 1), _i32(2)),
        outputs=(2,)),
    "gather_nd-indices": Graph(
        steps=(Input(np.array([0.5, -1.0], np.float32)), Input(np.array([[1]], np.int32)),
               Op("gather_nd", (0, 1), ())),
        facts=(_f32(2), Facts((1, 1), "int32", 0, 1), _f32(1)),
        outputs=(2,)),
    # An index past the end (found in CI): both modes must reject it with the same
    # designed error, not compare results.
    "gather-out-of-range": Graph(
        steps=(Input(np.zeros(2, np.int32)), Input(np.array(2, np.int32)),
               Op("gather", (0, 1), (("axis", 0), ("batch_dims", 0)))),
        facts=(_i32(2), Facts((), "int32", 0, 3), _i32()),
        outputs=(2,)),
    # ... nor pad's fill value (an operand of PadV2); and a bool or int fill was taken
    # for an element of the padded tensor.
    "pad-fill": Graph(
        steps=(Input(np.arange(18).reshape(2, 9) % 3 == 0),
               Op("pad", (0,), (("mode", "CONSTANT"), ("paddings", ((1, 2), (0, 1))),
                                ("value", 1)))),
        facts=(Facts((2, 9), "bool", 0, 1), Facts((5, 10), "bool", 0, 1)),
        outputs=(1,)),
}


@pytest.mark.parametrize("name", sorted(STRICT_REGRESSIONS))
def test_strict_mode_regression(name):
    check_graph(STRICT_REGRESSIONS[name])
    check_strict_mode(STRICT_REGRESSIONS[name])
