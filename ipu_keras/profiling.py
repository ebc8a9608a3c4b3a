"""Profiles: what the simulated IPU reports about its last execution.

After every execution (any `runtime.Session` run: `ipu_compiler.compile`,
`IPUStrategy.run`, a Keras `fit`/`evaluate`/`predict` execution) the session calls
`record(executable, engine)`, and `last_report()` returns a `Report` of it:

* `target`: `name`, `tiles_per_ipu`, `num_ipus`, `bytes_per_tile`, `clock_hz`;
* `steps`: the steps in the execution. When the main program has an outermost
  on-device loop (a Keras program's device loop, or `ipu.loops.repeat`), it is the
  number of iterations of that loop's body in this execution (the largest, if the
  main program has several loops); otherwise 1;
* `total_cycles` and `cycles` (`compute`, `exchange`, `sync`, `host_io`): the
  compiler's cycle tables times how often each block ran (`device/cost.py`
  documents the model); `seconds` is `total_cycles / clock_hz`;
* `tile_memory` (bytes per tile, a list) and `max_tile_memory`, `max_tile`;
* `memory`: the executable's full memory summary (per-category totals and
  per-tile lists under `tile_categories`, always-live and not-always-live per tile,
  liveness per program step and its peak step, tiles out of memory);
* `plans`: the plan the planner chose for each matmul, convolution and gather.

A `Report` is a frozen dataclass; `report["total_cycles"]` also works, and
`to_dict()` gives plain JSON-able data. The accounting is done at compile time; the
engine only counts block executions, so recording a report costs a matrix-vector
product. This module imports numpy only, never TensorFlow.

Report files (Graphcore's autoReport): `enable_reports(directory)` (or
`POPLAR_ENGINE_OPTIONS='{"autoReport.all": "true", "autoReport.directory": DIR}'`)
writes `report.json`, PNG plots and `report.html` for every executable compiled
afterwards; the execution trace of the last run is written by `write_report()` and
at exit (`ipu_keras/_src/reports/writer.py` explains why lazily). `disable_reports()`
turns the code switch off again.
"""
import dataclasses

import numpy as np

from ipu_keras._src.device.executable import CYCLE_KINDS
from ipu_keras._src.device.steps import While
from ipu_keras._src.reports import writer as _reports
from ipu_keras._src.reports.writer import disable_reports, enable_reports, write_report

_last = []


@dataclasses.dataclass(frozen=True)
class Report:
    """The profile of one execution; see the module docstring for each field."""

    target: dict
    steps: int
    total_cycles: int
    cycles: dict
    seconds: float
    tile_memory: list
    max_tile_memory: int
    max_tile: int
    memory: dict
    plans: list

    def __getitem__(self, key):
        return getattr(self, key)

    def to_dict(self):
        return dataclasses.asdict(self)


def report_of(executable, counts):
    """The `Report` of an execution of `executable` whose blocks ran `counts` times."""
    cost = np.array([[b.cycles[k] for k in CYCLE_KINDS] for b in executable.blocks],
                    dtype=np.int64)
    totals = np.asarray(counts, dtype=np.int64) @ cost
    cycles = dict(zip(CYCLE_KINDS, (int(c) for c in totals)))
    total = sum(cycles.values())
    t = executable.target
    memory = executable.memory
    return Report(
        target={k: t[k] for k in ("name", "tiles_per_ipu", "num_ipus", "bytes_per_tile",
                                  "clock_hz")},
        steps=_steps(executable, counts),
        total_cycles=int(total),
        cycles=cycles,
        seconds=total / t["clock_hz"],
        tile_memory=list(memory["tile_memory"]),
        max_tile_memory=int(memory["max_tile_bytes"]),
        max_tile=int(memory["max_tile"]),
        memory=memory,
        plans=list(executable.info.get("plans", [])),
    )


def _steps(executable, counts):
    """Iterations of the outermost loop's body in block 0, or 1 without a loop."""
    bodies = [step.body_block for step in executable.blocks[0].steps
              if isinstance(step, While)]
    if not bodies:
        return 1
    return int(max(counts[b] for b in bodies))


def record(executable, engine):
    """Remember the execution `engine` just ran. Cheap: the report is built when asked for."""
    _last[:] = [(executable, engine.counts)]
    _reports.note_execution(executable, engine.counts)


def last_report():
    """The `Report` of the most recent execution in this process, or None if none ran."""
    return report_of(*_last[0]) if _last else None


__all__ = ["Report", "disable_reports", "enable_reports", "last_report", "record", "report_of",
           "write_report"]
