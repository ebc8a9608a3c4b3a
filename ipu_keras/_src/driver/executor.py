"""Compile-and-run of a user function, cached per signature.

`run(fn, args, kwargs)` is what `ipu_compiler.compile` and `IPUStrategy.run` share:
trace (tracer), compile (compiler), run (runtime Session on the simulator). The
cache key holds everything that changes the program: the function, the shapes and
dtypes of tensor arguments, the identity or value of every other argument, and the
active IPU configuration. Repeated calls with the same key reuse the executable.

An entry lives as long as the objects its key names by identity: the function (for a
bound method, its object and function) and every non-tensor argument that can be
weakly referenced (iterators, queues, models). When one of them is collected, a
finalizer drops the entry, and with it the session, its infeeds and their threads.
The entry itself holds them weakly (the traced `ConcreteFunction`, which closes over
the function, is not kept), so ids in live keys are never reused. The most recently
compiled function alone is also kept until the next compile, for reports
(`last_compiled`), even if its owners are gone.
"""
import dataclasses
import inspect
import logging
import time
import weakref

import numpy as np
import tensorflow as tf

from ipu_keras._src.device import config as ipu_config
from ipu_keras._src.runtime import outfeeds
from ipu_keras._src.driver.compile import compile_for_ipu
from ipu_keras._src.driver.progress import WorkProgress, tracing_callback
from ipu_keras._src.placement import host_work
from ipu_keras._src.runtime import Session, infeed_for
from ipu_keras._src.tracer import trace
from ipu_keras._src.tracer.trace import split_arguments

logger = logging.getLogger("ipu_keras")

_CACHE = {}
_LAST = []  # the most recently compiled CompiledFunction, for reports


class CompiledFunction:
    """One traced and compiled function with the session that runs it."""

    def __init__(self, fn, args, kwargs, cfg, traced=None):
        start = time.perf_counter()
        name = getattr(fn, "__name__", "function")
        # Tracing, compiling and the first execution show their progress (progress.py).
        self.progress = WorkProgress(name)
        if traced is None:
            with self.progress.stage("Tracing", unit="layer calls") as stage:
                traced = trace(fn, args, kwargs, outfeed_queues=outfeeds.registry(),
                               on_progress=tracing_callback(stage))
        trace_seconds = time.perf_counter() - start
        target = cfg.target()
        executable = compile_for_ipu(traced.graph, cfg, name, self.progress)
        executable.info["trace_seconds"] = trace_seconds
        # The ConcreteFunction closes over `fn`; keeping it would keep the entry's owners alive.
        self.traced = dataclasses.replace(traced, concrete=None)
        self.executable = executable
        self.target = target
        infeeds = [infeed_for(handle, spec.types)
                   for handle, spec in zip(traced.infeeds, traced.graph.infeeds)]
        self.session = Session(executable, traced.variables, infeeds, traced.outfeeds,
                               strict=cfg.ipu_model.strict_tile_mode,
                               floating_point=cfg.floating_point_behaviour)
        self.compile_seconds = time.perf_counter() - start
        logger.info("Compiled '%s' for %s in %.2f s (%d equations).",
                    getattr(fn, "__name__", "function"), target.name, self.compile_seconds,
                    executable.info["equations"])

    def __call__(self, dense):
        progress, self.progress = self.progress, None
        if progress is None:
            outputs = self.session.run([np.asarray(x) for x in dense])
        else:
            with progress.stage("Running", total=1, unit="executions") as stage:
                outputs = self.session.run([np.asarray(x) for x in dense])
                stage.set(1, "first execution")
        structure = self.traced.output_structure
        if structure is None:
            return None
        return tf.nest.pack_sequence_as(structure, outputs, expand_composites=True)


def _leaf_key(leaf):
    if isinstance(leaf, (bool, int, float, str, type(None))):
        return (type(leaf).__name__, leaf)
    return ("id", id(leaf))


def _owners(fn, static):
    """The objects whose identity is part of the key: the function and the static leaves."""
    owners = [fn.__self__, fn.__func__] if inspect.ismethod(fn) else [fn]
    return owners + [leaf for leaf in static if _leaf_key(leaf)[0] == "id"]


def _owned_by(key, owners):
    """Drop the entry `key` when an owner is collected; the owners that cannot be weakly
    referenced are kept alive by the entry instead (their ids must stay theirs)."""
    strong = []
    for owner in owners:
        try:
            weakref.finalize(owner, _CACHE.pop, key, None)
        except TypeError:
            strong.append(owner)
    return strong


def compiled(fn, args=(), kwargs=None):
    """The CompiledFunction for this call signature, compiling it on first use."""
    dense, _, static = split_arguments(args, kwargs)
    cfg = ipu_config.get_active_config()
    owners = _owners(fn, static)
    key = (
        tuple(id(o) for o in owners[:2 if inspect.ismethod(fn) else 1]),
        tuple((np.shape(x), np.asarray(x).dtype.name if isinstance(x, np.ndarray)
               else x.dtype.name) for x in dense),
        tuple(_leaf_key(s) for s in static),
        str(tf.nest.map_structure(lambda _: 0, (tuple(args), dict(kwargs or {})))),
        repr(cfg.to_dict()),
    )
    entry = _CACHE.get(key)
    if entry is None:
        function = CompiledFunction(fn, args, kwargs, cfg)
        entry = _CACHE[key] = (function, _owned_by(key, owners))
        _LAST[:] = [function]
    return entry[0], dense


@host_work()  # tracing and the session's host side, whatever the user's device scope
def run(fn, args=(), kwargs=None):
    function, dense = compiled(fn, args, kwargs)
    return function(dense)


def host_tensor(value):
    """A result of the device as a tensor made on the host: on the CPU even inside an eager
    `ipu_scope`, whose tf.device names the IPU, a device TensorFlow itself has not (None
    and operations pass through)."""
    if value is None or isinstance(value, tf.Operation):
        return value
    with tf.device("/device:CPU:0"):
        return tf.convert_to_tensor(value)


def last_compiled():
    """The most recently compiled function (for reports), or None."""
    return _LAST[0] if _LAST else None
