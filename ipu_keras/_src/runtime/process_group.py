"""The process group of a distributed run: this instance, the others, and MPI.

`init()` makes the process's `ProcessGroup` once: with `IPU_KERAS_NUM_REPLICAS` set (by
`ipu-keras run` or by hand beside `mpirun`), from MPI's world communicator (mpi4py is
imported only then); without it, a group of one instance holding every replica.
`active_group()` is the group if the run is distributed (more than one instance), else
None: the runtime asks it once per execution.
"""
import os

import numpy as np

from ipu_keras.errors import ReplicationError

NUM_REPLICAS_ENV = "IPU_KERAS_NUM_REPLICAS"
_GROUP = []


class ProcessGroup:
    """The instances of a run: `size` of them, this one `rank`, `total_replicas` in all."""

    def __init__(self, comm, total_replicas):
        self.comm = comm
        self.size = 1 if comm is None else comm.Get_size()
        self.rank = 0 if comm is None else comm.Get_rank()
        if total_replicas % self.size:
            raise ReplicationError(
                f"{NUM_REPLICAS_ENV}={total_replicas} replicas cannot be shared by "
                f"{self.size} instances: expected a multiple of the number of instances. "
                f"Received: num_replicas={total_replicas}, num_instances={self.size}.")
        self.total_replicas = total_replicas
        self.local_replicas = total_replicas // self.size

    def allreduce(self, value, op="SUM"):
        value = np.asarray(value)
        total = value.copy() if self.comm is None else self.comm.allreduce(value)
        total = np.asarray(total, dtype=value.dtype)
        return total / self.size if str(op).upper() == "MEAN" else total

    def broadcast(self, value, root_rank=0):
        return value if self.comm is None else self.comm.bcast(value, root=root_rank)

    def allgather(self, value):
        return [value] if self.comm is None else self.comm.allgather(value)


def init():
    """The process's group, made on first use."""
    if not _GROUP:
        text = os.environ.get(NUM_REPLICAS_ENV)
        if text is None:
            _GROUP.append(ProcessGroup(None, 1))
        else:
            try:
                replicas = int(text)
            except ValueError:
                replicas = 0
            if replicas < 1:
                raise ReplicationError(f"{NUM_REPLICAS_ENV} expected a positive integer. "
                                       f"Received: {text!r}")
            try:
                from mpi4py import MPI
            except ImportError:
                raise ReplicationError(
                    "A distributed run expected mpi4py. Received: no module mpi4py. Install "
                    "it with `pip install mpi4py mpich` (the project's `distributed` extra: "
                    "`pip install \".[distributed]\"` in its clone).") from None
            _GROUP.append(ProcessGroup(MPI.COMM_WORLD, replicas))
    return _GROUP[0]


def active_group():
    """The group if this process is one instance of several, else None."""
    if not _GROUP and NUM_REPLICAS_ENV not in os.environ:
        return None
    group = init()
    return group if group.size > 1 else None
