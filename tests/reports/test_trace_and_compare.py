"""The trace, the interactive page and the comparison of reports, without TensorFlow: a
hand-built loop compiled and run (tests/profiling has the Keras models: one IPU, a
pipeline, replicas, and the TensorBoard callback)."""
import gzip
import json
import os
import re

import numpy as np
import pytest

from ipu_keras import config, profiling
from ipu_keras._src.driver.compile import compile_for_ipu
from ipu_keras._src.reports import compare, trace
from ipu_keras._src.simulator import Engine
from tests.graphs import ListStreams, counting_loop


def _cfg(tiles):
    cfg = config.IPUConfig()
    cfg.ipu_model.tiles_per_ipu = tiles
    return cfg


def _report(root, limit, tiles=8):
    """Compiles and runs the counting loop with reports on; its report dict and folder."""
    profiling.enable_reports(root)
    try:
        exe = compile_for_ipu(counting_loop(limit)[0], _cfg(tiles), "loop")
        engine = Engine(exe)
        engine.run([np.zeros(2, np.float32)], [],
                   ListStreams([np.ones(2, np.float32)] * limit))
        profiling.record(exe, engine)
        (path,) = [p for p in profiling.write_report() if p.startswith(str(root))]
    finally:
        profiling.disable_reports()
    with open(os.path.join(path, "report.json")) as f:
        return json.load(f), path


@pytest.fixture(scope="module")
def five(tmp_path_factory):
    return _report(tmp_path_factory.mktemp("five"), 5)


def test_trace_json_rows_are_in_time_order_and_add_up(five):
    report, path = five
    with gzip.open(os.path.join(path, "trace.json.gz")) as f:
        document = json.load(f)
    assert document == json.loads(json.dumps(trace.trace_document(report)))
    rows = {}
    for e in document["traceEvents"]:
        assert e["ph"] in ("X", "M")
        if e["ph"] == "X":
            assert e["dur"] > 0
            rows.setdefault((e["pid"], e["tid"]), []).append(e["args"]["start_cycle"])
    assert all(starts == sorted(starts) for starts in rows.values())
    assert document["metadata"]["total_cycles"] == report["execution"]["total_cycles"]
    steps = [e for e in document["traceEvents"] if e["ph"] == "X" and e["pid"] == 2
             and e["tid"] == 1]
    drawn = [e["name"] for e in steps]
    # two iterations step by step (cond `less`, body), then the other three in one slice
    assert drawn.count("mul") == trace.EXPAND and f"iterations {trace.EXPAND + 1}-5" in drawn


def test_more_iterations_drawn_on_request(five):
    document = trace.trace_document(five[0], expand=5)
    names = [e["name"] for e in document["traceEvents"] if e["ph"] == "X"
             and (e["pid"], e["tid"]) == (2, 1)]    # IPU 0's steps
    assert names.count("mul") == 5 and not any(n.startswith("iterations") for n in names)


def test_the_page_is_self_contained(five):
    page = open(os.path.join(five[1], "report.html"), encoding="utf-8").read()
    assert not re.search(r"""<script[^>]+src\s*=""", page)
    assert "id='timeline-plot'" in page and "<details open>" in page


def test_compare_two_runs_of_different_lengths(five, tmp_path):
    longer, _ = _report(tmp_path, 9)
    rows = compare.compare(five[0], longer)
    totals = {r["name"]: r for r in rows["totals"]}
    total = totals["cycles: total"]
    assert total["a"] == five[0]["execution"]["total_cycles"]
    assert total["b"] == longer["execution"]["total_cycles"] and total["diff"] > 0
    ops = {r["name"]: r for r in rows["ops"]}
    body_mul = [s for s in five[0]["program"][2]["steps"] if s["op"] == "mul"][0]
    assert ops["mul"]["diff"] == 4 * sum(body_mul["cycles"].values())   # 9 - 5 iterations
    text = compare.compare_text(five[0], longer)
    assert "cycles per op" in text and f"{ops['mul']['diff']:+,}" in text


def test_a_trace_that_cannot_be_laid_out_leaves_the_rest_of_the_report(tmp_path, monkeypatch,
                                                                      caplog):
    def broken(report, expand=trace.EXPAND):
        raise ValueError("a program shape the trace does not know")

    monkeypatch.setattr(trace, "trace_document", broken)
    report, path = _report(tmp_path, 3)
    assert report["execution"]["steps"] == 3
    assert "trace.json.gz" not in os.listdir(path)
    assert "id='timeline-plot'" in open(os.path.join(path, "report.html")).read()
    assert "Could not lay out the execution trace" in caplog.text
