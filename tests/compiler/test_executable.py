"""Executables are plain data: saved, loaded without pickle, and checked."""
import zipfile

import numpy as np
import pytest

from ipu_keras.compiler import Executable, compile_graph
from ipu_keras.errors import ExecutableFormatError
from ipu_keras.simulator import Engine
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
    assert loaded.blocks[0]["cycles"] == exe.blocks[0]["cycles"]
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
