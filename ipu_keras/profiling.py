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
from ipu_keras._src.reports.profile import Report, last_report, record, report_of
from ipu_keras._src.reports.writer import disable_reports, enable_reports, write_report

__all__ = ["Report", "disable_reports", "enable_reports", "last_report", "record", "report_of",
           "write_report"]
