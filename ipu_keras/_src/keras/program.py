"""One compiled Keras step (train, test or predict) for one batch signature.

A `StepProgram` traces the model's step function on an example batch, wraps it in the
counted device loop (`runtime/device_loop.py`), compiles it and keeps the session
that runs it; tracing, compiling and its first execution show their progress
(`driver/progress.py`). `run(batches)` stages the batches in the infeed, runs one execution of
`len(batches)` steps and returns every step's outputs from the outfeed. A pipelined
step's loop carries its schedule and depth (`pipeline`) for the compiler.
"""
import logging
import time

import numpy as np
import tensorflow as tf

from ipu_keras._src.device import config as ipu_config
from ipu_keras._src.runtime import outfeeds
from ipu_keras._src.driver.compile import compile_for_ipu
from ipu_keras._src.driver.progress import WorkProgress, tracing_callback
from ipu_keras._src.keras.boundary import to_device_array
from ipu_keras._src.runtime import Session, infeed_for
from ipu_keras._src.runtime.device_loop import counted_loop
from ipu_keras._src.tracer import trace

logger = logging.getLogger("ipu_keras")


class StagedInfeed:
    """An infeed whose elements the host stages before the execution starts."""

    def __init__(self):
        self.elements = []

    def load(self, elements):
        self.elements = list(reversed(elements))

    def pull(self):
        return self.elements.pop()


class StepOutfeed:
    """Collects every step's outputs of the last execution."""

    def __init__(self):
        self.elements = []

    def _deliver(self, elements):
        self.elements = elements


class StepProgram:
    def __init__(self, model, step_fn, example_batch, pipeline=None):
        start = time.perf_counter()
        cfg = ipu_config.get_active_config()
        name = f"{getattr(model, 'name', 'model')}_{getattr(step_fn, '__name__', 'step')}"
        # Tracing, compiling and the first execution show their progress (progress.py).
        self.progress = WorkProgress(name)
        with self.progress.stage("Tracing", unit="layer calls") as stage:
            traced = trace(step_fn, (tf.nest.map_structure(_device_leaf, example_batch),),
                           outfeed_queues=outfeeds.registry(),
                           on_progress=tracing_callback(stage))
        graph, _, _ = counted_loop(traced.graph, pipeline)
        self.target = cfg.target()
        self.executable = compile_for_ipu(graph, cfg, name, self.progress)
        self.infeed, self.outfeed = StagedInfeed(), StepOutfeed()
        infeeds = [infeed_for(h, spec.types) for h, spec in zip(traced.infeeds,
                                                                  traced.graph.infeeds)]
        self.session = Session(self.executable, traced.variables, infeeds + [self.infeed],
                               list(traced.outfeeds) + [self.outfeed],
                               strict=cfg.ipu_model.strict_tile_mode,
                               floating_point=cfg.floating_point_behaviour)
        self.output_structure = traced.output_structure
        self.compile_seconds = time.perf_counter() - start
        self.steps_run = 0

    def run(self, flat_batches):
        """Runs one step per flat batch in one execution; returns each step's outputs."""
        self.infeed.load(flat_batches)
        steps = len(flat_batches) // self.session.replicas   # one batch per replica a step
        progress, self.progress = self.progress, None
        if progress is None:
            self.session.run([np.int32(steps)])
        else:
            with progress.stage("Running", total=steps, unit="steps") as stage:
                self.session.run([np.int32(steps)])
                stage.set(steps, "first execution")
        self.steps_run = steps
        structure = self.output_structure
        return [tf.nest.pack_sequence_as(structure, list(e)) for e in self.outfeed.elements]


def _device_leaf(leaf):
    return None if leaf is None else to_device_array(leaf)
