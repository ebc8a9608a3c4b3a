"""The `ipu-keras` command line: `demo`, `ops` and `--version` (ipu_keras/_src/cli.py)."""
import math
import re

import pytest

from ipu_keras import __version__
from ipu_keras._src.cli import main


def _number(pattern, text):
    match = re.search(pattern, text)
    assert match, f"no match for {pattern!r} in:\n{text}"
    return float(match.group(1).replace(",", ""))


@pytest.fixture(scope="module")
def demo_output():
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        status = main(["demo", "--steps", "20", "--steps-per-execution", "10"])
    return status, buffer.getvalue()


def test_demo_reports_target_compile_time_and_memory(demo_output):
    status, out = demo_output
    assert status == 0
    assert re.search(r"^data: +(mnist|synthetic)", out, re.MULTILINE)
    assert re.search(r"^target: +ipu(1|2|21), \d+ tiles, [\d.]+ GHz", out, re.MULTILINE)
    assert _number(r"compile: +([\d.]+) s on the first call", out) > 0
    assert _number(r"trace ([\d.]+) s", out) > 0
    assert "passes:" in out and "memory-plan" in out and "lower" in out
    used = _number(r"fullest tile \d+: ([\d,]+) of", out)
    assert 0 < used <= _number(r"of ([\d,]+) bytes", out)


def test_demo_reports_device_time_per_execution_and_losses(demo_output):
    _, out = demo_output
    header = next(line for line in out.splitlines() if line.lstrip().startswith("execution"))
    for kind in ("total", "compute", "exchange", "sync", "host_io", "host wall"):
        assert kind in header
    rows = [line.split() for line in out.splitlines() if re.match(r"^ +\d+ +[\d.]+ ", line)]
    assert [int(row[0]) for row in rows] == [0, 1]
    for row in rows:
        assert math.isfinite(float(row[1]))
        assert float(row[2].replace(",", "")) > 0  # total device time, in us
    first = _number(r"loss: +([\d.]+) \(first execution\)", out)
    last = _number(r"-> ([\d.]+) \(last execution\)", out)
    assert math.isfinite(first) and math.isfinite(last) and last < first
    assert _number(r"simulated device ([\d.,]+) us", out) > 0
    assert _number(r"host wall ([\d.,]+) us", out) > 0


def test_run_demo_returns_the_figures_it_prints():
    from ipu_keras._src.demo import run_demo

    lines = []
    fig = run_demo(steps=4, steps_per_execution=2, out=lines.append)
    assert len(fig["executions"]) == 2 and fig["steps"] == 4
    assert set(fig["executions"][0]["device_seconds"]) == {
        "compute", "exchange", "sync", "host_io", "total"}
    assert fig["max_tile_bytes"] <= fig["target"]["bytes_per_tile"]
    assert any(f"{fig['first_loss']:.4f}" in line for line in lines)


def test_demo_rejects_steps_not_a_multiple_of_steps_per_execution(capsys):
    with pytest.raises(SystemExit) as error:
        main(["demo", "--steps", "15", "--steps-per-execution", "10"])
    assert error.value.code == 2
    assert "multiple of --steps-per-execution" in capsys.readouterr().err


def test_ops_lists_the_supported_tensorflow_ops(capsys):
    assert main(["ops"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "MatMul" in lines
    assert lines[-1] == f"{len(lines) - 1} TensorFlow op types supported"


def test_version(capsys):
    with pytest.raises(SystemExit) as error:
        main(["--version"])
    assert error.value.code == 0
    assert capsys.readouterr().out.strip() == f"ipu-keras {__version__}"
