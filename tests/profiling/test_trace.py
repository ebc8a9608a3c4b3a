"""The execution trace (reports/trace.py) of Keras models: Chrome trace events that
Perfetto and chrome://tracing open, for one IPU, a pipeline over two IPUs and two
replicas; and the optimizer's ops attributed to the layer of the variable they update.
(tests/reports stays free of TensorFlow; the report tests that train Keras models are
here.)"""
import gzip
import json
import os

from ipu_keras._src.reports import trace


def _load(path):
    with gzip.open(os.path.join(path, "trace.json.gz")) as f:
        return json.load(f)


def _names(document):
    """{pid: process name}, {(pid, tid): thread name} of the metadata events."""
    processes = {e["pid"]: e["args"]["name"] for e in document["traceEvents"]
                 if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in document["traceEvents"]
               if e["ph"] == "M" and e["name"] == "thread_name"}
    return processes, threads


def _rows(document):
    rows = {}
    for e in document["traceEvents"]:
        if e["ph"] == "X":
            rows.setdefault((e["pid"], e["tid"]), []).append(e)
    return rows


def _check_well_formed(document, report):
    """The checks a trace viewer's importer makes, and ours: the object form, known
    phases, numbers, named rows, slices in time order on each row and nested properly
    (a slice inside another ends before it), exact cycles behind the microseconds."""
    assert set(document) >= {"traceEvents", "displayTimeUnit", "metadata"}
    json.loads(json.dumps(document))
    processes, threads = _names(document)
    mhz = report["target"]["clock_hz"] / 1e6
    for e in document["traceEvents"]:
        assert e["ph"] in ("X", "M") and isinstance(e["name"], str)
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "X":
            assert e["dur"] > 0 and e["ts"] >= 0
            assert (e["pid"], e["tid"]) in threads and e["pid"] in processes
            start, end = e["args"]["start_cycle"], e["args"]["end_cycle"]
            # Microseconds to 4 decimals, the end rounded as the start is.
            assert e["ts"] == round(start / mhz, 4)
            assert e["dur"] == round(round(end / mhz, 4) - e["ts"], 4)
    for row, events in _rows(document).items():
        starts = [e["ts"] for e in events]
        assert starts == sorted(starts), f"row {row} is not in time order"
        for key in ("cycles", "microseconds"):   # nested, in cycles and as a viewer sees it
            stack = []
            for e in events:
                start, end = ((e["args"]["start_cycle"], e["args"]["end_cycle"])
                              if key == "cycles" else (e["ts"], round(e["ts"] + e["dur"], 4)))
                while stack and stack[-1] <= start:
                    stack.pop()
                assert not stack or end <= stack[-1], f"row {row}: {e['name']} overlaps"
                stack.append(end)
    execution = report["execution"]
    assert document["metadata"]["total_cycles"] == execution["total_cycles"]
    assert document["metadata"]["executed"] is True


def _row(document, process, thread):
    processes, threads = _names(document)
    keys = [k for k, name in threads.items() if name == thread and processes[k[0]] == process]
    assert keys, f"no row {process} / {thread}"
    return _rows(document).get(keys[0], [])


def test_one_ipu_trace_has_steps_layers_and_phases(one_ipu):
    report, document = one_ipu["report"], _load(one_ipu["path"])
    _check_well_formed(document, report)
    processes, _ = _names(document)
    assert set(processes.values()) >= {"IPU 0", "program (blocks, loops, iterations)"}
    steps = _row(document, "IPU 0", "steps")
    assert {"conv", "matmul", "infeed", "host_transfer"} <= {e["name"] for e in steps}
    conv = next(e for e in steps if e["name"] == "conv")
    assert conv["args"]["layer"] == "conv2d"
    assert conv["args"]["end_cycle"] - conv["args"]["start_cycle"] == sum(
        conv["args"][k] for k in ("compute", "exchange", "sync", "host_io"))
    assert {"conv2d", "max_pooling2d", "dense"} <= {e["name"] for e in _row(document, "IPU 0",
                                                                          "layers")}
    for phase in ("compute", "exchange", "sync"):
        assert _row(document, "IPU 0", phase)
    assert "infeed" in {e["name"] for e in _row(document, "IPU 0", "host I/O")}
    program = [e["name"] for e in _row(document, "program (blocks, loops, iterations)",
                                       "control")]
    steps_run = report["execution"]["steps"]
    assert f"loop of block 2, {steps_run} iterations" in program
    assert "iteration 1" in program and f"iterations {trace.EXPAND + 1}-{steps_run}" in program


def test_pipelined_trace_has_a_row_per_ipu_with_the_schedule(pipelined):
    report, document = pipelined["report"], _load(pipelined["path"])
    _check_well_formed(document, report)
    (schedule,) = report["ipus"]["pipelines"]
    for ipu in (0, 1):
        boxes = _row(document, f"IPU {ipu}", "pipeline")
        stages = {r["stage"] for r in schedule["stages"] if r["ipu"] == ipu}
        assert {e["args"]["stage"] for e in boxes if e["name"] != "O"} == stages
        assert {e["args"]["pass"] for e in boxes} >= {"F", "B"}
    runs = [e for e in _row(document, "program (blocks, loops, iterations)", "control")
            if e["name"].startswith("pipeline run")]
    assert len(runs) == min(trace.EXPAND, report["execution"]["steps"] // schedule["depth"])
    # the boxes of a run end inside it, the window's weight update after them
    last_box = max(e["args"]["end_cycle"] for e in _row(document, "IPU 1", "pipeline"))
    assert runs[0]["args"]["start_cycle"] < last_box <= runs[-1]["args"]["end_cycle"]
    copies = _row(document, "links (inter-IPU copies, cross-replica collectives)",
                  "inter-IPU copies")
    assert copies and all(e["name"].startswith("ipu_copy to IPU") for e in copies)


def test_replicas_have_their_own_rows_and_the_collectives_a_row(replicated):
    report, document = replicated["report"], _load(replicated["path"])
    assert report["ipus"]["replicas"] == 2
    _check_well_formed(document, report)
    processes, _ = _names(document)
    assert {"replica 0, IPU 0", "replica 1, IPU 0"} <= set(processes.values())
    first = [(e["name"], e["ts"]) for e in _row(document, "replica 0, IPU 0", "steps")]
    assert first == [(e["name"], e["ts"]) for e in _row(document, "replica 1, IPU 0", "steps")]
    reduces = _row(document, "links (inter-IPU copies, cross-replica collectives)",
                   "cross-replica")
    assert reduces and {e["cat"] for e in reduces} == {"collective"}


def test_a_report_that_never_ran_traces_one_pass(one_ipu):
    report = dict(one_ipu["report"], execution=None)
    document = trace.trace_document(report)
    assert document["metadata"]["executed"] is False
    program = [e["name"] for e in document["traceEvents"] if e["ph"] == "X" and e["pid"] == 0]
    assert "loop of block 2, 1 iterations" in program


def test_optimizer_ops_belong_to_the_layer_of_their_variable(one_ipu):
    body = one_ipu["report"]["program"][2]["steps"]
    # Adam's update of each kernel and bias: sqrt of the second moment, the moments'
    # writes and the variable's own write; before, all of them had no layer.
    for op in ("sqrt", "write_var", "pow"):
        layers = {s["layer"] for s in body if s["op"] == op}
        assert {"conv2d", "dense"} <= layers, op
    updates = [s for s in body if s["op"] in ("sqrt", "pow", "square")]
    assert updates and all(s["layer"] in ("conv2d", "dense") for s in updates)


def test_gradient_accumulators_belong_to_their_layer(pipelined):
    # The pipeline's weight update (a branch of the loop body) reads each gradient
    # accumulator, updates the layer's variable and zeroes the accumulator: all four
    # writes per Dense layer (kernel and bias, their two accumulators) have its layer.
    program = pipelined["report"]["program"]
    (update,) = [b for b in program if b["role"] == "if then"]
    layers = [layer.name for layer in pipelined["model"].layers]
    writes = [s["layer"] for s in update["steps"] if s["op"] == "write_var"]
    assert all(writes.count(name) == 4 for name in layers), writes
