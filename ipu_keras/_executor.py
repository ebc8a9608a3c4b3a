"""Compile-and-run of a user function, cached per signature.

`run(fn, args, kwargs)` is what `ipu_compiler.compile` and `IPUStrategy.run` share:
trace (tracer), compile (compiler), run (runtime Session on the simulator). The
cache key holds everything that changes the program: the function, the shapes and
dtypes of tensor arguments, the identity or value of every other argument, and the
active IPU configuration. Repeated calls with the same key reuse the executable.
"""
import logging
import time

import numpy as np
import tensorflow as tf

from ipu_keras import config as ipu_config
from ipu_keras import ipu_outfeed_queue
from ipu_keras._compile import compile_for_ipu
from ipu_keras.runtime import Session, infeed_for
from ipu_keras.tracer import trace
from ipu_keras.tracer.trace import split_arguments

logger = logging.getLogger("ipu_keras")

_CACHE = {}


class CompiledFunction:
    """One traced and compiled function with the session that runs it."""

    def __init__(self, fn, args, kwargs, cfg, traced=None):
        start = time.perf_counter()
        if traced is None:
            traced = trace(fn, args, kwargs, outfeed_queues=ipu_outfeed_queue.registry())
        trace_seconds = time.perf_counter() - start
        target = cfg.target()
        executable = compile_for_ipu(traced.graph, cfg, getattr(fn, "__name__", "function"))
        executable.info["trace_seconds"] = trace_seconds
        self.traced = traced
        self.executable = executable
        self.target = target
        infeeds = [infeed_for(handle, spec.types)
                   for handle, spec in zip(traced.infeeds, traced.graph.infeeds)]
        self.session = Session(executable, traced.variables, infeeds, traced.outfeeds,
                               strict=cfg.ipu_model.strict_tile_mode)
        self.compile_seconds = time.perf_counter() - start
        logger.info("Compiled '%s' for %s in %.2f s (%d equations).",
                    getattr(fn, "__name__", "function"), target.name, self.compile_seconds,
                    executable.info["equations"])

    def __call__(self, dense):
        outputs = self.session.run([np.asarray(x) for x in dense])
        structure = self.traced.output_structure
        if structure is None:
            return None
        return tf.nest.pack_sequence_as(structure, outputs, expand_composites=True)


def _leaf_key(leaf):
    if isinstance(leaf, (bool, int, float, str, type(None))):
        return (type(leaf).__name__, leaf)
    return ("id", id(leaf))


def compiled(fn, args=(), kwargs=None):
    """The CompiledFunction for this call signature, compiling it on first use."""
    dense, _, static = split_arguments(args, kwargs)
    cfg = ipu_config.get_active_config()
    key = (
        id(fn),
        tuple((np.shape(x), np.asarray(x).dtype.name if isinstance(x, np.ndarray)
               else x.dtype.name) for x in dense),
        tuple(_leaf_key(s) for s in static),
        str(tf.nest.map_structure(lambda _: 0, (tuple(args), dict(kwargs or {})))),
        repr(cfg.to_dict()),
    )
    entry = _CACHE.get(key)
    if entry is None:
        entry = _CACHE[key] = (CompiledFunction(fn, args, kwargs, cfg), fn, static)
    return entry[0], dense


def run(fn, args=(), kwargs=None):
    function, dense = compiled(fn, args, kwargs)
    return function(dense)


def last_compiled():
    """The most recently compiled function (for reports), or None."""
    return next(reversed(_CACHE.values()))[0] if _CACHE else None
