"""The TensorFlow 1 session path: compiled clusters, feeds and variables in a `tf.Graph`.

`in_graph_mode()` says whether a call is building a TF1 graph (not eager, not inside a
`tf.function`); the thin API modules (`ipu_compiler`, `loops`, the feed queues,
`scopes`, `utils`) then hand over to `cluster` and `feeds` here.
"""
import tensorflow as tf


def in_graph_mode():
    """True when building a TF1 graph: graph mode, and not inside a `tf.function`."""
    if tf.executing_eagerly() or tf.inside_function():
        return False
    return True
