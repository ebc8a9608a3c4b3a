"""Which pass of a pipeline stage an equation belongs to: forward or backward.

An equation is backward when TensorFlow made it to compute a gradient: its node is
under `gradient_tape/` (`tf.GradientTape`) or `gradients/` (`tf.gradients`, and the
gradient accumulation of `pipelining_ops`). The `pipeline` analysis times the passes
apart and the planner applies each pass's `PipelineStageOptions`.

An equation the `recompute` pass made is a forward equation run again in the backward
pass (its node under `recomputation/`): `is_recomputed`. Under RecomputeThenBackpropagate
the recomputation reruns the forward stage's own program (`recomputation/shared/`):
`shares_forward_code`.
"""

BACKWARD_MARKERS = ("gradient_tape/", "gradients/")
RECOMPUTED_MARKER = "recomputation/"
SHARED_MARKER = RECOMPUTED_MARKER + "shared/"


def is_backward(eqn):
    """Whether TensorFlow made `eqn` to compute a gradient."""
    node = eqn.source.node
    return any(node.startswith(m) or f"/{m}" in node for m in BACKWARD_MARKERS)


def is_recomputed(eqn):
    """Whether `eqn` is a forward equation recomputed for the backward pass."""
    return eqn.source.node.startswith(RECOMPUTED_MARKER)


def shares_forward_code(eqn):
    """Whether `eqn` reruns its forward equation's code (no code or vertices of its own)."""
    return eqn.source.node.startswith(SHARED_MARKER)
