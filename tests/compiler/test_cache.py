"""The executable cache (compiler/cache.py, _compile.py) and graph fingerprints."""
import errno
import hashlib
import io
import json
import logging
import os
import zipfile

import numpy as np
import pytest

from ipu_keras import config
from ipu_keras._src.driver.compile import compile_for_ipu, compile_options
from ipu_keras._src.compiler import cache
from ipu_keras._src.ir.fingerprint import canonical_text, fingerprint
from ipu_keras._src.simulator import Engine
from tests.graphs import counting_loop, dense_step, small_target


def _cfg(directory, tiles=8):
    cfg = config.IPUConfig()
    cfg.ipu_model.tiles_per_ipu = tiles
    cfg.executable_cache_path = str(directory)
    return cfg


def _run_dense(exe):
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 7
    state = [np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2)]
    return Engine(exe).run([x], state, None) + state


def _entries(directory):
    return sorted(p for p in os.listdir(directory) if p.endswith(cache.SUFFIX))


def test_fingerprint_ignores_value_ids_and_sees_everything_else():
    a, b = dense_step(), dense_step()
    assert a.inputs[0].id != b.inputs[0].id
    assert canonical_text(a) == canonical_text(b)
    assert "sha256=" in canonical_text(a)  # constants by content
    other = dense_step()
    const = next(e for e in other.equations if e.op == "const")
    const.params["value"] = const.params["value"] + 1
    assert fingerprint(other) != fingerprint(a)
    changed = dense_step()
    next(e for e in changed.equations if e.op == "write_var").params["mode"] = "add"
    assert fingerprint(changed) != fingerprint(a)
    loop_a, loop_b = counting_loop(5)[0], counting_loop(6)[0]
    assert fingerprint(loop_a) != fingerprint(loop_b)  # sub-graphs are part of the text
    assert fingerprint(counting_loop(5)[0]) == fingerprint(loop_a)


def test_key_changes_with_graph_target_and_options():
    graph = dense_step()
    target = small_target(8).to_dict()
    options = compile_options(_cfg(""))
    key = cache.cache_key(graph, target, options)
    assert key == cache.cache_key(dense_step(), dict(target), dict(options))
    assert key != cache.cache_key(counting_loop()[0], target, options)
    assert key != cache.cache_key(graph, small_target(16).to_dict(), options)
    assert key != cache.cache_key(graph, small_target(8, "ipu21").to_dict(), options)
    for change in ({"compile_ipu_code": False}, {"allow_oom": True},
                   {"matmul_options": {"availableMemoryProportion": "0.3"}},
                   {"conv_options": {"partialsType": "half"}}):
        assert key != cache.cache_key(graph, target, dict(options, **change)), change


def test_miss_then_hit(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="ipu_keras")
    first = compile_for_ipu(dense_step(), _cfg(tmp_path), "dense")
    assert first.info["cache"]["status"] == "miss"
    assert _entries(tmp_path) == [first.info["cache"]["key"] + cache.SUFFIX]
    assert not [r for r in caplog.records if "Loaded executable from cache" in r.message]
    second = compile_for_ipu(dense_step(), _cfg(tmp_path), "dense")
    assert second.info["cache"] == {"status": "hit", "key": first.info["cache"]["key"]}
    hits = [r for r in caplog.records if "Loaded executable from cache" in r.message]
    assert len(hits) == 1 and hits[0].levelno == logging.INFO
    for a, b in zip(_run_dense(first), _run_dense(second)):
        np.testing.assert_array_equal(a, b)
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_different_target_or_options_miss(tmp_path):
    compile_for_ipu(dense_step(), _cfg(tmp_path, tiles=8))
    assert compile_for_ipu(dense_step(), _cfg(tmp_path, tiles=4)).info["cache"]["status"] == "miss"
    cfg = _cfg(tmp_path, tiles=8)
    cfg.matmuls.poplar_options = {"availableMemoryProportion": "0.2"}
    assert compile_for_ipu(dense_step(), cfg).info["cache"]["status"] == "miss"
    assert len(_entries(tmp_path)) == 3


def _as_format(data, version):
    """The entry `data` as a file of executable format `version` would be, checksum and all."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    document = json.loads(members["executable.json"])
    document["format"] = version
    members["executable.json"] = json.dumps(document).encode()
    members["checksum"] = hashlib.sha256(
        members["executable.json"] + members["constants.npz"]).hexdigest().encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, member in members.items():
            archive.writestr(name, member)
    return buffer.getvalue()


@pytest.mark.parametrize("damage", ["truncate", "alter", "old format"])
def test_damaged_entry_warns_recompiles_and_is_replaced(tmp_path, caplog, damage):
    key = compile_for_ipu(dense_step(), _cfg(tmp_path)).info["cache"]["key"]
    path = cache.entry_path(str(tmp_path), key)
    data = open(path, "rb").read()
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "old format":   # the steps were positional lists in format 1
        data = _as_format(data, 1)
    else:
        i = data.index(b'"cycles"') + 2
        data = data[:i] + bytes([data[i] ^ 1]) + data[i + 1:]
    open(path, "wb").write(data)
    caplog.set_level(logging.INFO, logger="ipu_keras")
    again = compile_for_ipu(dense_step(), _cfg(tmp_path))
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "recompiled" in warnings[0].message
    assert again.info["cache"]["status"] == "miss"
    assert os.path.isfile(path)  # replaced by a good entry
    assert compile_for_ipu(dense_step(), _cfg(tmp_path)).info["cache"]["status"] == "hit"


def test_flag_sets_the_directory_and_the_config_option_wins(tmp_path, monkeypatch):
    flag_dir, option_dir = tmp_path / "flag", tmp_path / "option"
    monkeypatch.setenv("TF_POPLAR_FLAGS", f"--executable_cache_path={flag_dir}")
    compile_for_ipu(dense_step(), _cfg(""))
    assert len(_entries(flag_dir)) == 1
    compile_for_ipu(dense_step(), _cfg(option_dir))
    assert len(_entries(option_dir)) == 1 and len(_entries(flag_dir)) == 1


def test_no_cache_by_default():
    assert compile_for_ipu(dense_step(), _cfg("")).info["cache"] == {"status": "off",
                                                                       "key": None}


def test_store_is_atomic_and_replaces(tmp_path):
    exe = compile_for_ipu(dense_step(), _cfg(""))
    bound = {"key": "k" * 64, "graph": "g" * 64}
    cache.store(str(tmp_path), bound, exe)
    cache.store(str(tmp_path), bound, exe)
    assert os.listdir(tmp_path) == ["k" * 64 + cache.SUFFIX]
    assert cache.load(str(tmp_path), bound).blocks[0].cycles == exe.blocks[0].cycles
    assert cache.load(str(tmp_path), dict(bound, key="x" * 64)) is None


def _fails_with(code):
    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code))
    return fail


def _partial_save_then_disk_full(self, path, binding=None):
    with open(path, "wb") as f:
        f.write(b"PK\x03\x04" + b"\0" * 100)  # what fit before the disk filled up
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("fault", ["disk full", "read-only directory", "read-only, no dir"])
def test_a_cache_that_cannot_be_written_warns_and_compiling_still_works(
        tmp_path, caplog, monkeypatch, fault):
    directory = tmp_path / "cache"
    if fault == "disk full":
        monkeypatch.setattr(cache.Executable, "save", _partial_save_then_disk_full)
    elif fault == "read-only directory":
        directory.mkdir()
        monkeypatch.setattr(cache.tempfile, "mkstemp", _fails_with(errno.EROFS))
    else:
        monkeypatch.setattr(cache.os, "makedirs", _fails_with(errno.EACCES))
    caplog.set_level(logging.INFO, logger="ipu_keras")
    exe = compile_for_ipu(dense_step(), _cfg(directory), "dense")
    assert exe.info["cache"]["status"] == "miss"
    for a, b in zip(_run_dense(exe), _run_dense(compile_for_ipu(dense_step(), _cfg("")))):
        np.testing.assert_array_equal(a, b)
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "not cached" in warning.message and "Received: executable_cache_path=" in (
        warning.message)
    assert not directory.exists() or os.listdir(directory) == []  # no entry, no temporary


def test_a_read_only_cache_still_serves_its_entries(tmp_path, monkeypatch):
    key = compile_for_ipu(dense_step(), _cfg(tmp_path)).info["cache"]["key"]
    monkeypatch.setattr(cache.tempfile, "mkstemp", _fails_with(errno.EROFS))
    again = compile_for_ipu(dense_step(), _cfg(tmp_path))
    assert again.info["cache"] == {"status": "hit", "key": key}
