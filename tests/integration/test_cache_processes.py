"""The executable cache across processes: a second process loads what the first compiled.

Each process is a fresh interpreter (`sys.executable -c ...`) with
`TF_POPLAR_FLAGS=--executable_cache_path=DIR` that compiles and runs the same function.
"""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from ipu_keras._src.compiler import Executable
from ipu_keras._src.compiler.cache import SUFFIX

ROOT = pathlib.Path(__file__).resolve().parents[2]

SCRIPT = """
import logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(levelname)s %(message)s")
import numpy as np
import tensorflow as tf
import ipu_keras as ipu

def layer(x, w):
    return tf.nn.relu(tf.matmul(x, w) + 1.0)

x = np.linspace(-1, 1, 8 * 16, dtype=np.float32).reshape(8, 16)
w = np.linspace(1, -1, 16 * 4, dtype=np.float32).reshape(16, 4)
(out,) = ipu.ipu_compiler.compile(layer, [x, w])
print("RESULT", repr(float(np.asarray(out).sum())))
"""

pytestmark = pytest.mark.slow


def _env(cache_dir):
    env = dict(os.environ)
    env["TF_POPLAR_FLAGS"] = f"--executable_cache_path={cache_dir}"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    return env


def _start(cache_dir):
    return subprocess.Popen([sys.executable, "-c", SCRIPT], cwd=ROOT, env=_env(cache_dir),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(process):
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, out[-2000:] + err[-3000:]
    result = [line for line in out.splitlines() if line.startswith("RESULT")]
    return out, result


def _entries(cache_dir):
    return [p for p in os.listdir(cache_dir) if p.endswith(SUFFIX)]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """A cache that one process filled (compiling, not loading), and that process's result.
    Each test works on a copy of it."""
    cache = tmp_path_factory.mktemp("compiled")
    out, result = _finish(_start(cache))
    assert "Loaded executable from cache" not in out
    assert len(_entries(cache)) == 1
    return cache, result


def _copy(cache, tmp_path):
    return shutil.copytree(cache, tmp_path / "cache")


def test_second_process_loads_from_the_cache(compiled, tmp_path):
    cache, first = compiled
    second_out, second = _finish(_start(_copy(cache, tmp_path)))
    assert "INFO Loaded executable from cache" in second_out, second_out
    assert second == first


def test_two_processes_writing_at_once_leave_a_good_entry(tmp_path):
    processes = [_start(tmp_path), _start(tmp_path)]
    results = [_finish(p)[1] for p in processes]
    assert results[0] == results[1]
    (entry,) = _entries(tmp_path)
    Executable.load(tmp_path / entry)  # complete and checksummed
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_two_processes_reading_a_truncated_entry_at_once_recompile_and_repair_it(
        compiled, tmp_path):
    """(A corrupted entry takes the same path; tests/compiler/test_cache.py covers both.)"""
    cache, first = compiled
    cache = _copy(cache, tmp_path)
    (entry,) = _entries(cache)
    path = cache / entry
    path.write_bytes(path.read_bytes()[:path.stat().st_size // 3])
    processes = [_start(cache), _start(cache)]
    outputs = [_finish(p) for p in processes]
    for out, result in outputs:
        assert result == first  # each process computed the right thing
        # It found the damage (a warning, and it recompiled), unless the other process had
        # already replaced the entry by then.
        assert ("WARNING The executable cache entry" in out and "damaged" in out
                or "INFO Loaded executable from cache" in out), out
    assert any("damaged" in out for out, _ in outputs)
    assert _entries(cache) == [entry]
    Executable.load(path)  # repaired: complete and checksummed
    assert not [p for p in os.listdir(cache) if p.endswith(".tmp")]
