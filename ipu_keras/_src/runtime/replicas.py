"""Replicas: one executable run R times at once, on its own slice of the data.

The replication factor of an executable is the device's IPUs over the IPUs one replica
uses (its shards): `replication_factor(executable)`. A replicated `Session` runs one
engine per replica, each in its own thread (numpy releases the GIL in its kernels), on
its own copy of the variables, and meets the others only in collectives:

* `Communicator` is the one place replicas exchange values: `all_reduce` (each replica
  leaves its value, waits for the rest of the device, reduces its group in replica
  order, so every replica of a group gets the same bits, and waits again) and
  `replication_index`. `ProcessCommunicator` is the second implementation of that
  interface, for a distributed run: reductions over all replicas also cross the
  instances (`ipu_keras.distributed`, MPI), and indices are global.
* `Dealer` deals an infeed's elements round robin: the k-th element a replica takes is
  element r of the k-th group of R consecutive elements, as the original's infeed did.
  A trailing group smaller than R is dropped with a warning saying how many elements.
  A failed execution gives every group it took back to the infeed.
* `ReplicaStreams` is one replica's view of the streams (its dealt infeeds, its own
  outfeed buffer, the communicator).

After an execution the outfeeds gain a replica axis (`combine_outfeeds`: each enqueue
becomes `[R, ...]`, so a queue's ALL mode gives `[enqueues, R, ...]`), and the
variables are written back from replica 0: replicas that reduce their gradients keep
equal weights.
"""
import logging
import threading

import numpy as np

from ipu_keras.errors import ReplicationError
from ipu_keras._src.ops.collective import reduce_group
from ipu_keras._src.ops.registry import get_op
from ipu_keras._src.runtime.feeds import StreamSet

logger = logging.getLogger("ipu_keras")
COLLECTIVE_TIMEOUT_SECONDS = 300.0


def replication_factor(executable):
    """Replicas of `executable`: the device's IPUs over the IPUs one replica uses."""
    replica_ipus = executable.target.get("num_ipus", 1)
    return max(1, executable.info.get("device_ipus", replica_ipus) // replica_ipus)


class Communicator:
    """Collectives among the `replicas` threads of one execution."""

    def replication_index(self, index):
        return np.int32(index)

    def __init__(self, replicas, timeout=COLLECTIVE_TIMEOUT_SECONDS):
        self.replicas = replicas
        self._slots = [None] * replicas
        self._barrier = threading.Barrier(replicas, timeout=timeout)

    def _wait(self, index):
        try:
            self._barrier.wait()
        except threading.BrokenBarrierError:
            raise ReplicationError(
                f"Replica {index} expected the other {self.replicas - 1} replicas at a "
                "cross-replica operation. Received: an execution abandoned by another "
                "replica (it failed, or took another branch around the collective).") from None

    def abort(self):
        """Releases every replica waiting in a collective (one of them failed)."""
        self._barrier.abort()

    def all_reduce(self, index, value, reduction, group_size):
        size = group_size or self.replicas
        self._slots[index] = np.asarray(value)
        self._wait(index)
        start = index // size * size
        result = reduce_group(self._slots[start:start + size], reduction,
                              np.asarray(value).dtype)
        self._wait(index)
        return result


class ProcessCommunicator(Communicator):
    """Collectives among this instance's replicas and every other instance's.

    A reduction over all replicas is summed locally, then across the instances by local
    replica 0 through the process group (MPI), and handed to every local replica; a
    group within this instance is reduced locally. Replica indices are global."""

    def __init__(self, replicas, group, timeout=COLLECTIVE_TIMEOUT_SECONDS):
        super().__init__(replicas, timeout)
        self.group = group
        self.total = replicas * group.size
        self.offset = group.rank * replicas
        self._result = None

    def all_reduce(self, index, value, reduction, group_size):
        size = group_size or self.total
        if size < self.total:
            if self.replicas % size:
                raise ReplicationError(
                    f"A cross-replica reduction over groups of {size} replicas expected each "
                    f"group within one instance ({self.replicas} replicas each). Received: "
                    f"replica_group_size={size}.")
            return super().all_reduce(index, value, reduction, group_size)
        self._slots[index] = np.asarray(value)
        self._wait(index)
        if index == 0:
            dtype = np.asarray(value).dtype
            local = reduce_group(self._slots, "sum", dtype)
            total = self.group.allreduce(local)
            self._result = (total / self.total).astype(dtype) if reduction == "mean" else total
        self._wait(index)
        result = np.array(self._result, copy=True)
        self._wait(index)
        return result

    def replication_index(self, index):
        return np.int32(self.offset + index)


class Dealer:
    """Deals one infeed's elements to `replicas` replicas, round robin."""

    def __init__(self, infeed, replicas):
        self.infeed = infeed
        self.replicas = replicas
        self.groups = []
        self.counts = [0] * replicas
        self._lock = threading.Lock()

    def pull(self, replica):
        with self._lock:
            k = self.counts[replica]
            while len(self.groups) <= k:
                self.groups.append(self._group())
            self.counts[replica] += 1
            return self.groups[k][replica]

    def _group(self):
        group = []
        try:
            for _ in range(self.replicas):
                group.append(self.infeed.pull())
        except Exception:
            if group:
                logger.warning(
                    "The dataset ended within a group of %d elements (one per replica): "
                    "the last %d element(s) are dropped.", self.replicas, len(group))
            raise
        return group

    def give_back(self):
        """After a failed execution: every element it took goes back to the infeed."""
        if self.groups and hasattr(self.infeed, "unread"):
            self.infeed.unread([e for group in self.groups for e in group])
        self.groups, self.counts = [], [0] * self.replicas

    def view(self, replica):
        return _DealtInfeed(self, replica)


class _DealtInfeed:
    """One replica's infeed: its share of a `Dealer` (the dealer gives elements back)."""

    def __init__(self, dealer, replica):
        self.dealer, self.replica = dealer, replica

    def pull(self):
        return self.dealer.pull(self.replica)


class ReplicaStreams(StreamSet):
    """One replica's streams: dealt infeeds, its own outfeeds, the communicator."""

    def __init__(self, infeeds, num_outfeeds, index, communicator):
        super().__init__(infeeds, num_outfeeds)
        self.index = index
        self.communicator = communicator

    def collective(self, op, values, params):
        if get_op(op).role == "replica_index":
            return self.communicator.replication_index(self.index)
        return self.communicator.all_reduce(self.index, values[0], params["reduction"],
                                            params["group_size"])


def combine_outfeeds(streams):
    """Per outfeed, its enqueues with a replica axis: element k is `[R, ...]` per array."""
    combined = []
    for q in range(len(streams[0].enqueued)):
        elements = [s.enqueued[q] for s in streams]
        combined.append([[np.stack(arrays) for arrays in zip(*same_step)]
                         for same_step in zip(*elements)])
    return combined


def run_replicas(engines, inputs, states, infeeds, num_outfeeds, group=None):
    """Runs one execution on every replica; returns (per-replica outputs, streams).

    `group` is the process group of a distributed run (None in one process). On any
    failure every replica is released, the infeeds get their elements back and the
    first replica's error is raised."""
    replicas = len(engines)
    communicator = (Communicator(replicas) if group is None
                    else ProcessCommunicator(replicas, group))
    dealers = [Dealer(infeed, replicas) for infeed in infeeds]
    streams = [ReplicaStreams([d.view(r) for d in dealers], num_outfeeds, r, communicator)
               for r in range(replicas)]
    outputs, errors = [None] * replicas, [None] * replicas

    def work(r):
        try:
            outputs[r] = engines[r].run(inputs, states[r], streams[r])
        except BaseException as e:  # noqa: BLE001 - re-raised by the caller's thread
            errors[r] = e
            communicator.abort()

    threads = [threading.Thread(target=work, args=(r,), name=f"ipu_keras-replica-{r}")
               for r in range(replicas)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    except BaseException:
        communicator.abort()
        for thread in threads:
            thread.join()
        for dealer in dealers:
            dealer.give_back()
        raise
    failed = [e for e in errors if e is not None]
    if failed:
        for dealer in dealers:
            dealer.give_back()
        first = next((e for e in failed if not isinstance(e, ReplicationError)), failed[0])
        raise first
    return outputs, streams
