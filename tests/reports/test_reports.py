"""Report files (ipu_keras/_src/reports): report.json, PNGs, report.html, tensor map, summary."""
import json
import os

import numpy as np
import pytest

from ipu_keras import config, profiling
from ipu_keras._src.driver.compile import compile_for_ipu
from ipu_keras._src.cli import main
from ipu_keras.errors import OutOfTileMemoryError, OutputWriteError
from ipu_keras._src.reports import summary, writer
from ipu_keras._src.simulator import Engine
from tests.graphs import ListStreams, counting_loop, dense_step


@pytest.fixture(autouse=True)
def _reports_off():
    yield
    profiling.disable_reports()


def _cfg(tiles=8):
    cfg = config.IPUConfig()
    cfg.ipu_model.tiles_per_ipu = tiles
    return cfg


def _run_loop(exe, steps=5):
    engine = Engine(exe)
    streams = ListStreams([np.ones(2, np.float32)] * steps)
    engine.run([np.zeros(2, np.float32)], [], streams)
    profiling.record(exe, engine)
    return engine


def _report_dir(root):
    (entry,) = os.listdir(root)
    return os.path.join(root, entry)


def test_compile_writes_json_plots_and_html(tmp_path):
    profiling.enable_reports(tmp_path)
    exe = compile_for_ipu(counting_loop()[0], _cfg(), "loop")
    path = _report_dir(tmp_path)
    assert os.path.basename(path) == "loop_" + exe.info["cache"]["key"][:10]
    files = set(os.listdir(path))
    assert {"report.json", "report.html", "memory.png", "liveness.png", "cycles.png"} <= files
    assert "trace.png" not in files
    report = json.load(open(os.path.join(path, "report.json")))
    assert report["target"]["tiles_per_ipu"] == 8 and report["execution"] is None
    memory = report["memory"]
    assert len(memory["tile_memory"]) == 8
    assert set(memory["tile_categories"]) >= {"variables", "constants", "temporaries"}
    assert [s["step"] for s in report["liveness"]["steps"]] == list(
        range(len(exe.memory["liveness"])))
    assert report["liveness"]["steps"][-1]["label"] == "while"
    loop = report["liveness"]["loop"]  # the steps of the loop body, what is live around them
    assert [s["label"] for s in loop["steps"]] == [
        "infeed", "const", "mul", "add", "outfeed", "const", "add"]
    assert min(s["bytes"] for s in loop["steps"]) > 0
    assert loop["peak_bytes"] == max(s["bytes"] for s in loop["steps"])
    roles = [b["role"] for b in report["program"]]
    assert roles == ["main", "while condition", "while body"]
    body_ops = [s["op"] for s in report["program"][2]["steps"]]
    assert "infeed" in body_ops and "outfeed" in body_ops
    row = next(r for r in report["tensor_map"] if r["op"] == "mul")
    assert row["shape"] == [2] and row["dtype"] == "float32" and row["bytes"] == 8
    assert {"start", "tiles", "per_tile", "layer"} <= set(row)
    page = open(os.path.join(path, "report.html")).read()
    assert page.count("<img alt=") == 3 and "Busiest tiles" in page


def test_execution_trace_is_written_lazily(tmp_path):
    profiling.enable_reports(tmp_path)
    exe = compile_for_ipu(counting_loop()[0], _cfg(), "loop")
    path = _report_dir(tmp_path)
    _run_loop(exe)
    assert json.load(open(os.path.join(path, "report.json")))["execution"] is None
    assert profiling.write_report() == [path]
    report = json.load(open(os.path.join(path, "report.json")))
    execution = report["execution"]
    assert execution["block_counts"] == [1, 6, 5] and execution["steps"] == 5
    assert execution["total_cycles"] == sum(execution["cycles"].values()) > 0
    assert execution["cycles"]["host_io"] > 0
    expected = sum(b.cycles["compute"] * n for b, n in zip(exe.blocks, [1, 6, 5]))
    assert execution["cycles"]["compute"] == expected
    assert execution["top_ops"][0]["total"] >= execution["top_ops"][-1]["total"]
    assert "trace.png" in os.listdir(path)
    assert open(os.path.join(path, "report.html")).read().count("<img alt=") == 4
    assert profiling.write_report() == []  # nothing ran since


def test_engine_options_turn_reports_on(tmp_path, monkeypatch):
    assert writer.reports_directory({}) is None
    options = json.dumps({"autoReport.all": "true", "autoReport.directory": str(tmp_path)})
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", options)
    assert writer.reports_directory() == str(tmp_path)
    compile_for_ipu(dense_step(), _cfg(), "dense")
    assert os.path.exists(os.path.join(_report_dir(tmp_path), "report.json"))


@pytest.mark.filterwarnings("ignore:The matmul planner found no plan")
def test_a_model_that_does_not_fit_still_gets_a_report(tmp_path):
    profiling.enable_reports(tmp_path)
    cfg = _cfg(tiles=1)
    cfg.ipu_model.version = "ipu1"
    from ipu_keras._src.ops.builder import Builder, new_input

    b = Builder()
    x = new_input((300, 300), "float32", "x")
    y = b.emit("matmul", [x, x])
    with pytest.raises(OutOfTileMemoryError):
        compile_for_ipu(b.graph([x], [y]), cfg, "big")
    report = json.load(open(os.path.join(_report_dir(tmp_path), "report.json")))
    assert report["memory"]["tiles_out_of_memory"] == [0]
    assert "OUT OF MEMORY" in summary.summarise(report)


def test_tensor_map_file(tmp_path, monkeypatch):
    target = tmp_path / "maps" / "tensors.json"
    monkeypatch.setenv("TF_POPLAR_FLAGS", f"--tensor_map_file_path={target}")
    compile_for_ipu(dense_step(), _cfg(), "dense")
    compile_for_ipu(counting_loop()[0], _cfg(), "loop")
    entries = json.load(open(target))["executables"]
    assert sorted(e["name"] for e in entries.values()) == ["dense", "loop"]
    dense = next(e for e in entries.values() if e["name"] == "dense")
    variable = next(r for r in dense["tensors"] if r["kind"] == "variable")
    assert variable["op"] == "w" and variable["shape"] == [3, 2]


def test_summary_and_cli(tmp_path, capsys):
    profiling.enable_reports(tmp_path)
    _run_loop(compile_for_ipu(counting_loop()[0], _cfg(), "loop"))
    profiling.write_report()
    text = summary.summarise(summary.load(summary.find_reports(str(tmp_path))[0]))
    assert "target: ipu2, 1 IPU x 8 tiles" in text
    assert text.count("% of the tile)") == 5
    assert "largest tensors:" in text and "top blocks:" in text and "top ops:" in text
    assert "cycles (last execution, 5 steps)" in text
    assert main(["report", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "busiest tiles:" in out and "while body" in out


def test_cli_report_refuses_a_directory_without_reports(tmp_path):
    with pytest.raises(SystemExit) as error:
        main(["report", str(tmp_path)])
    assert error.value.code == 2


# -- issue 30, item 7: an unwritable report or tensor map path is a designed error ----------
def _no_compile(monkeypatch):
    from ipu_keras._src.driver import compile as driver

    monkeypatch.setattr(driver, "compile_graph", None)   # the check comes before any work
    return driver.compile_for_ipu


def test_an_unwritable_report_directory_is_refused_before_the_compile(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("")
    directory = str(tmp_path / "file" / "reports")
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", json.dumps(
        {"autoReport.all": "true", "autoReport.directory": directory}))
    with pytest.raises(OutputWriteError) as raised:
        _no_compile(monkeypatch)(dense_step(), _cfg(), "dense")
    message = str(raised.value)
    assert "The IPU report directory cannot be written" in message
    assert f"Received: autoReport.directory={directory!r}" in message
    assert "NotADirectoryError" in message and "writable directory" in message


@pytest.mark.parametrize("directory", ["", "{tmp}/file/reports"])
def test_enable_reports_refuses_an_unwritable_directory_at_once(tmp_path, directory):
    (tmp_path / "file").write_text("")
    directory = directory.format(tmp=tmp_path)
    with pytest.raises(OutputWriteError, match=rf"Received: directory={directory!r}"):
        profiling.enable_reports(directory)
    assert writer.reports_directory({}) is None


@pytest.mark.parametrize("where", ["under a file", "a directory"])
def test_an_unwritable_tensor_map_file_is_refused_before_the_compile(tmp_path, monkeypatch,
                                                                     where):
    (tmp_path / "file").write_text("")
    target = tmp_path / "file" / "map.json" if where == "under a file" else tmp_path
    monkeypatch.setenv("TF_POPLAR_FLAGS", f"--tensor_map_file_path={target}")
    with pytest.raises(OutputWriteError, match=r"The tensor map file cannot be written.*"
                       rf"Received: tensor_map_file_path='{target}'"):
        _no_compile(monkeypatch)(dense_step(), _cfg(), "dense")


def test_a_report_that_cannot_be_written_after_the_compile_is_a_designed_error(tmp_path):
    profiling.enable_reports(tmp_path / "r")
    exe = compile_for_ipu(counting_loop()[0], _cfg(), "loop")
    path = _report_dir(tmp_path / "r")
    for name in os.listdir(path):
        os.remove(os.path.join(path, name))
    os.rmdir(path)
    open(path, "w").close()   # the entry's directory became a file
    _run_loop(exe)
    with pytest.raises(OutputWriteError, match="The IPU report directory cannot be written"):
        profiling.write_report()
    os.remove(path)
    os.makedirs(path)   # lets the exit hook write it


_BACKEND_KEPT = """
import sys
import matplotlib
matplotlib.use("svg")           # the user's backend (a notebook's would be inline)
from ipu_keras import config, profiling
from ipu_keras._src.driver.compile import compile_for_ipu
from tests.graphs import dense_step
cfg = config.IPUConfig()
cfg.ipu_model.tiles_per_ipu = 8
profiling.enable_reports(sys.argv[1])
compile_for_ipu(dense_step(), cfg, "dense")
assert matplotlib.get_backend() == "svg", matplotlib.get_backend()
assert "matplotlib.pyplot" not in sys.modules
"""


def test_writing_plots_leaves_the_users_matplotlib_alone(tmp_path):
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = subprocess.run([sys.executable, "-c", _BACKEND_KEPT, str(tmp_path)], cwd=root,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert any(name.endswith(".png") for _, _, files in os.walk(tmp_path) for name in files)
