"""`ipu_keras.keras.callbacks.IPUTensorBoard`: Keras' TensorBoard plus the IPU's scalars per
epoch and the last training execution's trace where the profile plugin reads it."""
import glob
import gzip
import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import ipu_keras as ipu
from ipu_keras.keras.callbacks import IPUTensorBoard
from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.keras.tensorboard import xspace

EPOCHS, SPE, BATCH = 2, 2, 4


@pytest.fixture(scope="module")
def logged(tmp_path_factory):
    log_dir = str(tmp_path_factory.mktemp("tb"))
    keras.utils.set_random_seed(1)
    model = ipu.Sequential([keras.Input((16,)), keras.layers.Dense(8, activation="relu"),
                            keras.layers.Dense(2)])
    model.compile("adam", "mse", steps_per_execution=SPE)
    rng = np.random.default_rng(0)
    x, y = rng.random((40, 16), dtype=np.float32), rng.random((40, 2), dtype=np.float32)
    history = model.fit(x, y, batch_size=BATCH, epochs=EPOCHS, verbose=0,
                        validation_split=0.2, callbacks=[IPUTensorBoard(log_dir)])
    return {"log_dir": log_dir, "model": model, "history": history}


def _scalars(log_dir):
    out = {}
    for path in glob.glob(os.path.join(log_dir, "train", "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name == "scalars":
                    out.setdefault(value.tag, {})[event.step] = float(
                        tf.make_ndarray(value.tensor))
    return out


def test_ipu_scalars_per_epoch(logged):
    scalars = _scalars(logged["log_dir"])
    program = logged["model"].train_function.last_program
    cycles = program.session.last_cycles    # every training execution costs the same
    steps = program.steps_run
    memory = program.executable.memory
    for epoch in range(EPOCHS):
        T.FLOAT32.assert_close(scalars["ipu/cycles_per_step"][epoch],
                               sum(cycles.values()) / steps)
        for kind in ("compute", "exchange", "sync", "host_io"):
            T.FLOAT32.assert_close(scalars[f"ipu/{kind}_cycles_per_step"][epoch],
                                   cycles[kind] / steps)
        T.FLOAT32.assert_close(scalars["ipu/memory_used_bytes"][epoch], memory["total_bytes"])
        T.FLOAT32.assert_close(
            scalars["ipu/memory_free_bytes"][epoch] + scalars["ipu/memory_used_bytes"][epoch],
            program.target.bytes_per_tile * len(memory["tile_memory"]))
        T.FLOAT32.assert_close(scalars["ipu/fullest_tile_bytes"][epoch],
                               memory["max_tile_bytes"])
    # Keras' own scalars are still written, next to ours
    assert set(scalars["epoch_loss"]) == set(range(EPOCHS))


def test_tensorboard_reads_the_scalars(logged):
    accumulator = EventAccumulator(os.path.join(logged["log_dir"], "train"))
    accumulator.Reload()
    tags = accumulator.Tags()["tensors"]
    assert {"ipu/cycles_per_step", "ipu/fullest_tile_fraction", "epoch_loss"} <= set(tags)
    events = accumulator.Tensors("ipu/device_ms_per_step")
    assert [e.step for e in events] == list(range(EPOCHS))


def test_the_trace_is_in_the_profile_plugins_layout(logged):
    (session,) = glob.glob(os.path.join(logged["log_dir"], "train", "plugins", "profile", "*"))
    (xplane,) = glob.glob(os.path.join(session, "*.xplane.pb"))
    (json_trace,) = glob.glob(os.path.join(session, "*.trace.json.gz"))
    assert os.path.basename(xplane)[:-len(".xplane.pb")] == \
        os.path.basename(json_trace)[:-len(".trace.json.gz")]
    with gzip.open(json_trace) as f:
        events = json.load(f)
    space = type(xspace(events)).FromString(open(xplane, "rb").read())
    planes = {p.name: p for p in space.planes}
    # the profile plugin keeps /device:CUSTOM planes (it drops /device:IPU ones)
    assert all(name.startswith("/device:CUSTOM:") for name in planes)
    ipu0 = planes["/device:CUSTOM:IPU 0"]
    lines = {line.name: line for line in ipu0.lines}
    assert {"steps", "layers", "compute", "exchange", "sync"} <= set(lines)
    ps_per_cycle = 1e12 / events["metadata"]["clock_hz"]
    steps = [e for e in events["traceEvents"] if e["ph"] == "X" and e["pid"] == 2
             and e["tid"] == 1]
    line = lines["steps"]
    assert len(line.events) == len(steps)
    for event, expected in zip(line.events, steps):
        assert ipu0.event_metadata[event.metadata_id].name == expected["name"]
        assert event.offset_ps == round(expected["args"]["start_cycle"] * ps_per_cycle)
        assert event.offset_ps + event.duration_ps == round(
            expected["args"]["end_cycle"] * ps_per_cycle)
    control = {line.name: line for line in planes[
        "/device:CUSTOM:program (blocks, loops, iterations)"].lines}["control"]
    spans = sorted((e.offset_ps, -(e.offset_ps + e.duration_ps)) for e in control.events)
    stack = []   # nested in picoseconds: what the trace viewer stacks
    for start, minus_end in spans:
        while stack and stack[-1] <= start:
            stack.pop()
        assert not stack or -minus_end <= stack[-1]
        stack.append(-minus_end)
    total = events["metadata"]["total_cycles"]
    program = logged["model"].train_function.last_program
    assert total == sum(program.session.last_cycles.values())


def test_without_tensorboard_it_says_what_to_install(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "tensorboard" else real(name, *a))
    with pytest.raises(ImportError, match="pip install tensorboard"):
        IPUTensorBoard("logs")
