"""Executables are plain data: saved, loaded without pickle, and checked."""
import hashlib
import io
import json
import zipfile

import numpy as np
import pytest

from ipu_keras._src.compiler import Executable, compile_graph
from ipu_keras._src.device.executable import FORMAT_VERSION
from ipu_keras._src.device.steps import Block, While
from ipu_keras.errors import ExecutableFormatError
from ipu_keras._src.simulator import Engine
from tests.graphs import ListStreams, counting_loop, dense_step, small_target


def _run_dense(exe):
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 7
    state = [np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2)]
    return Engine(exe).run([x], state, None) + state


@pytest.mark.parametrize("make", [dense_step, lambda: counting_loop()[0]])
def test_round_trip_gives_identical_results(tmp_path, make):
    exe = compile_graph(make(), small_target(4))
    path = tmp_path / "step.ipuexe"
    exe.save(path)
    loaded = Executable.load(path)
    assert loaded.blocks[0].cycles == exe.blocks[0].cycles
    assert loaded.memory == exe.memory
    if make is dense_step:
        for a, b in zip(_run_dense(exe), _run_dense(loaded)):
            np.testing.assert_array_equal(a, b)
    else:
        runs = []
        for e in (exe, loaded):
            streams = ListStreams([np.ones(2, np.float32)] * 5)
            runs.append(Engine(e).run([np.zeros(2, np.float32)], [], streams) + streams.out)
        for a, b in zip(*runs):
            np.testing.assert_array_equal(a, b)


def test_the_file_holds_json_and_npz_only(tmp_path):
    path = tmp_path / "step.ipuexe"
    compile_graph(dense_step(), small_target(4)).save(path)
    with zipfile.ZipFile(path) as archive:
        assert sorted(archive.namelist()) == ["checksum", "constants.npz", "executable.json"]


def test_truncated_file_is_refused(tmp_path):
    path = tmp_path / "step.ipuexe"
    compile_graph(dense_step(), small_target(4)).save(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ExecutableFormatError, match="not a complete ipu_keras executable"):
        Executable.load(path)


def test_altered_file_is_refused(tmp_path):
    path = tmp_path / "step.ipuexe"
    compile_graph(dense_step(), small_target(4)).save(path)
    with zipfile.ZipFile(path) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    members["executable.json"] = members["executable.json"].replace(b'"sub"', b'"add"')
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    with pytest.raises(ExecutableFormatError, match="checksum"):
        Executable.load(path)


# -- hostile files: a checksum is no signature, so the structure is checked too --------------
def _members(path):
    with zipfile.ZipFile(path) as archive:
        return {n: archive.read(n) for n in archive.namelist()}


def _rewrite(path, members, compression=zipfile.ZIP_STORED):
    """Writes `members` back with a checksum that matches, so only the structure is wrong."""
    members = dict(members)
    digest = hashlib.sha256(members["executable.json"] + members["constants.npz"]).hexdigest()
    members["checksum"] = digest.encode()
    with zipfile.ZipFile(path, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "step.ipuexe"
    compile_graph(dense_step(), small_target(4)).save(path)
    return path


@pytest.mark.parametrize("name", ["../../escape.json", "/etc/evil", "sub/executable.json"])
def test_a_member_with_another_name_or_path_is_refused(saved, name):
    members = _members(saved)
    members[name] = b"{}"
    _rewrite(saved, members)
    with pytest.raises(ExecutableFormatError, match="member name=") as info:
        Executable.load(saved)
    assert repr(name) in str(info.value)
    assert not (saved.parent.parent / "escape.json").exists()


def test_a_zip_bomb_is_refused_before_it_is_decompressed(saved, monkeypatch):
    members = _members(saved)
    members["executable.json"] = b" " * (64 << 20)  # 64 MiB of spaces deflate to ~64 KiB
    _rewrite(saved, members, zipfile.ZIP_DEFLATED)
    assert saved.stat().st_size < (1 << 20)
    opened = []
    monkeypatch.setattr(zipfile.ZipFile, "open", lambda *a, **k: opened.append(a) or 1 / 0)
    with pytest.raises(ExecutableFormatError, match="uncompressed members"):
        Executable.load(saved)
    assert not opened  # refused from the directory, nothing was read or inflated


def test_a_member_declaring_more_than_the_archive_holds_is_refused(saved):
    data = bytearray(saved.read_bytes())
    # The end record gives the central directory; patch its first entry's uncompressed
    # size (executable.json) to 4 GiB - 2.
    end = data.rindex(b"PK\x05\x06")
    central = int.from_bytes(data[end + 16:end + 20], "little")
    data[central + 24:central + 28] = (0xFFFFFFFE).to_bytes(4, "little")
    saved.write_bytes(bytes(data))
    with pytest.raises(ExecutableFormatError, match="file_size=4294967294"):
        Executable.load(saved)


def test_an_array_declaring_a_huge_shape_is_refused(saved):
    members = _members(saved)
    with zipfile.ZipFile(io.BytesIO(members["constants.npz"])) as npz:
        arrays = {n: npz.read(n) for n in npz.namelist()}
    name = sorted(arrays)[0]
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }"
    arrays[name] = (b"\x93NUMPY\x01\x00" + (len(header) + 1).to_bytes(2, "little")
                    + header.encode() + b"\n" + b"\0" * 16)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as npz:
        for n, data in arrays.items():
            npz.writestr(n, data)
    members["constants.npz"] = buffer.getvalue()
    _rewrite(saved, members)
    with pytest.raises(ExecutableFormatError, match=r"shape=\(1000000000000,\)"):
        Executable.load(saved)


def test_loaded_blocks_are_the_typed_records_saved(tmp_path):
    exe = compile_graph(counting_loop()[0], small_target(4))
    exe.save(tmp_path / "loop.ipuexe")
    loaded = Executable.load(tmp_path / "loop.ipuexe")
    assert loaded.blocks == exe.blocks
    assert all(isinstance(b, Block) for b in loaded.blocks)
    loop = loaded.blocks[0].steps[0]
    assert isinstance(loop, While) and loop.blocks == (loop.cond_block, loop.body_block)


def test_a_file_of_another_format_version_is_refused(saved):
    members = _members(saved)
    document = json.loads(members["executable.json"])
    document["format"] = FORMAT_VERSION - 1
    members["executable.json"] = json.dumps(document).encode()
    _rewrite(saved, members)
    with pytest.raises(ExecutableFormatError, match=f"format {FORMAT_VERSION} expected"):
        Executable.load(saved)


def _break(document, how):
    exe = document["executable"]
    main = exe["blocks"][0]
    exec_step = next(s for s in main["steps"] if s[0] == "exec")
    if how == "unknown kind":
        exec_step[0] = "jump"
    elif how == "missing field":
        exec_step.pop()
    elif how == "slot out of range":
        exec_step[2][0] = exe["num_slots"]
    elif how == "slot of another type":
        exec_step[3] = "3"
    elif how == "variable out of range":
        next(s for s in main["steps"] if s[0] == "read")[1] = 7
    elif how == "block without its cycles":
        del main["cycles"]
    elif how == "profile row too short":
        main["profile"][0].pop()
    elif how == "sources of another length":
        main["sources"].pop()
    elif how == "tile facts of another length":
        main["tiles"]["steps"].pop()
    elif how == "array not in the npz":
        exe["constants"][0][1] = {"$array": "c999"}
    elif how == "no blocks":
        exe["blocks"] = []
    elif how == "field missing":
        del exe["memory"]
    elif how == "step not a list":
        main["steps"][0] = {"kind": "exec"}


@pytest.mark.parametrize("how", [
    "unknown kind", "missing field", "slot out of range", "slot of another type",
    "variable out of range", "block without its cycles", "profile row too short",
    "sources of another length", "tile facts of another length", "array not in the npz",
    "no blocks", "field missing", "step not a list"])
def test_a_malformed_program_is_refused_before_it_runs(saved, how):
    members = _members(saved)
    document = json.loads(members["executable.json"])
    _break(document, how)
    members["executable.json"] = json.dumps(document).encode()
    _rewrite(saved, members)
    with pytest.raises(ExecutableFormatError, match="not a well-formed ipu_keras executable"):
        Executable.load(saved)


def test_a_loop_running_its_own_block_is_refused(tmp_path):
    path = tmp_path / "loop.ipuexe"
    compile_graph(counting_loop()[0], small_target(4)).save(path)
    members = _members(path)
    document = json.loads(members["executable.json"])
    document["executable"]["blocks"][0]["steps"][0][2] = 0   # the condition: block 0 itself
    members["executable.json"] = json.dumps(document).encode()
    _rewrite(path, members)
    with pytest.raises(ExecutableFormatError, match=r"a sub-block in \[1, 3\)"):
        Executable.load(path)
