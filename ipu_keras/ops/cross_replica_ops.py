"""`ipu.cross_replica_ops`: reductions across the replicas of a replicated program.

`cross_replica_sum(x)` and `cross_replica_mean(x)` reduce `x` over all replicas, or over
consecutive groups of `replica_group_size` replicas ({0..k-1}, {k..2k-1}, ...), which
must divide the replication factor. `assume_equal_across_replicas(tensors)` tells the
compiler values are equal on every replica (the simulator needs no such hint: it
returns them unchanged). With one replica, and in TensorFlow on the CPU, a reduction
is the value itself: each builds an `Identity` marked for the tracer
(`_src/tracer/marked.py`, read by `_src/ops/collective.py`), so the same code runs in
both places.
"""
from ipu_keras._src.tracer.marked import cross_replica_mean, cross_replica_sum


def assume_equal_across_replicas(tensors, inplace=False):
    """Returns `tensors` (a tensor or a structure of them) unchanged."""
    del inplace
    return tensors


__all__ = ["assume_equal_across_replicas", "cross_replica_mean", "cross_replica_sum"]
