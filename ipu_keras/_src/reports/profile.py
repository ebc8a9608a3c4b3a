"""The profile of the last execution: what `ipu_keras.profiling` reports.

The runtime's session calls `record(executable, engine)` after every execution;
`last_report()` builds the `Report` of it when asked (`ipu_keras/profiling.py`
describes its fields). This module imports numpy only, never TensorFlow.
"""
import dataclasses

import numpy as np

from ipu_keras._src.device.executable import CYCLE_KINDS
from ipu_keras._src.device.steps import While
from ipu_keras._src.reports import writer as _reports

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


__all__ = ["Report", "last_report", "record", "report_of"]
