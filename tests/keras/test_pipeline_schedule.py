"""A pipelined Keras model's time is its schedule: its device loop is a pipeline.

A Keras MLP (and CNN) in two stages over two IPUs, accumulating G micro-batches: the
compiler times each stage's forward and backward pass, the loop's cycles per window are
the Grouped schedule's makespan (recomputed here from the stage table) plus one weight
update, below the serial sum, and the report shows per-IPU busy/idle and the timeline.
"""
import json
import os

import keras
import numpy as np
import pytest

import ipu_keras as ipu
from ipu_keras import profiling
from ipu_keras._src.keras.trainer import _last_program
from ipu_keras._src.reports import summary
from ipu_keras._src.device import cost as cost_model

G, MICRO, STEPS = 4, 8, 8


@pytest.fixture(autouse=True, scope="module")
def two_ipus():
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = 2
    cfg.configure_ipu_system()
    yield
    ipu.config.reset_ipu_configuration()


def _model(arch):
    keras.utils.set_random_seed(1)
    if arch == "mlp":
        layers = [keras.Input((256,)), keras.layers.Dense(512, activation="relu"),
                  keras.layers.Dense(512, activation="relu"), keras.layers.Dense(10)]
        stages = [0, 1, 1]
    else:
        layers = [keras.Input((16, 16, 1)), keras.layers.Conv2D(16, 3, activation="relu"),
                  keras.layers.MaxPooling2D(), keras.layers.Conv2D(32, 3, activation="relu"),
                  keras.layers.MaxPooling2D(), keras.layers.Flatten(), keras.layers.Dense(10)]
        stages = [0, 0, 1, 1, 1, 1]
    model = ipu.Sequential(layers)
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=STEPS)
    model.set_pipeline_stage_assignment(stages)
    model.set_pipelining_options(gradient_accumulation_steps_per_replica=G)
    return model


def _fit(model):
    rng = np.random.default_rng(0)
    x = rng.random((STEPS * MICRO,) + model.inputs[0].shape[1:]).astype("float32")
    y = rng.integers(0, 10, STEPS * MICRO)
    model.fit(x, y, batch_size=MICRO, epochs=1, shuffle=False, verbose=0)


def _grouped_makespan(rows, depth, sync, other):
    """The Grouped schedule by hand: per step the slowest forward, sync, the slowest
    backward, sync; stage k forwards micro-batch t - k and backwards t - (2S - 1 - k).
    The run ends with its last box, before a sync."""
    stages, total = len(rows), depth * other
    for t in range(depth + 2 * stages - 1):
        fwd = [r["forward"] for k, r in enumerate(rows) if 0 <= t - k < depth]
        bwd = [r["backward"] for k, r in enumerate(rows)
               if 0 <= t - (2 * stages - 1 - k) < depth]
        total += sum(max(p) + sync for p in (fwd, bwd) if p)
    return total - sync


def _check_schedule(model):
    program = _last_program(model)
    executable = program.executable
    (info,) = executable.info["pipelines"]
    assert info["schedule"] == "Grouped" and info["depth"] == G
    assert [(r["stage"], r["ipu"]) for r in info["stages"]] == [(0, 0), (1, 1)]
    assert all(r["forward"] > 0 and r["backward"] > 0 for r in info["stages"])
    sync = cost_model.sync_cycles(program.target, external=True)
    assert info["makespan_cycles"] == _grouped_makespan(info["stages"], G, sync, info["other"])
    assert info["makespan_cycles"] < info["serial_cycles"]
    body = next(b for b in executable.blocks if b.pipeline is not None)
    assert abs(sum(body.cycles.values()) * G - info["makespan_cycles"]) <= 4 * G
    # One execution: STEPS / G windows, each a pipeline run and one weight update, plus
    # the loop's own control (its cond block) and the fixed cost of the execution's
    # transfers in and out (`cost.STREAM_COPY_CYCLES` each); below the same windows run
    # serially.
    report = model.ipu_report()
    windows = report["steps"] // G
    assert info["update_cycles"] > 0
    scheduled = windows * (info["makespan_cycles"] + info["update_cycles"])
    serial = windows * (info["serial_cycles"] + info["update_cycles"])
    assert scheduled <= report["total_cycles"] < serial
    outside = report["total_cycles"] - scheduled - 2 * cost_model.STREAM_COPY_CYCLES
    assert 0 <= outside < 0.02 * scheduled
    return info


@pytest.mark.parametrize("arch", ["mlp", pytest.param("cnn", marks=pytest.mark.slow)])
def test_pipelined_keras_cycles_are_the_schedule_makespan(arch):
    model = _model(arch)
    _fit(model)
    info = _check_schedule(model)
    assert {i["ipu"] for i in info["ipus"]} == {0, 1}
    for ipu_row in info["ipus"]:
        assert ipu_row["busy"] + ipu_row["idle"] == info["makespan_cycles"]


def test_report_of_a_pipelined_keras_model_shows_the_timeline(tmp_path):
    model = _model("mlp")
    profiling.enable_reports(tmp_path)
    try:
        _fit(model)
    finally:
        profiling.write_report()
        profiling.disable_reports()
    reports = [os.path.join(tmp_path, e) for e in os.listdir(tmp_path)]
    with_pipeline = []
    for path in reports:
        report = json.load(open(os.path.join(path, "report.json")))
        if (report.get("ipus") or {}).get("pipelines"):
            with_pipeline.append((path, report))
    (path, report), = with_pipeline
    (pipeline,) = report["ipus"]["pipelines"]
    passes = [b for b in pipeline["timeline"] if b[3] != "O"]
    assert len(passes) == 2 * 2 * G      # stage x pass x micro-batch boxes
    # the work of no stage is boxes too, so the boxes end at the makespan
    assert max(b[5] for b in pipeline["timeline"]) == pipeline["makespan_cycles"]
    text = summary.summarise(report)
    assert f"pipeline (Grouped, 2 stages, depth {G})" in text and "IPU 1: busy" in text
    page = open(os.path.join(path, "report.html")).read()
    assert "IPUs and pipeline" in page and "alt='timeline.png'" in page
    assert os.path.getsize(os.path.join(path, "timeline.png")) > 1000


def test_pipelined_evaluate_is_one_inference_pipeline_per_execution():
    """evaluate: an inference pipeline as deep as `steps_per_execution` (the original's
    rule), forward passes only, overlapped across the two IPUs."""
    model = _model("mlp")
    rng = np.random.default_rng(1)
    x = rng.random((STEPS * MICRO, 256)).astype("float32")
    y = rng.integers(0, 10, STEPS * MICRO)
    model.evaluate(x, y, batch_size=MICRO, verbose=0)
    program = _last_program(model)
    (info,) = program.executable.info["pipelines"]
    assert info["depth"] == STEPS
    assert [r["backward"] for r in info["stages"]] == [0, 0]
    assert all(r["forward"] > 0 for r in info["stages"])
    assert info["makespan_cycles"] < info["serial_cycles"]
    report = model.ipu_report()
    assert report["steps"] == STEPS
    assert info["makespan_cycles"] <= report["total_cycles"] < info["serial_cycles"]
