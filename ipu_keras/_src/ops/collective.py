"""Collectives across replicas: `all_reduce` and `replication_index`.

`all_reduce(x) {reduction, group_size}` sums (`reduction="sum"`) or averages
(`"mean"`) `x` over the replicas of its group: with R replicas and group size k, the
groups are {0..k-1}, {k..2k-1}, ... (k = None: all R). `replication_index()` is this
replica's index, an int32 scalar. Both are engine ops: the engine hands them to the
runtime's streams (`runtime/replicas.py`), which meet the other replicas there; with
one replica the reduction is the value itself and the index 0. The lowering costs an
all-reduce as a ring over the IPU-Links (`device/cost.py: all_reduce_cycles`).

TensorFlow side: `ipu.cross_replica_ops.cross_replica_sum` and friends make an
`Identity` marked `_ipu_all_reduce` ("sum:k" / "mean:k"; k = 0 for all replicas), and
`ipu.replication_ops.replication_index()` an `Identity` of a constant 0 marked
`_ipu_replication_index`, so that TensorFlow on the CPU (one replica) computes what
one replica computes; `import_marked` turns them into these ops.
"""
from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops._common import no_cost, same_type
from ipu_keras._src.ops.registry import register_op

REDUCTIONS = ("sum", "mean")
ALL_REDUCE_ATTR = "_ipu_all_reduce"
REPLICATION_INDEX_ATTR = "_ipu_replication_index"


def _all_reduce_shape(in_types, *, reduction, group_size):
    if reduction not in REDUCTIONS:
        raise ValueError(f"all_reduce expected a reduction in {REDUCTIONS}. "
                         f"Received: reduction={reduction!r}")
    return same_type(in_types)


def _index_shape(in_types):
    return [TensorType((), "int32")]


register_op("all_reduce", shape=_all_reduce_shape, cost=no_cost, mapping="elementwise",
            engine=True, role="replica_reduce")
register_op("replication_index", shape=_index_shape, cost=no_cost, mapping="linear",
            engine=True, role="replica_index")


def reduce_group(values, reduction, dtype):
    """The reduction of one group's `values` (in replica order, so every replica of the
    group computes the same bits)."""
    total = values[0].astype(dtype, copy=True)
    for value in values[1:]:
        total += value
    if reduction == "mean":
        total = (total / len(values)).astype(dtype)
    return total


def import_marked(node, b):
    """The IR of an `Identity` marked as a collective, or None if it is not one."""
    spec = node.attr(ALL_REDUCE_ATTR, None)
    if spec is not None:
        spec = spec.decode() if isinstance(spec, bytes) else spec
        reduction, size = spec.split(":")
        return [b.emit("all_reduce", [x], reduction=reduction, group_size=int(size) or None)
                for x in node.inputs]
    if node.attr(REPLICATION_INDEX_ATTR, None) is not None:
        return [b.emit("replication_index", [])]
    return None


__all__ = ["ALL_REDUCE_ATTR", "REPLICATION_INDEX_ATTR", "import_marked", "reduce_group"]
