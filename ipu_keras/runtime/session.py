"""A `Session` runs one compiled function on the simulated device, again and again.

It owns the host side of one executable: the engine built once from it, the infeeds
it reads, the variables it keeps in sync with TensorFlow and the outfeed queues it
fills. An execution is transactional: variables are written back and outfeed
elements delivered only if the whole execution completes, and the infeed elements a
failed or interrupted execution took are given back, so a failure (a dataset error, a
floating-point trap, Ctrl-C) leaves the host state as it was after the last completed
execution.

During an execution numpy's BLAS runs on one thread: the simulator's matmuls are
small and many, and a multi-threaded BLAS spinning beside TensorFlow's own threads
made them up to 60x slower on two cores.
"""
import itertools

import numpy as np
from threadpoolctl import ThreadpoolController

from ipu_keras import profiling
from ipu_keras.runtime.feeds import StreamSet
from ipu_keras.simulator.engine import Engine
from ipu_keras.simulator.strict import StrictEngine


_THREADPOOLS = []
_runs = itertools.count(1)


def _single_threaded_blas():
    if not _THREADPOOLS:
        _THREADPOOLS.append(ThreadpoolController())
    return _THREADPOOLS[0].limit(limits=1, user_api="blas")


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
        if floating_point is not None and hasattr(floating_point, "to_dict"):
            floating_point = floating_point.to_dict()
        self.engine = (StrictEngine if strict else Engine)(executable, floating_point)
        self.variables = variables
        self.written = [i for i, v in enumerate(executable.variables) if v["written"]]
        self.infeeds = list(infeeds)
        self.outfeed_queues = list(outfeeds)
        self.last_cycles = None
        self.run_index = 0

    def run(self, inputs):
        """Run the executable once on `inputs` (numpy arrays); returns its outputs."""
        state = [np.asarray(v.numpy()) for v in self.variables]
        streams = StreamSet(self.infeeds, len(self.outfeed_queues))
        try:
            with _single_threaded_blas():
                outputs = self.engine.run(inputs, state, streams)
        except BaseException:
            streams.give_back()
            raise
        for i in self.written:
            self.variables[i].assign(state[i])
        for q, elements in zip(self.outfeed_queues, streams.enqueued):
            q._deliver(elements)
        self.last_cycles = self.engine.cycles()
        profiling.record(self.executable, self.engine)
        self.run_index = next(_runs)
        return [np.asarray(o) for o in outputs]
