"""The tutorials: each notebook matches its `.py` twin and runs top to bottom.

The notebooks' cells assert what their text claims (the results, that losses fall,
that memory falls with availableMemoryProportion, ...), so executing them is the test.
They are executed by a real Jupyter kernel (nbclient + ipykernel, from the test extra)
in a temporary folder, with the checkout first on the kernel's path.
"""
import os
import pathlib
import re
import subprocess
import sys

import nbformat
import pytest
from nbclient import NotebookClient

from ipu_keras._src import cli
from tutorials import build

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHAPTERS = [p.stem for p in build.chapters()]


def test_there_are_the_six_chapters():
    assert [name[:2] for name in CHAPTERS] == ["01", "02", "03", "04", "05", "06"]


def test_every_notebook_is_built_from_its_py_twin():
    assert build.out_of_date() == [], "run: python tutorials/build.py"


def test_notebooks_are_committed_without_outputs():
    for name in CHAPTERS:
        nb = nbformat.read(ROOT / "tutorials" / f"{name}.ipynb", as_version=4)
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), name


@pytest.mark.slow
@pytest.mark.parametrize("name", CHAPTERS)
def test_notebook_runs(name, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    nb = nbformat.read(ROOT / "tutorials" / f"{name}.ipynb", as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors
    if name.startswith("03"):
        # The data the notebook trained on (MNIST, or its synthetic stand-in offline) is
        # learned: the test accuracy is well above chance (0.1 for ten classes).
        text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                       for o in c.outputs)
        accuracy = float(re.search(r"test accuracy ([0-9.]+)", text).group(1))
        assert accuracy > 0.5, accuracy
    # A figure the notebook shows is in its outputs (writing a report earlier in the notebook
    # must not take the notebook's matplotlib backend away).
    for cell in nb.cells:
        if cell.cell_type == "code" and "plt.show()" in cell.source:
            assert any("image/png" in o.get("data", {}) for o in cell.outputs), cell.source[:80]


def test_cli_lists_and_copies_the_tutorials(tmp_path, capsys):
    assert cli.tutorials_directory() == ROOT / "tutorials"
    cli.main(["tutorials"])
    listed = capsys.readouterr().out
    assert all(f"{name}.ipynb" in listed for name in CHAPTERS)
    assert "1. A first graph on the simulated IPU" in listed
    cli.main(["tutorials", "--copy", str(tmp_path / "mine")])
    copied = sorted(p.name for p in (tmp_path / "mine").iterdir())
    assert copied == sorted([f"{n}.ipynb" for n in CHAPTERS] + [f"{n}.py" for n in CHAPTERS])


def test_build_check_reports_a_stale_notebook(tmp_path):
    source = tmp_path / "01_x.py"
    source.write_text("# %% [markdown]\n# # Title\n\n# %%\nx = 1\n", encoding="utf-8")
    assert build.out_of_date(tmp_path) == [tmp_path / "01_x.ipynb"]
    (tmp_path / "01_x.ipynb").write_text(build.dumps(build.notebook(source.read_text())))
    assert build.out_of_date(tmp_path) == []
    nb = build.notebook(source.read_text())
    assert [c["cell_type"] for c in nb["cells"]] == ["markdown", "code"]
    assert nb["cells"][0]["source"] == ["# Title"] and nb["cells"][1]["source"] == ["x = 1"]
    check = subprocess.run([sys.executable, str(ROOT / "tutorials" / "build.py"), "--check"],
                           cwd=ROOT, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout
