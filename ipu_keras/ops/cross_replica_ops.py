"""`ipu.cross_replica_ops`: reductions across the replicas of a replicated program.

`cross_replica_sum(x)` and `cross_replica_mean(x)` reduce `x` over all replicas, or over
consecutive groups of `replica_group_size` replicas ({0..k-1}, {k..2k-1}, ...), which
must divide the replication factor. `assume_equal_across_replicas(tensors)` tells the
compiler values are equal on every replica (the simulator needs no such hint: it
returns them unchanged). With one replica, and in TensorFlow on the CPU, a reduction
is the value itself: each builds an `Identity` marked for the tracer
(`ops/collective.py`), so the same code runs in both places.
"""
import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2

from ipu_keras._src.ops.collective import ALL_REDUCE_ATTR


def _group_size(replica_group_size):
    if replica_group_size is None:
        return 0
    if isinstance(replica_group_size, bool) or not isinstance(replica_group_size, int) \
            or replica_group_size < 1:
        raise ValueError("replica_group_size expected a positive integer or None. Received: "
                         f"replica_group_size={replica_group_size!r}")
    return replica_group_size


def _all_reduce(x, reduction, replica_group_size, name):
    size = _group_size(replica_group_size)
    x = tf.convert_to_tensor(x)
    out = tf.identity(x, name=name or f"cross_replica_{reduction}")
    out.op._set_attr(ALL_REDUCE_ATTR,
                     attr_value_pb2.AttrValue(s=f"{reduction}:{size}".encode()))
    return out


def cross_replica_sum(x, replica_group_size=None, name=None):
    """The sum of `x` over the replicas (of each group of `replica_group_size`)."""
    return _all_reduce(x, "sum", replica_group_size, name)


def cross_replica_mean(x, replica_group_size=None, name=None):
    """The mean of `x` over the replicas (of each group of `replica_group_size`)."""
    return _all_reduce(x, "mean", replica_group_size, name)


def assume_equal_across_replicas(tensors, inplace=False):
    """Returns `tensors` (a tensor or a structure of them) unchanged."""
    del inplace
    return tensors
