"""A `Session` runs one compiled function on the simulated device, again and again.

It owns the host side of one executable: the engine built once from it, the infeeds
it reads, the variables it keeps in sync with TensorFlow and the outfeed queues it
fills. An execution is transactional: variables are written back and outfeed
elements delivered only if the whole execution completes, and the infeed elements a
failed or interrupted execution took are given back, so a failure (a dataset error, a
floating-point trap, Ctrl-C) leaves the host state as it was after the last completed
execution.

With more IPUs than the executable's shards, the session runs R replicas of it at once
(`runtime/replicas.py`): outfeeds gain a replica axis, each replica keeps its own
variables on the device between executions, and the host sees replica 0's.

During an execution numpy's BLAS runs on one thread and large kernels are split over
the cores when one replica runs (`ops/cores.py`). The first session makes freed
host memory stay on the heap for the next execution (`runtime/host_heap.py`).
"""
import itertools

import numpy as np

from ipu_keras._src.reports import profile
from ipu_keras._src.runtime.process_group import active_group
from ipu_keras._src.ops import cores
from ipu_keras._src.placement import host_work
from ipu_keras._src.runtime.feeds import StreamSet
from ipu_keras._src.runtime.host_heap import keep_freed_memory
from ipu_keras._src.runtime.replicas import combine_outfeeds, replication_factor, run_replicas
from ipu_keras._src.runtime.variables import HostVariables
from ipu_keras._src.simulator.engine import Engine
from ipu_keras._src.simulator.strict import StrictEngine


_runs = itertools.count(1)


class Session:
    """Runs one executable.

    Args:
        executable: The compiled `Executable`.
        variables: The `tf.Variable` behind each of the executable's variables.
        infeeds: One object per infeed with `pull() -> [arrays]`.
        outfeeds: One object per outfeed with `_deliver([[arrays], ...])`, called with
            every element enqueued during an execution once it has completed.
        strict: Run every compute set tile by tile as well and check it against the
            vectorised run (`IPUConfig.ipu_model.strict_tile_mode`; small targets only).
        floating_point: `IPUConfig.floating_point_behaviour` (the node or a dict of its
            flags): which floating-point exceptions trap (see `simulator/engine.py`).
    """

    def __init__(self, executable, variables, infeeds, outfeeds, strict=False,
                 floating_point=None):
        self.executable = executable
        keep_freed_memory()
        if floating_point is not None and hasattr(floating_point, "to_dict"):
            floating_point = floating_point.to_dict()
        engine = StrictEngine if strict else Engine
        self.replicas = replication_factor(executable)
        self.engines = [engine(executable, floating_point) for _ in range(self.replicas)]
        self.engine = self.engines[0]
        self._replica_states = self._written_back = None
        self.variables = variables
        self._host_variables = HostVariables(variables)
        self.written = [i for i, v in enumerate(executable.variables) if v["written"]]
        self.infeeds = list(infeeds)
        self.outfeed_queues = list(outfeeds)
        self.last_cycles = None
        self.run_index = 0

    @host_work()  # the variable sync and feeds are host work, whatever the device scope
    def run(self, inputs):
        """Run the executable once on `inputs` (numpy arrays); returns its outputs (those
        of replica 0 when replicated)."""
        state = self._host_variables.read()
        group = active_group()
        if self.replicas > 1 or group is not None:
            outputs, enqueued = self._run_replicas(inputs, state, group)
        else:
            streams = StreamSet(self.infeeds, len(self.outfeed_queues))
            try:
                with cores.execution():
                    outputs = self.engine.run(inputs, state, streams)
            except BaseException:
                streams.give_back()
                raise
            enqueued = streams.enqueued
        self._host_variables.write(self.written, state)
        for q, elements in zip(self.outfeed_queues, enqueued):
            q._deliver(elements)
        self.last_cycles = self.engine.cycles()
        profile.record(self.executable, self.engine)
        self.run_index = next(_runs)
        return [np.asarray(o) for o in outputs]

    def _run_replicas(self, inputs, state, group=None):
        """Runs every replica; `state` becomes replica 0's. Returns (outputs, enqueued).

        Like the IPU, each replica keeps its own variables between executions (the host
        sees replica 0's); a variable the host changed since (a Keras metric reset, a
        `set_weights`) is given to every replica again. A distributed run's first
        execution takes its variables from instance 0."""
        kept, snapshot = self._replica_states, self._written_back
        if group is not None and kept is None:   # a distributed run starts from equal weights
            state[:] = group.broadcast(state)
        states = [state]
        for r in range(1, self.replicas):
            states.append([
                kept[r][i] if kept and np.array_equal(value, snapshot[i])
                else np.array(value, copy=True) for i, value in enumerate(state)])
        with cores.execution(widen=False):   # the replicas' threads share the cores
            outputs, streams = run_replicas(self.engines, inputs, states, self.infeeds,
                                            len(self.outfeed_queues), group)
        self._replica_states = states
        self._written_back = [np.array(a, copy=True) for a in state]
        if self.replicas == 1:   # one local replica of a distributed run: no replica axis
            return outputs[0], streams[0].enqueued
        return outputs[0], combine_outfeeds(streams)
