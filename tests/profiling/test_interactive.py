"""report.html's interactive views, offline; the busiest tiles; `ipu-keras report` with
`--trace` and `--compare`."""
import gzip
import json
import os
import re

import pytest

from ipu_keras._src.cli import main
from ipu_keras._src.reports import compare, document, interactive, summary
from tests.profiling.conftest import one_ipu_cnn


@pytest.fixture(scope="module")
def page(one_ipu):
    with open(os.path.join(one_ipu["path"], "report.html"), encoding="utf-8") as f:
        return f.read()


def _data(page):
    match = re.search(r"<script type='application/json' id='ipu-data'>(.*?)</script>", page,
                      re.S)
    return json.loads(match.group(1).replace("<\\/", "</"))


def test_the_page_works_offline(page):
    # No script, style sheet, font or image is fetched: everything is inlined.
    assert not re.search(r"""<(script|link|img|iframe)[^>]+(src|href)\s*=\s*['"]?(https?:)?//""",
                         page, re.I)
    assert "@import" not in page and "fetch(" not in page.split("ipu-data")[-1]
    assert interactive.plotly_js() in page          # plotly.js itself, inlined
    assert "window.IPU_REPORT_READY = true" in page


def test_the_page_has_the_interactive_views(page, one_ipu):
    for view in ("timeline-plot", "memory-plot", "tile-info", "liveness-top", "live-top",
                 "liveness-loop", "live-loop", "layers-plot", "ops-plot"):
        assert f"id='{view}'" in page, view
    data = _data(page)
    report = one_ipu["report"]
    timeline = data["timeline"]
    assert "IPU 0 · steps" in timeline["rows"] and "IPU 0 · phases" in timeline["rows"]
    assert timeline["total"] == report["execution"]["total_cycles"]
    steps = timeline["groups"]["step"]
    assert len(steps["y"]) == len(steps["base"]) == len(steps["x"]) == len(steps["text"])
    memory = data["memory"]
    assert memory["tiles"] == len(report["memory"]["tile_memory"])
    assert memory["max"] == report["memory"]["max_tile_bytes"] < memory["capacity"]
    # liveness: the values live at the loop body's peak add up to what the page lists
    loop = data["liveness"]["loop"]
    assert loop["ranges"] and len(loop["labels"]) == len(loop["bytes"])
    live = {r[0] for r in loop["ranges"] if r[1] <= loop["peak"] <= r[2]}
    assert live and live <= {t[0] for t in data["tensors"] if t[1] != "variable"}
    # cycles per layer include the optimizer's update of each layer's variables
    layers = dict(zip(data["layers"]["names"], zip(*data["layers"]["kinds"].values())))
    by_layer = document.cycles_by(report, "layer")
    assert sum(layers["dense"]) == sum(by_layer["dense"].values())
    assert {"conv2d", "dense", "max_pooling2d"} <= set(layers)


def test_the_program_tree_is_whole_and_collapsible(page, one_ipu):
    body = one_ipu["report"]["program"][2]
    assert len(body["steps"]) > 60 and "more steps" not in page
    tree = page.split("id='program'")[1].split("id='compile'")[0]
    program = one_ipu["report"]["program"]
    assert tree.count("<details") == len(program)       # each block, collapsible
    assert tree.count("<div>") == sum(len(b["steps"]) for b in program)  # every step


def test_busiest_tiles_are_distinct_kinds_of_tile(one_ipu):
    report = one_ipu["report"]
    rows = summary.busiest_tiles(report, 10)
    kinds = [(used, tuple(sorted(c.items()))) for _, used, _, c in rows]
    assert len(set(kinds)) == len(kinds)
    assert [used for _, used, _, _ in rows] == sorted((u for _, u, _, _ in rows), reverse=True)
    tiles = report["memory"]["tile_memory"]
    for group, used, _, categories in rows:
        assert all(tiles[t] == used for t in group)
        assert sum(categories.values()) == used
    assert rows[0][1] == max(tiles)


def test_cli_writes_the_trace(one_ipu, tmp_path, capsys):
    for name in ("t.json", "t.json.gz"):
        main(["report", one_ipu["path"], "--trace", str(tmp_path / name)])
    plain = json.load(open(tmp_path / "t.json"))
    with gzip.open(tmp_path / "t.json.gz") as f:
        assert json.load(f) == plain
    assert plain["metadata"]["total_cycles"] == one_ipu["report"]["execution"]["total_cycles"]
    assert "wrote the execution trace" in capsys.readouterr().out


@pytest.fixture(scope="module")
def wider(tmp_path_factory, one_ipu):
    return one_ipu_cnn(tmp_path_factory.mktemp("wider"), dense=40)


def test_compare_shows_layers_and_ops_side_by_side(one_ipu, wider, capsys):
    a, b = one_ipu["report"], wider["report"]
    rows = compare.compare(a, b)
    layers = {r["name"]: r for r in rows["layers"]}
    ca, cb = document.cycles_by(a, "layer"), document.cycles_by(b, "layer")
    dense = layers["dense"]
    assert dense["a"] == sum(ca["dense"].values()) and dense["b"] == sum(cb["dense"].values())
    # The layers differ (not necessarily up: a wider kernel's optimizer steps are spread
    # over more tiles, as its layout follows its gradient product's plan).
    assert dense["diff"] == dense["b"] - dense["a"] != 0
    ops = {r["name"]: r for r in rows["ops"]}
    assert ops["matmul"]["diff"] == (sum(document.cycles_by(b, "op")["matmul"].values())
                                     - sum(document.cycles_by(a, "op")["matmul"].values()))
    assert layers["conv2d"]["a"] == sum(ca["conv2d"].values())
    totals = {r["name"]: r for r in rows["totals"]}
    assert totals["memory: variables"]["diff"] == (b["memory"]["categories"]["variables"]
                                                   - a["memory"]["categories"]["variables"])
    memory = {r["name"]: r for r in rows["layer_memory"]}
    assert memory["dense"]["diff"] > 0
    main(["report", one_ipu["path"], "--compare", wider["path"]])
    out = capsys.readouterr().out
    for heading in ("totals", "cycles per layer", "cycles per op", "tensor bytes per layer"):
        assert heading in out
    line = next(l for l in out.splitlines() if l.startswith("dense "))
    assert f"{dense['a']:,}" in line and f"{dense['b']:,}" in line and f"{dense['diff']:+,}" in line


def test_compare_with_itself_has_no_differences(one_ipu):
    rows = compare.compare(one_ipu["report"], one_ipu["report"])
    assert all(r["diff"] == 0 for table in rows.values() for r in table)


def test_compare_refuses_directories_with_nothing_in_common(one_ipu, tmp_path):
    other = tmp_path / "other_abc"
    other.mkdir()
    for i, name in enumerate(("x", "y")):
        entry = tmp_path / "other_abc" / f"{name}_{i}"
        entry.mkdir()
        (entry / "report.json").write_text(json.dumps(dict(one_ipu["report"], name=name)))
    with pytest.raises(SystemExit):
        main(["report", one_ipu["path"] + "/..", "--compare", str(other)])
