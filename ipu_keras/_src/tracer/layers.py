"""Which Keras layer each traced op belongs to, so errors and reports can name it.

Keras runs a layer call under a name scope made unique with a `_N` suffix, so scope
names cannot be matched to layer names (inside a trace, layer `conv2d` may run under
`conv2d_1`, the scope of another layer's name). Instead, while tracing,
`LayerScopes.recording()` wraps `Layer.__call__` and notes the ops each call created:
an op belongs to the innermost layer whose call created it. Ops created outside any
call (the gradients, bodies of loops a layer built) belong to the layer that owns the
longest name scope they sit in, once the `gradient_tape/` prefix is set aside.

The optimizer's update runs outside every layer call, so its ops belong to no layer
by name. `LayerScopes` also notes which layer owns each variable (the innermost layer
whose weights hold it), and `attribute_updates` gives an op of no layer the layer of the
variables its results are written to, when they all belong to one layer (Adam's `sqrt`
and `sub` for a kernel belong to the kernel's layer; the learning rate, used for every
variable, stays unattributed); a value written to a variable reaches wherever that
variable is read, in any body (Adam's moments, gradient accumulators read by the weight
update's branch), and a write to a variable of no layer takes the layer of the op that
computed the value written.
"""
import contextlib

import tensorflow as tf

from ipu_keras._src.ir.graph import Source
from ipu_keras._src.ops.registry import get_op

_GRADIENT_PREFIX = "gradient_tape/"


class LayerScopes:
    def __init__(self):
        self.ops = {}     # op name -> layer name
        self.scopes = {}  # name scope -> layer name
        self.variables = {}  # id of a TensorFlow variable -> layer name

    @contextlib.contextmanager
    def recording(self, on_call=None):
        """Notes the ops of each layer call while the body runs; `on_call(layer_name)`, if
        given, is called after each call (the tracer's progress)."""
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
                scopes._own(layer)
                if on_call is not None:
                    on_call(layer.name)

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

    def _own(self, layer):
        for weight in getattr(layer, "weights", ()):
            for var in (weight, getattr(weight, "value", None)):
                if var is not None:
                    self.variables.setdefault(id(var), layer.name)

    def variable_layers(self, variables):
        """The layer owning each of `variables` (TensorFlow variables), "" for none."""
        return [self.variables.get(id(v), "") for v in variables]

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


def attribute_updates(graph, variable_layers):
    """Gives ops of no layer the layer of the variables they update (module docstring).

    Args:
        graph: The traced IR graph; its equations' `source` are replaced in place.
        variable_layers: The layer of each of the graph's variables ("" for none).
    """
    read_reach = {}   # variable -> layers reached from where it is read, at any depth
    for _ in range(2):   # the second pass sees reads in deeper or later levels
        _attribute_level(graph, variable_layers, read_reach)


def _attribute_level(graph, variable_layers, read_reach):
    """The layers of the variables written in `graph` (at any depth), after attributing."""
    users = {}
    for eqn in graph.equations:
        for value in eqn.inputs:
            users.setdefault(value.id, []).append(eqn)
    reach, written = {}, set()
    for eqn in reversed(graph.equations):
        layers, role = set(), get_op(eqn.op).role
        for sub in eqn.subgraphs():
            layers |= _attribute_level(sub, variable_layers, read_reach)
        if role == "variable_write":   # and where the variable is read
            layers.add(variable_layers[eqn.params["var"]])
            layers |= read_reach.get(eqn.params["var"], set())
        for value in eqn.outputs:
            for user in users.get(value.id, ()):
                layers |= reach[id(user)]
        layers.discard("")
        reach[id(eqn)] = layers
        if role == "variable_read":
            read_reach.setdefault(eqn.params["var"], set()).update(layers)
        written |= layers
        if not eqn.source.layer and len(layers) == 1:
            eqn.source = Source(eqn.source.node, next(iter(layers)))
    producers = {v.id: eqn for eqn in graph.equations for v in eqn.outputs}
    for eqn in graph.equations:
        if not eqn.source.layer and get_op(eqn.op).role == "variable_write":
            producer = producers.get(eqn.inputs[0].id)
            if producer is not None and producer.source.layer:
                eqn.source = Source(eqn.source.node, producer.source.layer)
    return written
