"""The tolerance table: docs/tolerances.md is current, every comparison names a row, and
the conformance runner measures differences against a row as it says (TensorFlow-free).

When the doc test fails after changing a row, regenerate the file with
`python -m ipu_keras._src.conformance.docs`.
"""
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from ipu_keras._src.conformance import docs
from ipu_keras._src.conformance import tolerances as T

ROOT = pathlib.Path(__file__).resolve().parents[2]
# A tolerance written as a number where a comparison is made, instead of a named row.
LITERAL = re.compile(r"\b(rtol|atol|rel|abs)\s*=\s*[-+]?(\d|\.\d)")
# Not comparisons of results: the target's specification numbers (peak FLOP/s, clock).
NOT_RESULTS = {"tests/simulator/test_targets.py"}
# Files not yet moved onto rows (none: every comparison names a row).
NOT_YET_ON_ROWS = set()


def test_committed_file_is_current():
    assert docs.TOLERANCES_PATH.read_text(encoding="utf-8") == T.render(), (
        "docs/tolerances.md is stale: run `python -m ipu_keras._src.conformance.docs`")


def test_rows_are_named_once_and_explained():
    names = [row.name for row in T.ROWS]
    assert len(names) == len(set(names))
    for row in T.ROWS:
        assert row.rtol >= 0 and row.atol >= 0, row.name
        assert len(row.reason) > 80, f"{row.name}: say why"


def test_float32_rows_stay_tight():
    """float32 comparisons allow at most FLOAT32's 1e-5 relative: a larger one would hide
    a real difference; long sums get an absolute allowance derived from their length."""
    for row in T.ROWS:
        if not row.name.startswith("mixed_float16"):
            assert row.rtol <= T.FLOAT32.rtol, row.name


def test_comparisons_name_a_row():
    found = []
    for folder in ("tests", "ipu_keras", "ipu_keras_addons", "bench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = str(path.relative_to(ROOT))
            if name in NOT_RESULTS | NOT_YET_ON_ROWS or name.endswith("conformance/tolerances.py"):
                continue
            lines = path.read_text(encoding="utf-8").splitlines()
            found += [f"{name}:{i + 1}" for i, line in enumerate(lines) if LITERAL.search(line)]
    assert not found, f"use a row of ipu_keras._src.conformance.tolerances at {found}"


def test_mixed_precision_items_use_float16_rows():
    """An item with a policy compares with its float32 twin within a float16 row; only the
    overflow item, which float32 cannot show, compares with TensorFlow's float16 run."""
    from ipu_keras._src.conformance.catalogue import catalogue

    for item in catalogue():
        assert item.tolerance.name.startswith("mixed_float16") == bool(item.policy), item.name
        if item.policy:
            assert item.reference_policy == "float32" or item.tolerance is T.MIXED_OVERFLOW


def test_float16_rows_count_roundings():
    row = T.float16_training("a test path", forward=3, backward=2, steps=4, learning_rate=0.1,
                             reduction=10)
    T.ROWS.remove(row)
    assert row.rtol == pytest.approx(5 * 2.0**-11 + 10 * 2.0**-24 + T.FLOAT32.rtol)
    assert row.atol == pytest.approx(4 * 0.1 * 5 * 2.0**-11)
    assert T.MIXED_ATTENTION.rtol < 0.02 and T.MIXED_DENSE.rtol < 0.005


def test_runner_ratio_is_relative_to_the_largest_magnitude():
    from ipu_keras._src.conformance.runner import _ratio

    row = T.Tolerance("test", 1e-3, 1e-4, "")
    expected = np.array([10.0, 0.01])
    assert _ratio(expected, expected, row) == (0.0, "")
    ratio, _ = _ratio(expected + [0.0, 0.005], expected, row)  # 0.005 of an allowed 0.0101
    assert ratio == pytest.approx(0.005 / 0.0101)
    assert _ratio(expected + [0.0, 0.02], expected, row)[0] > 1
    assert _ratio(np.array([3, 4]), np.array([3, 5]), row)[0] == np.inf  # integers: exact
    assert _ratio(np.array([np.nan]), np.array([1.0]), row) == (np.inf, "NaN in one run but "
                                                                       "not the other")


def test_table_needs_no_tensorflow():
    code = ("import sys; from ipu_keras._src.conformance import tolerances; tolerances.render(); "
            "assert 'tensorflow' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
