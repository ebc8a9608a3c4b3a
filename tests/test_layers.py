"""The import contract: the layers of `ipu_keras` only point down, with no cycles.

`.importlinter` at the repository root states the contracts (the layer order, no cycle
between the modules of any package, no TensorFlow below the tracer) and
`docs/architecture.md` explains them. `lint-imports` reads the code's imports, including
imports inside functions, without running the code.
"""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _lint_imports():
    """Runs `lint-imports` on this checkout (it reads `.importlinter` in its directory)."""
    command = shutil.which("lint-imports", path=os.path.dirname(sys.executable))
    command = command or shutil.which("lint-imports")
    if command is None:
        pytest.fail("import-linter is not installed: pip install '.[test]' installs it")
    env = dict(os.environ, PYTHONPATH=str(ROOT))   # this checkout's ipu_keras, not another
    return subprocess.run([command, "--no-cache"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


def test_the_import_contracts_are_kept():
    result = _lint_imports()
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert "0 broken" in result.stdout
