"""Which Keras layer each traced op belongs to, so errors and reports can name it.

Keras runs a layer call under a name scope made unique with a `_N` suffix, so scope
names cannot be matched to layer names (inside a trace, layer `conv2d` may run under
`conv2d_1`, the scope of another layer's name). Instead, while tracing,
`LayerScopes.recording()` wraps `Layer.__call__` and notes the ops each call created:
an op belongs to the innermost layer whose call created it. Ops created outside any
call (the gradients, bodies of loops a layer built) belong to the layer that owns the
longest name scope they sit in, once the `gradient_tape/` prefix is set aside.
"""
import contextlib

import tensorflow as tf

_GRADIENT_PREFIX = "gradient_tape/"


class LayerScopes:
    def __init__(self):
        self.ops = {}     # op name -> layer name
        self.scopes = {}  # name scope -> layer name

    @contextlib.contextmanager
    def recording(self):
        try:
            from keras.src.layers.layer import Layer
        except ImportError:  # plain TensorFlow functions need no Keras
            yield self
            return
        original = Layer.__call__
        scopes = self

        def call(layer, *args, **kwargs):
            graph = tf.compat.v1.get_default_graph()
            first = len(graph.get_operations())
            try:
                return original(layer, *args, **kwargs)
            finally:
                scopes._claim(graph.get_operations()[first:], layer.name)

        Layer.__call__ = call
        try:
            yield self
        finally:
            Layer.__call__ = original

    def _claim(self, ops, layer):
        for op in ops:
            if op.name not in self.ops:
                self.ops[op.name] = layer
                self.scopes.setdefault(op.name.rpartition("/")[0], layer)

    def layer_of(self, node_name):
        """The Keras layer of a node name, or "" when it belongs to none."""
        name = node_name
        while name.startswith(_GRADIENT_PREFIX):
            name = name[len(_GRADIENT_PREFIX):]
        while name:
            layer = self.ops.get(name) or self.scopes.get(name)
            if layer:
                return layer
            name = name.rpartition("/")[0]
        return ""
