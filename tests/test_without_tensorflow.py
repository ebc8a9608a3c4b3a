"""The lower layers (ir, ops rules, compiler, simulator, config) need no TensorFlow.

Their tests run again in a fresh interpreter in which importing TensorFlow or Keras
fails, which proves that neither they nor the code they test imports either. They run
once per OpenBLAS thread count (the machine's default, one, two): the engine's products
run with BLAS on one thread, so a test whose reference product runs with BLAS' own
threads fails here. Whether two threads sum a product in another order depends on the
kernel OpenBLAS picks for the processor (its SkylakeX kernel gives the one-thread bits,
its Haswell kernel does not), so the two-thread run takes the Haswell kernel wherever
the processor has AVX2, and the dependence shows on any x86-64 machine.
"""
import os
import pathlib
import subprocess
import sys

import pytest

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


def _has_avx2():
    try:
        return " avx2" in pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


@pytest.mark.parametrize("blas_threads", [None, "1", "2"],
                         ids=["blas default threads", "blas 1 thread", "blas 2 threads"])
def test_lower_layers_run_without_tensorflow(blas_threads):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE")}
    if blas_threads is not None:
        env["OPENBLAS_NUM_THREADS"] = blas_threads
    if blas_threads == "2" and _has_avx2():
        env["OPENBLAS_CORETYPE"] = "Haswell"
    result = subprocess.run([sys.executable, "-c", BLOCK_AND_RUN, *TF_FREE], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert " passed" in result.stdout
