"""Which pass of a pipeline stage an equation belongs to: forward or backward.

An equation is backward when TensorFlow made it to compute a gradient: its node is
under `gradient_tape/` (`tf.GradientTape`) or `gradients/` (`tf.gradients`, and the
gradient accumulation of `pipelining_ops`). The `pipeline` analysis times the passes
apart and the planner applies each pass's `PipelineStageOptions`.
"""

BACKWARD_MARKERS = ("gradient_tape/", "gradients/")


def is_backward(eqn):
    """Whether TensorFlow made `eqn` to compute a gradient."""
    node = eqn.source.node
    return any(node.startswith(m) or f"/{m}" in node for m in BACKWARD_MARKERS)
