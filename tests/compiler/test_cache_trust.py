"""The executable cache distrusts its files (issue 30, items 3 and 4).

Each probe damages an entry as a careless or hostile user could (copies another graph's
entry under the key, alters a field and recomputes the checksum, nests JSON deeply, puts a
FIFO where the entry was, leaves a temporary file behind, fills the cache past its size)
and checks that compiling through the cache logs one warning, recompiles and gives the
results of a fresh compile, never an exception and never another graph's program.
"""
import copy
import hashlib
import json
import logging
import os
import time
import zipfile

import numpy as np
import pytest

from ipu_keras._src.compiler import cache
from ipu_keras._src.driver.compile import compile_for_ipu
from ipu_keras.errors import ExecutableFormatError
from tests.compiler.test_cache import _cfg, _entries, _run_dense
from tests.graphs import dense_step


def _other_step():
    """dense_step with another bias: the same interface, another program."""
    graph = dense_step()
    const = next(e for e in graph.equations if e.op == "const")
    const.params["value"] = const.params["value"] * 3
    return graph


def _members(path):
    with zipfile.ZipFile(path) as archive:
        return {n: archive.read(n) for n in archive.namelist()}


def _write_members(path, members):
    """Writes the entry with a recomputed checksum, as a forger would."""
    members = dict(members)
    members["checksum"] = hashlib.sha256(
        members["executable.json"] + members["constants.npz"]).hexdigest().encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, member in members.items():
            archive.writestr(name, member)


def _tamper(path, change):
    members = _members(path)
    document = json.loads(members["executable.json"])
    changed = change(document)
    document = document if changed is None else changed
    members["executable.json"] = (document if isinstance(document, bytes)
                                  else json.dumps(document).encode())
    _write_members(path, members)


def _warnings(caplog):
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


def _assert_recompiled(tmp_path, caplog, graph=dense_step):
    caplog.clear()
    caplog.set_level(logging.INFO, logger="ipu_keras")
    again = compile_for_ipu(graph(), _cfg(tmp_path), "dense")
    (warning,) = _warnings(caplog)
    assert "recompiled" in warning.message
    assert again.info["cache"]["status"] == "miss"
    fresh = compile_for_ipu(graph(), _cfg(""))
    for a, b in zip(_run_dense(again), _run_dense(fresh)):
        np.testing.assert_array_equal(a, b)
    assert compile_for_ipu(graph(), _cfg(tmp_path)).info["cache"]["status"] == "hit"
    return warning


def _compiled_entry(tmp_path, graph=dense_step):
    key = compile_for_ipu(graph(), _cfg(tmp_path)).info["cache"]["key"]
    return key, cache.entry_path(str(tmp_path), key)


# -- item 3: an entry is bound to its key and its graph ----------------------------------
def test_another_graphs_entry_copied_under_the_key_is_refused(tmp_path, caplog):
    key, path = _compiled_entry(tmp_path)
    _, other = _compiled_entry(tmp_path, _other_step)
    os.replace(other, path)
    warning = _assert_recompiled(tmp_path, caplog)
    assert key in warning.message


def test_an_entry_whose_key_was_rewritten_still_names_another_graph(tmp_path, caplog):
    key, path = _compiled_entry(tmp_path)
    _, other = _compiled_entry(tmp_path, _other_step)

    def forge(document):
        document["binding"]["key"] = key   # the key, but not the graph, forged
    _tamper(other, forge)
    os.replace(other, path)
    warning = _assert_recompiled(tmp_path, caplog)
    assert "graph" in warning.message


# -- item 4: a well-formed but wrong entry is recompiled ---------------------------------
def _exec_steps(document):
    return [s for b in document["executable"]["blocks"] for s in b["steps"] if s[0] == "exec"]


def _first_exec(document):
    return _exec_steps(document)[0]


def _unwritten_slot(document):
    exe = document["executable"]
    exe["num_slots"] += 1
    return exe["num_slots"] - 1


def _nested(depth):
    value = 0
    for _ in range(depth):
        value = [value]
    return value


def _deep_text(depth):
    return lambda d: json.dumps(d).replace('"info": {', '"info": {"deep": ' + "[" * depth
                                           + "]" * depth + ", ", 1).encode()


_EXE = "executable"
TAMPERED = {
    "unknown op": lambda d: _first_exec(d).__setitem__(1, "no_such_op"),
    "an op of another arity": lambda d: _first_exec(d).__setitem__(1, "relu"),
    "unknown step kind": lambda d: _first_exec(d).__setitem__(0, "jump"),
    "slot out of range": lambda d: _first_exec(d).__setitem__(3, [999]),
    "read before write": lambda d: _first_exec(d).__setitem__(2, [_unwritten_slot(d)]),
    "output never written": lambda d: d[_EXE].__setitem__("outputs", [_unwritten_slot(d)]),
    "unknown param": lambda d: _first_exec(d)[4].__setitem__("bogus", 1),
    "params a list": lambda d: _first_exec(d).__setitem__(4, [1]),
    "too many operands": lambda d: _first_exec(d).__setitem__(2, _first_exec(d)[2] * 3),
    "no operands": lambda d: _first_exec(d).__setitem__(2, []),
    "fewer inputs than types": lambda d: d[_EXE].__setitem__("inputs", []),
    "input type garbage": lambda d: d[_EXE].__setitem__("input_types", [{"shape": "x"}]),
    "output type missing": lambda d: d[_EXE].__setitem__("output_types", []),
    "variable garbage": lambda d: d[_EXE].__setitem__("variables", [1]),
    "variable without written": lambda d: d[_EXE]["variables"][0].pop("written"),
    "target num_ipus 0": lambda d: d[_EXE]["target"].__setitem__("num_ipus", 0),
    "target field missing": lambda d: d[_EXE]["target"].pop("tiles_per_ipu"),
    "target field a string": lambda d: d[_EXE]["target"].__setitem__("clock_hz", "fast"),
    "out_of_memory garbage": lambda d: d[_EXE]["memory"].__setitem__("out_of_memory", "x"),
    "out_of_memory wrong fields": lambda d: d[_EXE]["memory"].__setitem__(
        "out_of_memory", {"x": 1}),
    "executable a list": lambda d: d.__setitem__(_EXE, []),
    "document a list": lambda d: [d],
    "format a string": lambda d: d.__setitem__("format", str(d["format"])),
    "binding missing": lambda d: d.pop("binding"),
    "binding a string": lambda d: d.__setitem__("binding", "x"),
    "deep params": lambda d: _first_exec(d)[4].__setitem__("deep", _nested(800)),
    "deep info": lambda d: d[_EXE]["info"].__setitem__("deep", _nested(800)),
    "deep JSON text": _deep_text(100_000),
    "not JSON": lambda d: b"{" + json.dumps(d).encode(),
    "not UTF-8": lambda d: b"\xff" + json.dumps(d).encode(),
}


@pytest.mark.parametrize("name", sorted(TAMPERED))
def test_a_tampered_entry_with_a_valid_checksum_is_recompiled(tmp_path, caplog, name):
    _, path = _compiled_entry(tmp_path)
    _tamper(path, TAMPERED[name])
    _assert_recompiled(tmp_path, caplog)


def test_every_refusal_is_one_designed_error(tmp_path):
    key, path = _compiled_entry(tmp_path)
    good = open(path, "rb").read()
    binding = cache.binding(dense_step(), *_key_parts())
    assert binding["key"] == key
    for name, change in sorted(TAMPERED.items()):
        open(path, "wb").write(good)
        _tamper(path, change)
        with pytest.raises(ExecutableFormatError, match="Recompile"):
            cache.load(str(tmp_path), binding)


def _key_parts():
    from ipu_keras._src.driver.compile import compile_options
    cfg = _cfg("")
    return cfg.target().to_dict(), compile_options(cfg)


# -- files that are not entries ----------------------------------------------------------
def test_a_fifo_in_place_of_an_entry_does_not_block(tmp_path, caplog):
    _, path = _compiled_entry(tmp_path)
    os.remove(path)
    os.mkfifo(path)
    started = time.monotonic()
    _assert_recompiled(tmp_path, caplog)
    assert time.monotonic() - started < 30
    assert os.path.isfile(path)


def test_a_directory_in_place_of_an_entry_warns_and_compiles(tmp_path, caplog):
    _, path = _compiled_entry(tmp_path)
    os.remove(path)
    os.mkdir(path)
    caplog.set_level(logging.INFO, logger="ipu_keras")
    exe = compile_for_ipu(dense_step(), _cfg(tmp_path), "dense")
    assert exe.info["cache"]["status"] == "miss"
    assert len(_warnings(caplog)) == 2   # the refused entry, then the entry not stored


def test_a_refused_entry_that_cannot_be_replaced_warns_once(tmp_path, caplog, monkeypatch):
    _, path = _compiled_entry(tmp_path)
    _tamper(path, TAMPERED["unknown op"])
    monkeypatch.setattr(cache, "store", lambda *a, **k: None)
    caplog.set_level(logging.INFO, logger="ipu_keras")
    for _ in range(3):
        assert compile_for_ipu(dense_step(), _cfg(tmp_path)).info["cache"]["status"] == "miss"
    assert len(_warnings(caplog)) == 1


# -- temporary files and the size limit --------------------------------------------------
def test_stale_temporary_files_are_removed(tmp_path):
    _, path = _compiled_entry(tmp_path)
    stale, fresh = tmp_path / ".0123456789abcdef-dead.tmp", tmp_path / ".fedcba-live.tmp"
    stale.write_bytes(b"PK half an entry")
    fresh.write_bytes(b"PK being written")
    old = time.time() - 2 * cache.STALE_SECONDS
    os.utime(stale, (old, old))
    compile_for_ipu(_other_step(), _cfg(tmp_path))
    assert not stale.exists() and fresh.exists()   # a live writer's file is left alone
    assert os.path.exists(path)


def _sizes(tmp_path):
    return {p: os.path.getsize(tmp_path / p) for p in _entries(tmp_path)}


def test_the_cache_evicts_least_recently_used_entries_past_its_size(tmp_path, monkeypatch):
    graphs = [dense_step, _other_step, lambda: _scaled(5), lambda: _scaled(7)]
    keys = []
    for age, graph in enumerate(graphs[:3]):
        keys.append(compile_for_ipu(graph(), _cfg(tmp_path)).info["cache"]["key"])
        stamp = time.time() - 1000 + 100 * age
        os.utime(cache.entry_path(str(tmp_path), keys[-1]), (stamp, stamp))
    size = max(_sizes(tmp_path).values())
    # A hit makes the oldest entry the most recently used.
    assert compile_for_ipu(dense_step(), _cfg(tmp_path)).info["cache"]["status"] == "hit"
    monkeypatch.setenv("TF_POPLAR_FLAGS", f"--executable_cache_max_size={3 * size + size // 2}")
    keys.append(compile_for_ipu(graphs[3](), _cfg(tmp_path)).info["cache"]["key"])
    left = _entries(tmp_path)
    assert len(left) == 3 and keys[1] + cache.SUFFIX not in left
    assert sum(_sizes(tmp_path).values()) <= 3 * size + size // 2


def test_no_entry_fits_a_tiny_limit_and_compiling_still_works(tmp_path, monkeypatch):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--executable_cache_max_size=10")
    exe = compile_for_ipu(dense_step(), _cfg(tmp_path))
    assert exe.info["cache"]["status"] == "miss" and _entries(tmp_path) == []


@pytest.mark.parametrize("text, size", [("1000", 1000), ("2KB", 2048), ("3MB", 3 << 20),
                                        ("1.5GB", 3 << 29), ("0", 0)])
def test_max_size_flag_values(text, size):
    assert cache.parse_size(text) == size


@pytest.mark.parametrize("text", ["lots", "-5", "", "1e", "5TBB", True])
def test_a_malformed_max_size_is_a_designed_error(text, monkeypatch, tmp_path):
    from ipu_keras.errors import ConfigurationError
    with pytest.raises(ConfigurationError, match="executable_cache_max_size"):
        cache.parse_size(text)
    value = "" if text is True else f"={text}"
    monkeypatch.setenv("TF_POPLAR_FLAGS", f"--executable_cache_max_size{value}")
    with pytest.raises(ConfigurationError, match="Received"):
        compile_for_ipu(dense_step(), _cfg(tmp_path))


def _scaled(factor):
    graph = dense_step()
    const = next(e for e in graph.equations if e.op == "const")
    const.params["value"] = const.params["value"] * factor
    return graph


def test_tampering_probes_leave_the_good_entry_loadable(tmp_path):
    """The probes change copies: the helper itself does not damage a good entry."""
    key, path = _compiled_entry(tmp_path)
    _tamper(path, lambda d: copy.deepcopy(d))
    assert compile_for_ipu(dense_step(), _cfg(tmp_path)).info["cache"]["status"] == "hit"
