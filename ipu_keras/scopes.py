"""Placement scopes: `ipu_scope(device)`, `ipu_shard(index)` and `pipeline_stage(stage)`.

`ipu_shard` is the user's placement of ops on an IPU of a multi-IPU device;
`pipeline_stage` is how the pipelining APIs (`pipelining_ops.pipeline`, Keras stage
assignments) mark the ops of one computational stage. Both only record the current
placement (`current_shard()`, `current_stage()`) and, when TensorFlow is loaded, stamp
it on the TensorFlow ops created inside as the node attributes `_ipu_shard` and
`_ipu_stage`, which the tracer reads; they live in `ipu_keras/_src/placement.py`.
"""
import contextlib
import re

from ipu_keras._src.placement import (  # noqa: F401 - the placement scopes, re-exported
    SHARD_ATTR, STAGE_ATTR, current_shard, current_stage, ipu_shard, pipeline_stage,
)


_DEVICE = re.compile(r"^/device:IPU:(\d+)$")


@contextlib.contextmanager
def ipu_scope(device):
    """Places the code inside on the simulated IPU named `device` ("/device:IPU:N").

    In a TensorFlow 1 graph, variables made inside are resource variables (as the
    original's scope made them), and the ops made inside but not compiled with
    `ipu_compiler.compile` are clustered for the simulated IPU, as the original's IPU
    device clustered them: `Session.run` runs each cluster there
    (`ipu_keras/_src/tf1/auto_cluster.py`). In eager code it is `tf.device(device)`:
    eager ops inside run on the IPU one by one (`ipu_keras/_src/driver/eager.py`).
    """
    if not isinstance(device, str) or not _DEVICE.match(device):
        raise ValueError(
            f"ipu_scope expected a device name like '/device:IPU:0'. Received: device={device!r}"
        )
    from ipu_keras._src import tf1  # noqa: PLC0415 - TensorFlow only once a scope is entered

    if not tf1.in_graph_mode():
        import tensorflow as tf  # noqa: PLC0415 - loaded already: not in graph mode

        from ipu_keras._src.driver import eager  # noqa: PLC0415 - as TensorFlow

        eager.install()
        # Eagerly, the ops inside run on the IPU one by one, as under tf.device (the eager
        # IPU device); inside a tf.function, where compiling places the whole function,
        # the scope changes nothing.
        with tf.device(device) if tf.executing_eagerly() else contextlib.nullcontext():
            yield
        return
    from ipu_keras._src.tf1 import auto_cluster  # noqa: PLC0415 - TensorFlow, as above

    with tf1.resource_variables(), auto_cluster.ipu_ops_clustered(device):
        yield


__all__ = ["current_shard", "current_stage", "ipu_scope", "ipu_shard", "pipeline_stage"]
