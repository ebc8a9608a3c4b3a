"""The lower layers (ir, ops rules, compiler, simulator, config) need no TensorFlow.

Their tests run again in a fresh interpreter in which importing TensorFlow or Keras
fails, which proves that neither they nor the code they test imports either.
"""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
TF_FREE = ["tests/ir", "tests/compiler", "tests/simulator", "tests/reports",
           "tests/test_config.py", "tests/test_flags.py", "tests/ops/test_registry.py"] + sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "ops").glob("test_*_rules.py"))

BLOCK_AND_RUN = """
import sys
sys.modules["tensorflow"] = None  # any `import tensorflow` now raises ImportError
sys.modules["keras"] = None
import pytest
code = pytest.main(["-q", "-p", "no:cacheprovider", *sys.argv[1:]])
assert "tensorflow" not in sys.modules or sys.modules["tensorflow"] is None
sys.exit(code)
"""


def test_lower_layers_run_without_tensorflow():
    result = subprocess.run([sys.executable, "-c", BLOCK_AND_RUN, *TF_FREE], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert " passed" in result.stdout
