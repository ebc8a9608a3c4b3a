"""What the README and the command line tell a user to run works with what the project
installs: `pip install` lines name this clone (`.`) and its real extras, never the
`ipu-keras` package on an index (it is not published there); `ipu-keras tutorials --copy`
suggests a command that runs with the base install and names Jupyter as something to
install first (it is in no extra)."""
import ast
import os
import pathlib
import re
import subprocess
import sys

import pytest

from ipu_keras._src import cli

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _setup_keyword(name):
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call)
                and getattr(n.func, "id", None) == "setup")
    return next(k.value for k in call.keywords if k.arg == name)


def _extras():
    return {ast.literal_eval(k) for k in _setup_keyword("extras_require").keys}


def _requirements():
    """Every distribution the base install and its extras bring, by name."""
    names = [ast.literal_eval(e) for e in _setup_keyword("install_requires").elts]
    for value in _setup_keyword("extras_require").values:
        names += ast.literal_eval(value)
    return {re.split(r"[<>=!;\[ ]", n, maxsplit=1)[0].lower() for n in names}


def test_readme_pip_installs_name_the_clone_and_its_extras():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    installs = re.findall(r"pip install ([^`\n]+)", readme)
    assert installs
    extras = _extras()
    for line in installs:
        target = line.split("&&")[0].strip().strip("\"'")
        assert not target.startswith("ipu-keras"), line   # not on PyPI
        if re.fullmatch(r"[a-z][a-z0-9-]*", target):   # another project's package
            continue
        named = re.fullmatch(r"\.(?:\[([a-z,]+)\])?", target)
        assert named, line
        assert set(filter(None, (named.group(1) or "").split(","))) <= extras, line
    assert 'pip install ".[distributed]"' in readme


def test_hints_in_messages_do_not_install_the_unpublished_package():
    for path in (ROOT / "ipu_keras").rglob("*.py"):
        assert "install 'ipu-keras[" not in path.read_text(encoding="utf-8"), path
        assert 'install "ipu-keras[' not in path.read_text(encoding="utf-8"), path


@pytest.mark.slow
def test_tutorials_copy_suggests_what_runs(tmp_path, capsys):
    cli.main(["tutorials", "--copy", str(tmp_path)])
    said = capsys.readouterr().out
    # Jupyter is named only with its install: it is not a requirement of the project.
    assert "jupyter" not in _requirements() and "jupyterlab" not in _requirements()
    assert said.index("pip install jupyterlab") < said.index("jupyter lab")
    script = re.search(r"`python ([^`]+\.py)`", said).group(1)
    assert pathlib.Path(script).parent == tmp_path
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    run = subprocess.run([sys.executable, script], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
