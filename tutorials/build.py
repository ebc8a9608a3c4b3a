"""Builds each tutorial notebook (`.ipynb`) from its `.py` twin, or checks they agree.

    python tutorials/build.py           # rewrite every .ipynb from its .py
    python tutorials/build.py --check   # exit 1 naming the notebooks out of date

The `.py` files are the source, in the percent format jupytext reads and writes: a line
`# %%` starts a code cell, `# %% [markdown]` a markdown cell whose lines carry a `# `
prefix. Notebooks are written without outputs (CI executes them); the JSON is nbformat
4.5 with stable cell ids, so a rebuild of an unchanged source changes no byte.
"""
import hashlib
import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
MARKDOWN, CODE = "# %% [markdown]", "# %%"


def chapters(directory=HERE):
    """The tutorial sources `NN_*.py` in `directory`, in chapter order."""
    return sorted(p for p in pathlib.Path(directory).glob("[0-9][0-9]_*.py"))


def _cells(text):
    cells, kind, lines = [], None, []
    for line in text.splitlines():
        if line.startswith(CODE):
            if kind is not None:
                cells.append((kind, lines))
            kind, lines = ("markdown" if line.startswith(MARKDOWN) else "code"), []
        elif kind == "markdown":
            lines.append(line[2:] if line.startswith("# ") else line.lstrip("#"))
        elif kind == "code":
            lines.append(line)
    if kind is not None:
        cells.append((kind, lines))
    return cells


def notebook(source):
    """The nbformat-4 notebook (a dict) of one `.py` twin's text."""
    cells = []
    for index, (kind, lines) in enumerate(_cells(source)):
        while lines and not lines[-1].strip():
            lines.pop()
        text = "\n".join(lines)
        cell = {"cell_type": kind,
                "id": hashlib.sha1(f"{index}:{text}".encode()).hexdigest()[:8],
                "metadata": {}, "source": text.splitlines(keepends=True)}
        if kind == "code":
            cell.update(execution_count=None, outputs=[])
        cells.append(cell)
    return {"cells": cells,
            "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                        "name": "python3"},
                         "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def dumps(nb):
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def out_of_date(directory=HERE):
    """The `.ipynb` files that differ from what their `.py` twins build."""
    stale = []
    for source in chapters(directory):
        target = source.with_suffix(".ipynb")
        built = dumps(notebook(source.read_text(encoding="utf-8")))
        if not target.exists() or target.read_text(encoding="utf-8") != built:
            stale.append(target)
    return stale


def main(argv):
    if "--check" in argv:
        stale = out_of_date()
        for path in stale:
            print(f"{path.name} is out of date: run python tutorials/build.py")
        return 1 if stale else 0
    for source in chapters():
        source.with_suffix(".ipynb").write_text(
            dumps(notebook(source.read_text(encoding="utf-8"))), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
