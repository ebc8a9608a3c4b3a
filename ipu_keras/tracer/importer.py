"""Imports one TensorFlow graph (and the functions it calls) into an IR graph.

Walks the ops in creation order, which TensorFlow guarantees is topological and which
is the program order of their side effects. Only ops that an output or a side
effect needs are imported (TensorFlow prunes the same way), so dead shape
arithmetic with dynamic shapes never reaches an importer. Each op goes through the
importer registered for its type in `ipu_keras.ops`; the IR types it produces are
checked against TensorFlow's own shape inference.
"""
import heapq
import re

import tensorflow as tf

from ipu_keras import ops
from ipu_keras.errors import CompilationError, UnsupportedOpError
from ipu_keras.ir.graph import Graph, Source, Value
from ipu_keras.ir.types import DTYPES
from ipu_keras.ops.builder import Builder
from ipu_keras.ops.evaluate import fold_equation
from ipu_keras.tracer.node import Node, numpy_dtype, tensor_type
from ipu_keras.tracer.state import StateRef

# Stateful in TensorFlow's sense but free of effects we must keep.
_PURE_STATEFUL = {"ReadVariableOp", "VarHandleOp", "NoOp", "Placeholder", "Const"}
_SUFFIX = re.compile(r"(_\d+)+$")


class GraphImporter:
    """Shared state of one trace: resources, known layers, outfeed queues."""

    def __init__(self, state, layer_names=(), outfeed_queues=None):
        self.state = state
        self.layer_names = set(layer_names)
        self.outfeed_queues = outfeed_queues or {}
        self._consts = {}

    # -- used by Node ------------------------------------------------------------
    def layer_of(self, node_name):
        parts = node_name.split("/")[:-1]
        for part in reversed(parts):
            for candidate in (part, _SUFFIX.sub("", part)):
                if candidate in self.layer_names:
                    return candidate
        return ""

    def static_value(self, tensor, value):
        if isinstance(value, Value) and value.id in self._consts:
            return self._consts[value.id]
        return tf.get_static_value(tensor)

    def outfeed_queue(self, queue_id):
        return self.outfeed_queues[queue_id]

    def import_function(self, fn_name, args, graph):
        fn_graph = _find_function(graph, fn_name)
        inputs, env = [], {}
        for placeholder, arg in zip(fn_graph.inputs, args):
            if isinstance(arg, StateRef):
                env[placeholder.ref()] = arg
            else:
                value = Value(arg.type, placeholder.op.name)
                inputs.append(value)
                env[placeholder.ref()] = value
        outputs = [t for t in fn_graph.outputs if t.dtype != tf.resource]
        return self.import_graph(fn_graph, inputs, env, outputs)

    # -- the walk -----------------------------------------------------------------
    def import_graph(self, tf_graph, inputs, env, outputs):
        """IR graph computing `outputs` of `tf_graph`; `env` binds its placeholders."""
        b = Builder()
        for op in _needed_ops(tf_graph, outputs, self.outfeed_queues):
            if op.type == "Placeholder" and op.outputs[0].ref() in env:
                continue
            node = Node(op, [_lookup(env, t, op) for t in op.inputs], self)
            b.source = Source(op.name, node.layer)
            results = self._import_op(node, b)
            for tensor, value in zip(op.outputs, results):
                env[tensor.ref()] = value
        return Graph(inputs, [_lookup(env, t, None) for t in outputs], b.equations)

    def _import_op(self, node, b):
        importer = ops.get_importer(node.type)
        if importer is None:
            raise UnsupportedOpError(node.type, node.name, node.layer)
        _check_dtypes(node)
        first = len(b.equations)
        results = importer(node, b)
        if results is None or isinstance(results, Value):
            results = [] if results is None else [results]
        results = list(results)
        for eqn in b.equations[first:]:
            folded = [eqn.params["value"]] if eqn.op == "const" else fold_equation(
                eqn, self._consts)
            for value, array in zip(eqn.outputs, folded or ()):
                self._consts[value.id] = array
        _check_types(node, results)
        return results


def _find_function(graph, name):
    while graph is not None:
        fn = getattr(graph, "_functions", {}).get(name)
        if fn is not None:
            return fn.graph
        graph = getattr(graph, "outer_graph", None)
    raise CompilationError(f"The function '{name}' called by the traced graph was not found.")


def _lookup(env, tensor, consumer):
    try:
        return env[tensor.ref()]
    except KeyError:
        where = f" by '{consumer.name}'" if consumer is not None else ""
        raise CompilationError(
            f"The tensor '{tensor.name}' used{where} has no value: it is neither computed in "
            "the function nor bound to an input, a variable or a dataset iterator."
        ) from None


def is_effect(op, outfeed_queues):
    if op.type in ("Identity", "IdentityN"):
        return "_ipu_outfeed" in op.node_def.attr
    return op._is_stateful and op.type not in _PURE_STATEFUL


def _needed_ops(tf_graph, outputs, outfeed_queues):
    """Ops that outputs or effects depend on through data edges, in program order.

    Program order is creation order wherever that is topological. It is not always:
    TensorFlow adds inputs to a forward `While` when it builds its gradient, so each
    op is placed after its inputs and control inputs, the earliest-created ready op
    first.
    """
    all_ops = tf_graph.get_operations()
    needed = {}
    stack = [t.op for t in outputs] + [op for op in all_ops if is_effect(op, outfeed_queues)]
    while stack:
        op = stack.pop()
        if op._id not in needed:
            needed[op._id] = op
            stack.extend(t.op for t in op.inputs)
    waiting = {i: {p._id for p in _predecessors(op)} & needed.keys()
               for i, op in needed.items()}
    users = {i: [] for i in needed}
    for i, preds in waiting.items():
        for p in preds:
            users[p].append(i)
    ready = [i for i, preds in waiting.items() if not preds]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(needed[i])
        for user in users[i]:
            waiting[user].discard(i)
            if not waiting[user]:
                heapq.heappush(ready, user)
    assert len(order) == len(needed), "the traced graph has a cycle"
    return order


def _predecessors(op):
    return [t.op for t in op.inputs] + list(op.control_inputs)


def _check_dtypes(node):
    for tensor in node.op.outputs:
        if tensor.dtype in (tf.resource, tf.variant):
            continue
        if tensor.dtype.name not in DTYPES:
            raise UnsupportedOpError(
                node.type, node.name, node.layer,
                hint=f"the simulated IPU has no {tensor.dtype.name} type (it supports "
                     f"{', '.join(DTYPES)})")


def _check_types(node, results):
    if len(results) != len(node.op.outputs):
        raise CompilationError(
            f"The importer of {node.type} gave {len(results)} results for "
            f"{len(node.op.outputs)} outputs of '{node.name}'."
        )
    for tensor, value in zip(node.op.outputs, results):
        if tensor.dtype in (tf.resource, tf.variant) or isinstance(value, StateRef):
            continue
        expected = tensor_type(tensor)
        dtype = numpy_dtype(tensor.dtype)
        if value.type.dtype != dtype or (expected is not None and expected != value.type):
            raise CompilationError(
                f"The importer of {node.type} gave {value.type} for '{tensor.name}', "
                f"which TensorFlow types as {dtype}{tensor.shape}."
            )
