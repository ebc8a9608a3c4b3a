"""Placement of TensorFlow ops: which shard (IPU) and pipeline stage each op belongs to.

The user's scopes (`scopes.ipu_shard`, `scopes.pipeline_stage`) stamp the attributes
`_ipu_shard` / `_ipu_stage` on the ops created inside them. Two rules complete that:

* ops inside a function called by a placed op (a while body, a branch) take the
  placement of that op unless they carry their own (the importer applies it);
* gradient ops take the placement of the forward op they differentiate. TensorFlow
  looks every gradient function up in its registry, with the forward op (or, under
  `tf.GradientTape` in a graph, a stand-in holding the forward op's real outputs) as
  the first argument, whichever API asked for the gradient. `install()` wraps that
  look-up once per process so each gradient function runs inside the forward op's
  placement scopes. Gradients of unplaced ops are untouched.
"""
import contextlib
import functools
import json

from tensorflow.python.framework import ops
from tensorflow.python.framework import registry as tf_registry

from ipu_keras import scopes

def placement_of(op):
    """(shard, stage) stamped on a TensorFlow op; each None when absent."""
    attrs = op.node_def.attr
    return tuple(attrs[name].i if name in attrs else None
                 for name in (scopes.SHARD_ATTR, scopes.STAGE_ATTR))


PIPELINE_ATTRS = ("_ipu_pipeline_schedule", "_ipu_pipeline_depth")
PIPELINE_OPTIONS_ATTR = "_ipu_pipeline_stage_options"
SCHEDULES = ("Grouped", "Interleaved", "Sequential")


def pipeline_of(op):
    """{"schedule", "depth"} stamped on a pipeline's micro-batch loop, else None."""
    attrs = op.node_def.attr
    if PIPELINE_ATTRS[0] not in attrs:
        return None
    info = {"schedule": SCHEDULES[attrs[PIPELINE_ATTRS[0]].i],
            "depth": int(attrs[PIPELINE_ATTRS[1]].i)}
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
        with _scope(scopes.ipu_shard, shard), _scope(scopes.pipeline_stage, stage):
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
    registry = ops._gradient_registry
    if isinstance(registry, _PlacedRegistry):
        return
    registry.__class__ = _PlacedRegistry


class _PlacedRegistry(tf_registry.Registry):
    __slots__ = ()

    def lookup(self, name):
        fn = super().lookup(name)
        if fn is None or getattr(fn, "_ipu_placed", False):
            return fn
        return _placed(fn)
