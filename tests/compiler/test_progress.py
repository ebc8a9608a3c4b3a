"""The compile progress bar (_progress.py) and `compile_graph`'s `on_pass` callback."""
import io
import warnings

import pytest

from ipu_keras import config
from ipu_keras._src.driver.compile import compile_for_ipu
from ipu_keras._src.driver.progress import CompileProgress, progress_mode
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
    assert progress_mode({"TF_POPLAR_FLAGS": text}) == mode


def test_unknown_mode_warns_and_uses_auto():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert progress_mode({"TF_POPLAR_FLAGS": "--show_progress_bar=sometimes"}) == "auto"
    assert "expected true, false or auto" in str(caught[0].message)


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _drive(progress):
    for name in PASS_NAMES:
        progress(name, 0.0)
    progress.finish()
    return progress.stream.getvalue()


def test_true_draws_every_pass_and_ends_the_line():
    out = _drive(CompileProgress("step", "true", io.StringIO()))
    assert out.count("\rCompiling 'step' [") == len(PASS_NAMES)
    assert f"{len(PASS_NAMES)}/{len(PASS_NAMES)} lower" in out
    assert "Compiled 'step' in" in out and out.endswith("\n")


def test_false_and_quiet_auto_draw_nothing():
    assert _drive(CompileProgress("step", "false", _Terminal())) == ""
    assert _drive(CompileProgress("step", "auto", io.StringIO())) == ""  # not a terminal
    assert _drive(CompileProgress("step", "auto", _Terminal())) == ""    # under a second


def test_auto_draws_on_a_terminal_once_a_second_has_passed():
    progress = CompileProgress("step", "auto", _Terminal())
    progress.start -= 2.0
    assert "Compiling 'step'" in _drive(progress)


def test_flag_true_shows_the_bar_on_stderr(monkeypatch, capsys):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--show_progress_bar=true")
    cfg = config.IPUConfig()
    cfg.ipu_model.tiles_per_ipu = 4
    compile_for_ipu(dense_step(), cfg, "dense_step")
    err = capsys.readouterr().err
    assert "Compiling 'dense_step' [" in err and "memory-plan" in err
    assert "Compiled 'dense_step' in" in err
