"""Lowering: a mapped, planned graph -> the `Executable`'s blocks of steps.

Every IR value gets a slot; constants become preset slots; each graph level becomes
a block. Each step's cycles (compute on its busiest tile, the exchange that brings
its operands there, the superstep sync, host I/O for stream copies) are computed
here, once, from the tile map and the target, and summed per block.
"""
import math

from ipu_keras.simulator import cost as cost_model
from ipu_keras.ops.registry import get_op


class _Lowering:
    def __init__(self, tile_map, target):
        self.map = tile_map
        self.target = target
        self.slots = {}
        self.blocks = []
        self.constants = []

    def slot(self, value):
        if value.id not in self.slots:
            self.slots[value.id] = len(self.slots)
        return self.slots[value.id]

    def slots_of(self, values):
        return [self.slot(v) for v in values]

    def block(self, graph):
        """Lower one graph level; returns its block index (parents before children)."""
        index = len(self.blocks)
        self.blocks.append(None)
        self.slots_of(graph.inputs)
        steps, cycles = [], [0, 0, 0, 0]
        for eqn in graph.equations:
            step = self.step(eqn)
            if step is not None:
                steps.append(step)
            for k, c in enumerate(self.cycles(eqn)):
                cycles[k] += c
        self.blocks[index] = {"steps": steps, "cycles": dict(zip(
            ("compute", "exchange", "sync", "host_io"), cycles))}
        return index

    def step(self, eqn):
        p, ins, outs = eqn.params, self.slots_of(eqn.inputs), self.slots_of(eqn.outputs)
        if eqn.op == "const":
            self.constants.append([outs[0], p["value"]])
            return None
        if eqn.op == "read_var":
            return ["read", p["var"], outs[0]]
        if eqn.op == "write_var":
            return ["write", p["var"], p["mode"], ins[0]]
        if eqn.op == "infeed":
            return ["infeed", p["infeed"], outs]
        if eqn.op == "outfeed":
            return ["outfeed", p["outfeed"], ins]
        if eqn.op == "while":
            cond, body = p["cond"], p["body"]
            return ["while", ins, self.block(cond), self.slots_of(cond.inputs),
                    self.slot(cond.outputs[0]), self.block(body), self.slots_of(body.inputs),
                    self.slots_of(body.outputs), outs]
        if eqn.op == "if":
            then, other = p["then"], p["else"]
            return ["if", ins[0], ins[1:], self.block(then), self.slots_of(then.inputs),
                    self.slots_of(then.outputs), self.block(other), self.slots_of(other.inputs),
                    self.slots_of(other.outputs), outs]
        assert not get_op(eqn.op).engine, f"no lowering for engine op {eqn.op}"
        return ["exec", eqn.op, ins, outs, p]

    # -- cost ----------------------------------------------------------------------
    def cycles(self, eqn):
        """[compute, exchange, sync, host_io] cycles of one execution of `eqn`."""
        target = self.target
        if eqn.op in ("const", "read_var", "while", "if", "call"):
            return [0, 0, 0, 0]
        if eqn.op in ("infeed", "outfeed"):
            nbytes = sum(v.type.nbytes for v in eqn.inputs + eqn.outputs)
            return [0, 0, cost_model.sync_cycles(target),
                    cost_model.host_io_cycles(nbytes, target)]
        opdef = get_op(eqn.op)
        work = opdef.cost([v.type for v in eqn.inputs], [v.type for v in eqn.outputs],
                          **eqn.params)
        anchor = eqn.outputs[0] if eqn.outputs else eqn.inputs[0]
        mapping = self.map.values.get(anchor.id)
        if eqn.op == "write_var":
            mapping = self.map.variables[eqn.params["var"]]
        share = mapping.per_tile / max(1, anchor.type.size)
        dtype = (eqn.inputs or eqn.outputs)[0].type.dtype
        compute = cost_model.compute_cycles(work.kind, math.ceil(work.amount * share), dtype,
                                            target)
        exchange = cost_model.exchange_cycles(self.exchange_bytes(eqn, anchor, mapping), target)
        return [compute, exchange, cost_model.sync_cycles(target) if compute else 0, 0]

    def exchange_bytes(self, eqn, anchor, mapping):
        """Bytes the busiest tile of `eqn` receives to have all its operands."""
        per_tile = mapping.per_tile
        if get_op(eqn.op).mapping == "matmul" and len(eqn.inputs) >= 2:
            a, out = eqn.inputs[0].type, anchor.type
            n = out.shape[-1] if out.shape else 1
            k = a.size * n // max(1, out.size)
            rows, cols = math.ceil(per_tile / max(1, n)), min(per_tile, n)
            return (rows * k + k * cols) * a.itemsize
        total = 0
        for v in eqn.inputs:
            if self.map.values.get(v.id) == mapping and v.type.shape == anchor.type.shape:
                continue
            fraction = per_tile / max(1, anchor.type.size)
            total += math.ceil(v.type.nbytes * min(1.0, fraction if v.type.size > 1 else 1))
        return total


def lower(graph, tile_map, target):
    """Returns (blocks, constants, input slots, output slots, number of slots)."""
    lowering = _Lowering(tile_map, target)
    lowering.block(graph)
    return (lowering.blocks, lowering.constants, lowering.slots_of(graph.inputs),
            lowering.slots_of(graph.outputs), len(lowering.slots))
