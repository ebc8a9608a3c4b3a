"""`ipu.sharding`: Graphcore's helpers for sharded graphs.

Placement itself is `scopes.ipu_shard`; gradient ops always follow the shard of the
forward op they differentiate (`_src/placement.py`), under `tf.GradientTape` as under
`tf.gradients`, so the switch below only keeps ported code running.
"""


def enable_sharded_gradient_tape():
    """Makes `tf.GradientTape` place gradient ops on their forward op's shard.

    Already the behaviour here; calling it again is harmless.
    """
    from ipu_keras._src import placement

    placement.install()


__all__ = ["enable_sharded_gradient_tape"]
