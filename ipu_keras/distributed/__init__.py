"""`ipu_keras.distributed`: replicas across processes, in the role of PopDist and PopRun.

A training script launched as several *instances* (processes, possibly on several
hosts) by `ipu-keras run --num-instances I --num-replicas R -- python train.py` (or
`mpirun -n I` with `IPU_KERAS_NUM_REPLICAS=R` set) runs R / I replicas in each
instance. Cross-replica reductions span every instance: the replicas of an instance
meet in its `Communicator` (`runtime/replicas.py`), and one of them joins the other
instances through MPI (`mpi4py`, from `pip install ".[distributed]"` in the project's clone, which
brings MPICH too). Each instance reads its own shard of the data (for example
`dataset.shard(getNumInstances(), getInstanceIndex())`, or every I-th batch); the
variables of the first execution are broadcast from instance 0, so the weights start
equal, and summed gradients keep them equal.

The names follow Graphcore's `popdist` (`init`, `isPopdistEnvSet`, `getNumInstances`,
`getInstanceIndex`, `getNumTotalReplicas`, `getNumLocalReplicas`,
`getReplicaIndexOffset`, `set_ipu_config`) and `ipu.distributed` (`allreduce`,
`broadcast`, `allgather` of host values, `PopDistStrategy`, also in
its SDK 3.x module `ipu.distributed.popdist_strategy`). Without a launcher the
process is one instance holding every replica, and nothing imports MPI.
"""
import importlib
import os

from ipu_keras._src.runtime.process_group import (
    NUM_REPLICAS_ENV, ProcessGroup, active_group, init,
)


def isPopdistEnvSet():  # noqa: N802 - popdist's spelling
    """Whether the process was launched as one instance of several."""
    return NUM_REPLICAS_ENV in os.environ


def _group():
    return active_group() or init()


def getNumInstances():  # noqa: N802
    return _group().size


def getInstanceIndex():  # noqa: N802
    return _group().rank


def getNumTotalReplicas():  # noqa: N802
    return _group().total_replicas


def getNumLocalReplicas():  # noqa: N802
    return _group().local_replicas


def getReplicaIndexOffset():  # noqa: N802
    group = _group()
    return group.rank * group.local_replicas


def set_ipu_config(config, ipus_per_replica=1):
    """Gives `config` this instance's IPUs: its local replicas times `ipus_per_replica`."""
    if isinstance(ipus_per_replica, bool) or not isinstance(ipus_per_replica, int) \
            or ipus_per_replica < 1:
        raise ValueError("ipus_per_replica expected a positive integer. Received: "
                         f"ipus_per_replica={ipus_per_replica!r}")
    config.auto_select_ipus = getNumLocalReplicas() * ipus_per_replica
    return config


def allreduce(value, op="SUM"):
    """The sum (or mean, op="MEAN") of a host value over the instances."""
    return _group().allreduce(value, op)


def broadcast(value, root_rank=0):
    """Instance `root_rank`'s host value, on every instance."""
    return _group().broadcast(value, root_rank)


def allgather(value):
    """A list of every instance's host value, in instance order."""
    return _group().allgather(value)


def __getattr__(name):
    # Imported late: the runtime imports this package.
    if name == "PopDistStrategy":
        from ipu_keras.distributed.popdist_strategy import PopDistStrategy
        return PopDistStrategy
    if name == "popdist_strategy":   # the SDK 3.x module path
        return importlib.import_module("ipu_keras.distributed.popdist_strategy")
    raise AttributeError(f"module 'ipu_keras.distributed' has no attribute '{name}'")


__all__ = ["PopDistStrategy", "ProcessGroup", "allgather", "allreduce", "broadcast",
           "getInstanceIndex", "getNumInstances", "getNumLocalReplicas",
           "getNumTotalReplicas", "getReplicaIndexOffset", "init", "isPopdistEnvSet",
           "popdist_strategy", "set_ipu_config"]
