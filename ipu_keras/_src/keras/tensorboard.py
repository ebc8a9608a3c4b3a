"""TensorBoard for IPU models: Keras' TensorBoard callback plus the simulated IPU's figures.

`IPUTensorBoard` is `keras.callbacks.TensorBoard` (the same arguments and files: losses
and metrics under `log_dir/train` and `log_dir/validation`) that also writes, into the
train run:

* per epoch, scalars under `ipu/` (TensorBoard groups them in one section): cycles per
  step in all and per kind (`compute`, `exchange`, `sync`, `host_io`), the device time
  per step, memory used and free on all tiles, the fullest tile's bytes and its share of
  the tile. The cycles are those of the epoch's training executions (each execution's
  cycles, read after it ran: `session.last_cycles`), the memory that of the training
  executable;
* at the end of training, the execution trace of the last training execution
  (`reports/trace.py`) in the profile plugin's layout,
  `log_dir/train/plugins/profile/<run>/<host>.xplane.pb` (an XSpace, one plane
  `/device:CUSTOM:IPU n` per IPU, one line per row of the trace, offsets in picoseconds at
  the target's clock: tensorboard-plugin-profile's trace viewer shows it) and, beside it,
  `<host>.trace.json.gz` (Chrome trace events, for Perfetto and for plugin versions that
  read JSON). Without TensorFlow's `xplane_pb2` only the JSON is written.

Like Keras' callback it needs the `tensorboard` package (`tf.summary` writes through it;
TensorFlow's CPU wheel does not bring it): `pip install tensorboard`, or the `tensorboard`
extra of ipu-keras; the callback says so when it is made without it.
tensorboard-plugin-profile is needed only to look at the trace, not to write it.
"""
import datetime
import gzip
import importlib.util
import json
import os
import socket

import keras
import tensorflow as tf

from ipu_keras._src.device.executable import CYCLE_KINDS
from ipu_keras._src.keras.device_function import DeviceFunction
from ipu_keras._src.reports import document, trace


def _train_program(model):
    function = getattr(model, "train_function", None)
    if isinstance(function, DeviceFunction) and function.last_program is not None:
        return function.last_program
    return None


class IPUTensorBoard(keras.callbacks.TensorBoard):
    """`keras.callbacks.TensorBoard` with the simulated IPU's scalars and trace.

    Args:
        log_dir: Where to write the logs (as Keras' TensorBoard).
        ipu_trace: Whether to write the last training execution's trace at the end of
            training (see the module docstring).
        **kwargs: The other arguments of `keras.callbacks.TensorBoard`.
    """

    def __init__(self, log_dir="logs", ipu_trace=True, **kwargs):
        if importlib.util.find_spec("tensorboard") is None:
            raise ImportError("IPUTensorBoard, like keras.callbacks.TensorBoard, writes "
                              "through the tensorboard package, which is not installed. "
                              "Install it with `pip install tensorboard` (or "
                              "`pip install \".[tensorboard]\"` from the ipu-keras clone).")
        super().__init__(log_dir=log_dir, **kwargs)
        self.ipu_trace = ipu_trace
        self._ipu_writer = None
        self._epoch_cycles, self._epoch_steps, self._seen_run = None, 0, None

    def _ipu_summary_writer(self):
        if self._ipu_writer is None:
            self._ipu_writer = tf.summary.create_file_writer(os.path.join(self.log_dir,
                                                                          "train"))
        return self._ipu_writer

    def on_epoch_begin(self, epoch, logs=None):
        super().on_epoch_begin(epoch, logs)
        self._epoch_cycles, self._epoch_steps = dict.fromkeys(CYCLE_KINDS, 0), 0

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        program = _train_program(self.model)
        if program is None or program.session.run_index == self._seen_run:
            return
        self._seen_run = program.session.run_index
        if self._epoch_cycles is None:
            self._epoch_cycles = dict.fromkeys(CYCLE_KINDS, 0)
        for kind in CYCLE_KINDS:
            self._epoch_cycles[kind] += int((program.session.last_cycles or {}).get(kind, 0))
        self._epoch_steps += max(1, int(program.steps_run))

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        program = _train_program(self.model)
        if program is None or not self._epoch_steps:
            return
        with self._ipu_summary_writer().as_default(step=epoch):
            for name, value in ipu_scalars(program, self._epoch_cycles,
                                           self._epoch_steps).items():
                tf.summary.scalar(f"ipu/{name}", value)
        self._ipu_writer.flush()

    def on_train_end(self, logs=None):
        super().on_train_end(logs)
        program = _train_program(self.model)
        if self.ipu_trace and program is not None:
            write_profile(program, os.path.join(self.log_dir, "train"),
                          name=f"{self.model.name}_train")
        if self._ipu_writer is not None:
            self._ipu_writer.flush()


def ipu_scalars(program, cycles, steps):
    """The per-epoch scalars of `program` whose executions took `cycles` for `steps`."""
    target, memory = program.target, program.executable.memory
    total = sum(cycles.values())
    capacity = target.bytes_per_tile * len(memory["tile_memory"])
    scalars = {"cycles_per_step": total / steps}
    scalars.update({f"{k}_cycles_per_step": cycles[k] / steps for k in CYCLE_KINDS})
    scalars["device_ms_per_step"] = 1e3 * total / steps / target.clock_hz
    scalars["memory_used_bytes"] = memory["total_bytes"]
    scalars["memory_free_bytes"] = capacity - memory["total_bytes"]
    scalars["fullest_tile_bytes"] = memory["max_tile_bytes"]
    scalars["fullest_tile_fraction"] = memory["max_tile_bytes"] / target.bytes_per_tile
    return scalars


def write_profile(program, run_dir, name="train", host=None):
    """Writes the last execution of `program` as the profile plugin reads it; returns the
    session directory (`run_dir/plugins/profile/<timestamp>`)."""
    report = document.build(program.executable, name, "", list(program.session.engine.counts))
    events = trace.trace_document(report)
    stamp = datetime.datetime.now().strftime("%Y_%m_%d_%H_%M_%S")
    session = os.path.join(run_dir, "plugins", "profile", stamp)
    os.makedirs(session, exist_ok=True)
    host = host or socket.gethostname() or "localhost"
    with gzip.open(os.path.join(session, f"{host}.trace.json.gz"), "wb") as f:
        f.write(json.dumps(events, separators=(",", ":")).encode())
    space = xspace(events)
    if space is not None:
        with open(os.path.join(session, f"{host}.xplane.pb"), "wb") as f:
            f.write(space.SerializeToString())
    return session


def _xplane_module():
    for name in ("tensorflow.tsl.profiler.protobuf.xplane_pb2",
                 "tsl.profiler.protobuf.xplane_pb2",
                 "xla.tsl.profiler.protobuf.xplane_pb2"):
        try:
            return __import__(name, fromlist=["XSpace"])
        except ImportError:
            continue
    return None


def xspace(events):
    """The trace document `events` as an XSpace (None without `xplane_pb2`): one plane
    `/device:CUSTOM:<process>` per process of the trace, one line per thread."""
    pb = _xplane_module()
    if pb is None:
        return None
    ps_per_cycle = 1e12 / events["metadata"]["clock_hz"]
    names = {}
    for e in events["traceEvents"]:
        if e["ph"] == "M" and e["name"] in ("process_name", "thread_name"):
            names[(e["name"], e["pid"], e["tid"] if e["name"] == "thread_name" else 0)] = \
                e["args"]["name"]
    space, planes, lines, kinds = pb.XSpace(), {}, {}, {}
    now_ns = int(datetime.datetime.now().timestamp() * 1e9)
    for e in events["traceEvents"]:
        if e["ph"] != "X":
            continue
        plane = planes.get(e["pid"])
        if plane is None:
            plane = planes[e["pid"]] = space.planes.add(
                id=len(planes), name=f"/device:CUSTOM:{names.get(('process_name', e['pid'], 0))}")
            plane.stat_metadata[1].id, plane.stat_metadata[1].name = 1, "cycles"
            plane.stat_metadata[2].id, plane.stat_metadata[2].name = 2, "layer"
        line = lines.get((e["pid"], e["tid"]))
        if line is None:
            name = names.get(("thread_name", e["pid"], e["tid"]), str(e["tid"]))
            line = lines[(e["pid"], e["tid"])] = plane.lines.add(
                id=e["tid"], display_id=e["tid"], name=name, timestamp_ns=now_ns)
        metadata = kinds.setdefault((e["pid"], e["name"]), len(plane.event_metadata) + 1)
        if metadata not in plane.event_metadata:
            plane.event_metadata[metadata].id = metadata
            plane.event_metadata[metadata].name = e["name"]
        start, end = e["args"]["start_cycle"], e["args"]["end_cycle"]
        offset = round(start * ps_per_cycle)   # the end rounded as the start: no overhang
        event = line.events.add(metadata_id=metadata, offset_ps=offset,
                                duration_ps=round(end * ps_per_cycle) - offset)
        event.stats.add(metadata_id=1, int64_value=end - start)
        if e["args"].get("layer"):
            event.stats.add(metadata_id=2, str_value=e["args"]["layer"])
    space.hostnames.append(socket.gethostname() or "localhost")
    return space

