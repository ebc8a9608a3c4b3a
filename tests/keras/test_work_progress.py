"""Tracing, compiling and the first execution show their progress (driver/progress.py) in
`fit` and in `IPUStrategy.run`, in a terminal and in a notebook, and only there by default.
"""
import os
import pathlib
import re

import keras
import nbformat
import numpy as np
import pytest
import tensorflow as tf
from nbclient import NotebookClient

import ipu_keras as ipu
from ipu_keras._src.driver import progress as P
from tests.keras.common import BATCH, build, compile_model, data

ROOT = pathlib.Path(__file__).resolve().parents[2]
STAGES = ["Tracing", "Compiling", "Running"]


def _stages(text):
    """(stage, program) of each line a stage left, in order."""
    finals = [line.rsplit("\r", 1)[-1] for line in text.split("\n")]
    return [m.groups() for m in (re.match(r"(\w+) '([^']+)': ", f) for f in finals) if m]


def test_fit_shows_tracing_compiling_and_the_first_execution(monkeypatch, capsys):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--show_progress_bar=true")
    model = compile_model(build())
    x, y = data(96)   # 3 batches: one execution of 3 steps
    model.fit(x, y, batch_size=BATCH, epochs=2, verbose=0)
    err = capsys.readouterr().err
    name = f"{model.name}_train_step"
    assert _stages(err) == [(stage, name) for stage in STAGES]
    assert re.search(r"Tracing '[^']+': 100%.*\| (\d+)/\1 ops", err)
    assert "3/3 steps" in err and "first execution" in err
    model.fit(x, y, batch_size=BATCH, verbose=0)   # compiled: nothing more to show
    model.evaluate(x, y, batch_size=BATCH, verbose=0)
    assert _stages(capsys.readouterr().err) == [
        (stage, f"{model.name}_test_step") for stage in STAGES]


def test_strategy_run_shows_its_stages(monkeypatch, capsys):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--show_progress_bar=true")

    def double(x):
        return x * 2.0

    strategy = ipu.ipu_strategy.IPUStrategy()
    result = strategy.run(double, args=[tf.constant(np.ones(3, np.float32))])
    np.testing.assert_array_equal(np.asarray(result), np.full(3, 2.0, np.float32))
    assert _stages(capsys.readouterr().err) == [(stage, "double") for stage in STAGES]
    strategy.run(double, args=[tf.constant(np.ones(3, np.float32))])
    assert capsys.readouterr().err == ""


def test_quiet_when_off_or_not_interactive(monkeypatch, capsys):
    for flag in ("--show_progress_bar=false", ""):   # off; auto with captured stderr
        monkeypatch.setenv("TF_POPLAR_FLAGS", flag)
        model = compile_model(build())
        model.fit(*data(64), batch_size=BATCH, verbose=0)
        assert capsys.readouterr().err == ""
    assert keras.backend.backend() == "tensorflow"


@pytest.mark.slow
def test_a_notebook_shows_the_stages_by_default(tmp_path, monkeypatch):
    """In a Jupyter kernel "auto" draws (here from the start of the work: the threshold
    set to 0 so that a small model shows it) on the cell's stderr."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    monkeypatch.delenv("TF_POPLAR_FLAGS", raising=False)
    source = (
        "import numpy as np, keras\n"
        "import ipu_keras as ipu\n"
        "from ipu_keras._src.driver import progress\n"
        "progress.AUTO_AFTER_SECONDS = 0\n"
        "model = ipu.keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])\n"
        "model.compile('sgd', 'mse', steps_per_execution=2)\n"
        "model.fit(np.ones((16, 4), 'float32'), np.ones((16, 2), 'float32'), batch_size=8, "
        "verbose=0)\n")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = nb.cells[0].outputs
    assert not [o for o in outputs if o.output_type == "error"]
    err = "".join(o.text for o in outputs if o.get("name") == "stderr")
    assert [stage for stage, _ in _stages(err)] == STAGES
    assert P.AUTO_AFTER_SECONDS > 0   # the package's own threshold is untouched here
