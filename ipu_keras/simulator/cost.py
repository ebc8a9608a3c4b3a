"""The cost model: turns an op's `Work` on one tile into cycles on a target.

Every rate comes from the target description (`simulator/targets.py`); the few
constants here are per-vertex overheads, documented as estimates. The compiler calls
these functions once per equation at compile time; nothing here runs on the hot path.
"""
import math

import numpy as np

VERTEX_OVERHEAD_CYCLES = 30
"""Estimate: supervisor cycles to launch the workers of one vertex on a tile."""

TRANSCENDENTAL_CYCLES = 8
"""Estimate: vector-instruction equivalents of one exp/log/tanh-class element."""

EXCHANGE_LATENCY_CYCLES = 30
"""Estimate: fixed cost of one exchange phase (programming the exchange, first word)."""


def compute_cycles(kind, units, dtype, target):
    """Cycles one tile spends doing `units` of work of `kind` on elements of `dtype`."""
    if kind == "none" or units <= 0:
        return 0
    if kind == "amp":
        rate = target.amp_macs_per_cycle.get(dtype, target.amp_macs_per_cycle["float32"])
        return VERTEX_OVERHEAD_CYCLES + math.ceil(units / rate)
    if kind == "copy":
        itemsize = np.dtype(dtype).itemsize
        return VERTEX_OVERHEAD_CYCLES + math.ceil(units * itemsize / target.memcpy_bytes_per_cycle)
    rate = _vector_rate(dtype, target)
    factor = TRANSCENDENTAL_CYCLES if kind == "transcendental" else 1
    return VERTEX_OVERHEAD_CYCLES + math.ceil(units * factor / rate)


def _vector_rate(dtype, target):
    if dtype == "float16":
        return 2 * target.vector_flops_per_cycle
    if dtype in ("float32", "float64"):
        return target.vector_flops_per_cycle
    return 1


def exchange_cycles(bytes_received, target):
    """Cycles of an exchange phase in which the busiest tile receives `bytes_received`."""
    if bytes_received <= 0:
        return 0
    return EXCHANGE_LATENCY_CYCLES + math.ceil(bytes_received / target.exchange_bytes_per_cycle)


def host_io_cycles(nbytes, target):
    """Cycles to stream `nbytes` between host and device over the host link."""
    if nbytes <= 0:
        return 0
    return math.ceil(nbytes / target.host_link_bytes_per_second * target.clock_hz)


def sync_cycles(target):
    """Cycles of the sync that starts every superstep."""
    return target.external_sync_cycles if target.num_ipus > 1 else target.internal_sync_cycles
