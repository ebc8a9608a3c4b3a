"""Placement of TensorFlow ops: which shard (IPU) and pipeline stage each op belongs to.

The placement scopes `ipu_shard(index)` and `pipeline_stage(stage)` (`ipu.scopes`
re-exports them; the pipelining APIs and Keras stage assignments open them too) record
the current placement (`current_shard()`, `current_stage()`) and, when TensorFlow is
loaded, stamp it on the TensorFlow ops created inside as the node attributes
`_ipu_shard` / `_ipu_stage` (through the default graph's attribute scope), which the
tracer reads with `placement_of`. Two rules complete that:

* ops inside a function called by a placed op (a while body, a branch) take the
  placement of that op unless they carry their own (the importer applies it);
* gradient ops take the placement of the forward op they differentiate. TensorFlow
  looks every gradient function up in its registry, with the forward op (or, under
  `tf.GradientTape` in a graph, a stand-in holding the forward op's real outputs) as
  the first argument, whichever API asked for the gradient. `install()` wraps that
  look-up once per process so each gradient function runs inside the forward op's
  placement scopes. Gradients of unplaced ops are untouched.

This module stands below the tracer and imports TensorFlow only once TensorFlow is
loaded, so `ipu.scopes` imports without it.
"""
import contextlib
import functools
import json
import sys
import threading

SHARD_ATTR = "_ipu_shard"
STAGE_ATTR = "_ipu_stage"
"""The TensorFlow node attributes that carry a placement to the tracer."""

_current_shard = [None]
_current_stage = [None]


@contextlib.contextmanager
def ipu_shard(index):
    """Places the ops created inside on shard `index` (an IPU of a multi-IPU device)."""
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ValueError(f"ipu_shard expected a non-negative int. Received: index={index!r}")
    previous, _current_shard[0] = _current_shard[0], index
    try:
        with _op_attribute(SHARD_ATTR, index):
            yield
    finally:
        _current_shard[0] = previous


@contextlib.contextmanager
def pipeline_stage(stage):
    """Marks the ops created inside as computational stage `stage` of a pipeline."""
    if isinstance(stage, bool) or not isinstance(stage, int) or stage < 0:
        raise ValueError(f"pipeline_stage expected a non-negative int. Received: stage={stage!r}")
    previous, _current_stage[0] = _current_stage[0], stage
    try:
        with _op_attribute(STAGE_ATTR, stage):
            yield
    finally:
        _current_stage[0] = previous


def current_shard():
    """The shard of the innermost `ipu_shard` scope, or None outside any."""
    return _current_shard[0]


def current_stage():
    """The stage of the innermost `pipeline_stage` scope, or None outside any."""
    return _current_stage[0]


def _op_attribute(name, value):
    """Stamps `name=value` on the TensorFlow ops created inside (if TensorFlow is loaded)."""
    if "tensorflow" not in sys.modules:
        return contextlib.nullcontext()
    from tensorflow.core.framework import attr_value_pb2
    from tensorflow.python.framework import ops

    install()   # gradients of the ops made inside follow them

    return ops.get_default_graph()._attr_scope({name: attr_value_pb2.AttrValue(i=value)})


def placement_of(op):
    """(shard, stage) stamped on a TensorFlow op; each None when absent."""
    attrs = op.node_def.attr
    return tuple(attrs[name].i if name in attrs else None
                 for name in (SHARD_ATTR, STAGE_ATTR))


PIPELINE_ATTRS = ("_ipu_pipeline_schedule", "_ipu_pipeline_depth")
PIPELINE_OPTIONS_ATTR = "_ipu_pipeline_stage_options"
PIPELINE_RECOMPUTATION_ATTR = "_ipu_pipeline_recomputation"
SCHEDULES = ("Grouped", "Interleaved", "Sequential")
RECOMPUTATION_MODES = ("Auto", "RecomputeThenBackpropagate",
                       "RecomputeAndBackpropagateInterleaved")
"""`pipelining_ops.RecomputationMode`'s names, by value."""


def pipeline_of(op):
    """{"schedule", "depth", "recomputation"} stamped on a pipeline's micro-batch loop,
    else None."""
    attrs = op.node_def.attr
    if PIPELINE_ATTRS[0] not in attrs:
        return None
    info = {"schedule": SCHEDULES[attrs[PIPELINE_ATTRS[0]].i],
            "depth": int(attrs[PIPELINE_ATTRS[1]].i)}
    if PIPELINE_RECOMPUTATION_ATTR in attrs:
        info["recomputation"] = RECOMPUTATION_MODES[attrs[PIPELINE_RECOMPUTATION_ATTR].i]
    if PIPELINE_OPTIONS_ATTR in attrs:
        info["stage_options"] = json.loads(attrs[PIPELINE_OPTIONS_ATTR].s.decode())
    return info


def _forward_placement(op):
    """The placement of the forward op behind a gradient function's `op` argument.

    A real op carries it. The tape's stand-in keeps the forward op's outputs when the
    gradient needs them; otherwise its inputs, whose consumers of the forward op's type
    are the candidates (they must agree).
    """
    if hasattr(op, "node_def"):
        return placement_of(op)
    for tensor in getattr(op, "outputs", None) or ():
        if _is_graph_tensor(tensor):
            return placement_of(tensor.op)
    found = set()
    for tensor in getattr(op, "inputs", None) or ():
        if _is_graph_tensor(tensor):
            found |= {placement_of(c) for c in tensor.consumers() if c.type == op.type}
    return found.pop() if len(found) == 1 else (None, None)


def _is_graph_tensor(tensor):
    return hasattr(tensor, "consumers") and hasattr(getattr(tensor, "op", None), "node_def")


def _placed(grad_fn):
    @functools.wraps(grad_fn)
    def gradient(op, *grads):
        shard, stage = _forward_placement(op)
        with _scope(ipu_shard, shard), _scope(pipeline_stage, stage):
            return grad_fn(op, *grads)

    gradient._ipu_placed = True
    return gradient


def _scope(make, value):
    return contextlib.nullcontext() if value is None else make(value)


def install():
    """Makes gradient ops follow the placement of their forward op (idempotent).

    TensorFlow's registry object is shared by every caller and has fixed slots, so it is
    given a subclass whose `lookup` wraps what the original finds.
    """
    from tensorflow.python.framework import ops

    registry = ops._gradient_registry
    placed = _placed_registry()
    if isinstance(registry, placed):
        return
    registry.__class__ = placed


@functools.cache
def _placed_registry():
    """The subclass of TensorFlow's registry class (made once TensorFlow is loaded)."""
    from tensorflow.python.framework import registry as tf_registry

    class _PlacedRegistry(tf_registry.Registry):
        __slots__ = ()

        def lookup(self, name):
            fn = super().lookup(name)
            if fn is None or getattr(fn, "_ipu_placed", False):
                return fn
            return _placed(fn)

    return _PlacedRegistry


_host = threading.local()


@contextlib.contextmanager
def host_work():
    """Inside (a context or a decorator): eager ops are ipu_keras's own host work, such as
    the runtime's variable sync, which runs on the host even when the user's code placed
    it under `tf.device('/device:IPU:0')` (see `in_host_work`)."""
    _host.depth = getattr(_host, "depth", 0) + 1
    try:
        yield
    finally:
        _host.depth -= 1


def in_host_work():
    """True inside `host_work()` on this thread: the eager IPU device leaves ops alone."""
    return getattr(_host, "depth", 0) > 0
