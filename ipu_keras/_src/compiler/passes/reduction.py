"""Reductions as a tree of supersteps: how partial results converge on the output.

A reduce-mapped op (`reduce_*`, `bias_add_grad`, `l2_loss`, ...) first reduces its
input where it lies: every tile holding input elements computes one partial per output
element it holds inputs of (stage 0, no exchange). An output element then has `h`
partials, one per tile holding its inputs (`h = min(reduction factor, input tiles)`).

Sending all `h` partials of every element to the output's tiles in one exchange makes
those few tiles receive and add `h x elements` partials while the others idle (a
[64, 26, 26, 32] -> [32] bias gradient on 1,472 tiles would put 1,472 x 16 partials on
each of two tiles). Poplar instead reduces in several stages whose intermediate
partials are spread over many tiles. We model that: with `s` stages, stage `i`
reduces groups of up to `F = ceil(h ** (1 / s))` partials into one; the groups of an
intermediate stage (`elements x ceil(h_i / F)` of them) are spread evenly over the
tiles, the last stage lands on the output's mapping. Each stage is a superstep: its
busiest tile receives its groups' partials (`PARTIAL_BYTES` each) and adds them on the
vector path, plus a sync. The number of stages (hence F) is the one with the fewest
modelled cycles, from the target's exchange, vector and sync figures: a stage costs
about `sync + exchange latency + vertex overhead` (~110 cycles on the standard targets)
and saves `~1.5` cycles per partial no longer converging on one tile (4 bytes at 4
bytes per cycle, half a cycle per float32 add), so stages pay once tens of partials per
tile converge; F is derived per op, never tuned.

The output's tiles receive, in the last stage, the partials of their elements from
the other tiles; a partial an output tile holds itself is not exchanged (when the
output tile holds input of its elements).
"""
import dataclasses
import math

import numpy as np

from ipu_keras._src.device import cost as cost_model

PARTIAL_BYTES = 4
"""Bytes of one reduction partial (reductions accumulate in float32 or int32)."""

MAX_STAGES = 4
"""Most exchange stages a reduction tree may have (a search limit: fan-ins of ~6 at
1,472 partials per element; more stages only add syncs)."""


@dataclasses.dataclass(frozen=True)
class Stage:
    """One exchange-and-add superstep of a reduction tree."""

    fan_in: int          # partials reduced into one
    received: int        # bytes the busiest tile receives
    adds: int            # partials the busiest tile adds
    final: bool          # lands on the output's mapping
    tiles: int = 0       # intermediate stages: tiles the groups are spread over


def tree(partials, out_elements, out_size, num_tiles, holds_own, dtype, target):
    """The stages reducing `partials` per output element (cheapest stage count).

    `out_elements`: output elements per tile (array); `holds_own`: per tile, whether
    the output tile holds one of the partials of its elements itself.
    """
    if partials <= 1 and not (out_elements * ~holds_own).any():
        return []
    best = None
    for stages in range(1, MAX_STAGES + 1):
        if stages > 1 and math.ceil(partials ** (1 / (stages - 1))) <= 2:
            break
        plan = _stages(partials, stages, out_elements, out_size, num_tiles, holds_own)
        cycles = sum(stage_cycles(s, dtype, target) for s in plan)
        if best is None or cycles < best[0]:
            best = (cycles, plan)
    return best[1]


def _stages(partials, stages, out_elements, out_size, num_tiles, holds_own):
    fan_in = max(2, math.ceil(partials ** (1 / stages)))
    plan, h = [], partials
    for _ in range(stages - 1):
        h_next = math.ceil(h / fan_in)
        groups = out_size * h_next
        tiles = min(num_tiles, groups)
        per_tile = math.ceil(groups / tiles)
        plan.append(Stage(fan_in, per_tile * fan_in * PARTIAL_BYTES, per_tile * fan_in, False,
                          tiles))
        h = h_next
    own = np.where(holds_own & (h == partials), 1, 0)
    received = out_elements * (h - own)
    busiest = int(received.max(initial=0))
    adds = int((out_elements * h).max(initial=0))
    plan.append(Stage(h, busiest * PARTIAL_BYTES, adds, True))
    return plan


def stage_cycles(stage, dtype, target):
    """Cycles of one stage: exchange, vector adds and a sync."""
    adds = cost_model.vector_cycles(stage.adds, dtype, target) if stage.fan_in > 1 else 0
    return (cost_model.exchange_cycles(stage.received, target) + adds
            + cost_model.sync_cycles(target))


def received_per_tile(stages, out_elements, holds_own, partials_per_element, num_tiles):
    """Bytes each tile receives over the stages (intermediate stages spread evenly)."""
    total = np.zeros(num_tiles, np.int64)
    for stage in stages:
        if stage.final:
            own = np.where(holds_own & (stage.fan_in == partials_per_element), 1, 0)
            total += out_elements * (stage.fan_in - own) * PARTIAL_BYTES
        else:
            total[:stage.tiles] += stage.received
    return total
