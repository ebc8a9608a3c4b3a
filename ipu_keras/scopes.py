"""Placement scopes: `ipu_scope(device)`, `ipu_shard(index)` and `pipeline_stage(stage)`.

`ipu_shard` is the user's placement of ops on an IPU of a multi-IPU device;
`pipeline_stage` is how the pipelining APIs (`pipelining_ops.pipeline`, Keras stage
assignments) mark the ops of one computational stage. Both only record the current
placement (`current_shard()`, `current_stage()`) and, when TensorFlow is loaded, stamp
it on the TensorFlow ops created inside as the node attributes `_ipu_shard` and
`_ipu_stage` (through the default graph's attribute scope), which the tracer reads.
"""
import contextlib
import re
import sys

SHARD_ATTR = "_ipu_shard"
STAGE_ATTR = "_ipu_stage"
"""The TensorFlow node attributes that carry a placement to the tracer."""

_DEVICE = re.compile(r"^/device:IPU:(\d+)$")
_current_shard = [None]
_current_stage = [None]


@contextlib.contextmanager
def ipu_scope(device):
    """Places the code inside on the simulated IPU named `device` ("/device:IPU:N").

    In a TensorFlow 1 graph, variables made inside are resource variables (as the
    original's scope made them); ops made inside but not compiled with
    `ipu_compiler.compile` run on the CPU (a note says so once).
    """
    if not isinstance(device, str) or not _DEVICE.match(device):
        raise ValueError(
            f"ipu_scope expected a device name like '/device:IPU:0'. Received: device={device!r}"
        )
    from ipu_keras._src import tf1  # noqa: PLC0415 - TensorFlow only once a scope is entered

    if not tf1.in_graph_mode():
        yield
        return
    with tf1.resource_variables():
        yield


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

    from ipu_keras._src.tracer import placement

    placement.install()   # gradients of the ops made inside follow them

    return ops.get_default_graph()._attr_scope({name: attr_value_pb2.AttrValue(i=value)})
