"""The progress of long work (driver/progress.py): its mode from the flag, the stages'
lines, quiet output when not wanted, and `compile_graph`'s `on_pass` callback."""
import io
import time
import warnings

import pytest

from ipu_keras import config
from ipu_keras._src.driver import progress as P
from ipu_keras._src.driver.compile import compile_for_ipu
from ipu_keras._src.compiler import compile_graph
from ipu_keras._src.compiler.pipeline import PASS_NAMES
from tests.graphs import dense_step, small_target


def test_on_pass_sees_every_pass_in_order():
    calls = []
    exe = compile_graph(dense_step(), small_target(4), on_pass=lambda n, s: calls.append((n, s)))
    assert [n for n, _ in calls] == list(PASS_NAMES)
    assert all(s >= 0 for _, s in calls)
    assert list(exe.info["pass_seconds"]) == list(PASS_NAMES)


@pytest.mark.parametrize("text, mode", [("", "auto"), ("--show_progress_bar", "true"),
                                        ("--show_progress_bar=true", "true"),
                                        ("--show_progress_bar=False", "false"),
                                        ("--show_progress_bar=auto", "auto"),
                                        ("--show_progress_bar=0", "false")])
def test_mode_from_the_flag(text, mode):
    assert P.progress_mode({"TF_POPLAR_FLAGS": text}) == mode


def test_unknown_mode_warns_and_uses_auto():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert P.progress_mode({"TF_POPLAR_FLAGS": "--show_progress_bar=sometimes"}) == "auto"
    assert "expected true, false or auto" in str(caught[0].message)


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _drive(work, hold=0.0):
    """A program's three stages, as the Keras and low-level paths run them."""
    with work.stage("Tracing", unit="layer calls") as stage:
        on_progress = P.tracing_callback(stage)
        for k, layer in enumerate(["dense", "dense_1"], 1):
            on_progress("tensorflow", k, None, layer)
        time.sleep(hold)
        for k in range(1, 31):
            on_progress("import", k, 30, f"sequential/dense/op_{k}")
    with work.compiling() as stage:
        for name in PASS_NAMES:
            stage.advance(1, name)
    with work.stage("Running", total=8, unit="steps") as stage:
        stage.set(8, "first execution")
    return work.stream.getvalue()


def _final_lines(text):
    """The line each stage leaves: the last redraw before each newline."""
    return [line.rsplit("\r", 1)[-1].strip() for line in text.split("\n") if line.strip()]


def test_true_shows_each_stage_and_leaves_its_line():
    out = _drive(P.WorkProgress("step", "true", io.StringIO()))
    lines = _final_lines(out)
    assert [line.split(":")[0] for line in lines] == [
        "Tracing 'step'", "Compiling 'step'", "Running 'step'"]
    assert "30/30 ops" in lines[0] and "op_30" in lines[0]
    assert f"{len(PASS_NAMES)}/{len(PASS_NAMES)} passes" in lines[1] and "lower" in lines[1]
    assert "8/8 steps" in lines[2] and "first execution" in lines[2]


def test_the_time_moves_while_a_stage_reports_nothing():
    out = _drive(P.WorkProgress("step", "true", io.StringIO()), hold=3 * P.TICK_SECONDS)
    tracing = out.split("\n")[0]
    # While TensorFlow traces, the layer calls so far; redrawn by the ticker.
    assert tracing.count("2 layer calls") >= 2 and "dense_1" in tracing


def test_false_and_quiet_auto_draw_nothing():
    assert _drive(P.WorkProgress("step", "false", _Terminal())) == ""
    assert _drive(P.WorkProgress("step", "auto", io.StringIO())) == ""  # not a terminal
    assert _drive(P.WorkProgress("step", "auto", _Terminal())) == ""    # quick work


def test_auto_draws_on_a_terminal_once_the_work_is_long():
    work = P.WorkProgress("step", "auto", _Terminal())
    work.start -= 2 * P.AUTO_AFTER_SECONDS
    assert len(_final_lines(_drive(work))) == 3


def test_auto_shows_a_stage_that_becomes_long_and_all_after_it():
    work = P.WorkProgress("step", "auto", _Terminal())
    out = _drive(work, hold=P.AUTO_AFTER_SECONDS + 2 * P.TICK_SECONDS)
    assert [line.split(":")[0] for line in _final_lines(out)] == [
        "Tracing 'step'", "Compiling 'step'", "Running 'step'"]


def test_flag_true_shows_the_compile_on_stderr(monkeypatch, capsys):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--show_progress_bar=true")
    cfg = config.IPUConfig()
    cfg.ipu_model.tiles_per_ipu = 4
    compile_for_ipu(dense_step(), cfg, "dense_step")
    err = capsys.readouterr().err
    assert "Compiling 'dense_step'" in err and err.endswith("lower]\n")
    assert f"{len(PASS_NAMES)}/{len(PASS_NAMES)} passes" in err
