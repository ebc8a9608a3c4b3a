"""Graphs the differential fuzzer found failing, pinned so they keep passing.

Each is written out as the fuzzer printed it (shrunk); its facts are those the
generator derived. Fixes that belong to one op also have a row in the op family's
table in `tests/ops/`.
"""
import numpy as np
import pytest

from tests.fuzz.check import check_graph
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
