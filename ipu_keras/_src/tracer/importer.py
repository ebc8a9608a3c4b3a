"""Imports one TensorFlow graph (and the functions it calls) into an IR graph.

Walks the ops in creation order, which TensorFlow guarantees is topological and which
is the program order of their side effects. Only ops that an output or a side
effect needs are imported (TensorFlow prunes the same way), so dead shape
arithmetic with dynamic shapes never reaches an importer. Each op goes through the
importer registered for its type in `ipu_keras._src.ops`; the IR types it produces are
checked against TensorFlow's own shape inference.

Owns the walk, the binding of function inputs, and the compile-time facts of the
values imported so far (`tracer.facts`: constants and uniform lists, propagated
through TensorLists, calls, conditionals and while loops), which `Node.static`
answers from, and from which `tracer.shapes` re-infers output shapes TensorFlow left
unknown. The ops themselves are left to their importers in `ipu_keras._src.ops`.
"""
import heapq

import tensorflow as tf
from tensorflow.python.framework.function_def_to_graph import function_def_to_graph

from ipu_keras._src import ops
from ipu_keras.errors import CompilationError, UnsupportedOpError
from ipu_keras._src.ir.graph import Graph, Source, Value
from ipu_keras._src.ir.types import DTYPES
from ipu_keras._src.ops.builder import Builder
from ipu_keras._src.ops.evaluate import fold_equation
from ipu_keras._src.tracer import facts as _facts
from ipu_keras._src.tracer.layers import LayerScopes
from ipu_keras._src import placement
from ipu_keras._src.tracer.node import Node, numpy_dtype, tensor_type
from ipu_keras._src.tracer.shapes import infer_types
from ipu_keras._src.tracer.state import StateRef

placement.install()

# Stateful in TensorFlow's sense but free of effects we must keep.
_PURE_STATEFUL = {"ReadVariableOp", "VarHandleOp", "NoOp", "Placeholder", "Const"}


class GraphImporter:
    """Shared state of one trace: resources, the layers ops belong to, outfeed queues."""

    def __init__(self, state, layers=None, outfeed_queues=None):
        self.state = state
        self.layers = layers or LayerScopes()
        self.outfeed_queues = outfeed_queues or {}
        self.facts = _facts.Facts()
        self.placement = (None, None)   # of the op whose functions are being imported

    # -- used by Node ------------------------------------------------------------
    def layer_of(self, node_name):
        return self.layers.layer_of(node_name)

    def static_value(self, tensor, value):
        const = self.facts.const(value)
        return const if const is not None else tf.get_static_value(tensor)

    def infer_types(self, op, inputs):
        """Output types of `op` that TensorFlow left unknown, from the facts of `inputs`."""
        return infer_types(op, inputs, self.facts)

    def outfeed_queue(self, queue_id):
        return self.outfeed_queues[queue_id]

    def import_function(self, fn_name, args, graph, assumed=None):
        """Import function `fn_name` with its inputs bound to `args` (IR values or refs).

        Its inputs satisfy the facts `assumed` (one per arg), by default the facts of
        `args`, which hold for a function that runs once per call.
        """
        fn_graph = _find_function(graph, fn_name)
        if assumed is None:
            assumed = [self.facts.of(a) for a in args]
        inputs, env = [], {}
        for placeholder, arg, fact in zip(fn_graph.inputs, args, assumed):
            if isinstance(arg, StateRef):
                env[placeholder.ref()] = arg
            else:
                value = Value(arg.type, placeholder.op.name)
                self.facts.assume(value, fact)
                inputs.append(value)
                env[placeholder.ref()] = value
        outputs = [t for t in fn_graph.outputs if t.dtype != tf.resource]
        return self.import_graph(fn_graph, inputs, env, outputs)

    def import_loop(self, cond_name, body_name, args, graph):
        """Import a while loop's cond and body under its loop-invariant facts.

        Returns `(initial facts of args, cond, body)`; see `tracer.facts.import_loop`.
        """
        initial = [self.facts.of(a) for a in args]
        fn_graph = _find_function(graph, body_name)
        start = [f._replace(const=None) if f.const is not None and _recurrent(fn_graph, i)
                 else f for i, f in enumerate(initial)]
        passed = [f if _passed_through(fn_graph, i) else _facts.UNKNOWN
                  for i, f in enumerate(initial)]
        assumed, body = _facts.import_loop(
            self.facts, lambda facts: self.import_function(body_name, args, graph, facts),
            args, start, passed)
        cond = self.import_function(cond_name, args, graph, assumed)
        return initial, cond, body

    # -- the walk -----------------------------------------------------------------
    def import_graph(self, tf_graph, inputs, env, outputs, on_op=None):
        """IR graph computing `outputs` of `tf_graph`; `env` binds its placeholders.
        `on_op(done, total, op_name)`, if given, is called as each op is reached."""
        b = Builder()
        order = _needed_ops(tf_graph, outputs, self.outfeed_queues)
        for done, op in enumerate(order, 1):
            if on_op is not None:
                on_op(done, len(order), op.name)
            if op.type == "Placeholder" and op.outputs[0].ref() in env:
                continue
            node = Node(op, [_lookup(env, t, op) for t in op.inputs], self)
            b.source = Source(op.name, node.layer)
            outer = self.placement
            own = placement.placement_of(op)
            b.shard, b.stage = self.placement = tuple(
                mine if mine is not None else theirs for mine, theirs in zip(own, outer))
            first = len(b.equations)
            try:
                results = self._import_op(node, b)
            finally:
                self.placement = outer
            _mark_pipeline(op, b.equations[first:])
            for tensor, value in zip(op.outputs, results):
                env[tensor.ref()] = value
        return Graph(inputs, [_lookup(env, t, None) for t in outputs], b.equations)

    def _import_op(self, node, b):
        importer = ops.get_importer(node.type)
        if importer is None and _library_function(node.op.graph, node.type) is not None:
            importer = _import_library_call  # a legacy Defun, called as an op of its name
        if importer is None:
            raise UnsupportedOpError(node.type, node.name, node.layer)
        _check_dtypes(node)
        first = len(b.equations)
        results = importer(node, b)
        if results is None or isinstance(results, Value):
            results = [] if results is None else [results]
        results = list(results)
        consts = self.facts.consts
        for eqn in b.equations[first:]:
            constant = ops.get_op(eqn.op).role == "constant"
            folded = [eqn.params["value"]] if constant else fold_equation(eqn, consts)
            for value, array in zip(eqn.outputs, folded or ()):
                consts[value.id] = array
        _check_types(node, results)
        self.facts.after_op(node, results)
        return results


def _mark_pipeline(op, equations):
    """A pipeline's micro-batch loop keeps its schedule and depth (`Equation.pipeline`)."""
    info = placement.pipeline_of(op) if op.type in ("While", "StatelessWhile") else None
    for eqn in equations:
        if info is not None and ops.get_op(eqn.op).role == "loop":
            eqn.pipeline = info


def _library_function(graph, name):
    """The graph of function `name` in the library of `graph` or its outer graphs, or None.

    tf.function bodies carry their graph. Legacy `Defun` functions (TensorFlow's own
    dense CTC loop, for one) only carry a FunctionDef, converted here once, with the
    graph holding the library as default so the functions they call resolve.
    """
    while graph is not None:
        fn = getattr(graph, "_functions", {}).get(name)
        if fn is not None:
            if hasattr(fn, "graph"):
                return fn.graph
            if id(fn) not in _DEFUN_GRAPHS:
                with graph.as_default():
                    _DEFUN_GRAPHS[id(fn)] = (fn, function_def_to_graph(fn.definition))
            return _DEFUN_GRAPHS[id(fn)][1]
        graph = getattr(graph, "outer_graph", None)
    return None


_DEFUN_GRAPHS = {}


def _find_function(graph, name):
    fn_graph = _library_function(graph, name)
    if fn_graph is None:
        raise CompilationError(
            f"The function '{name}' called by the traced graph was not found.")
    return fn_graph


def _import_library_call(node, b):
    node.called["f"] = fn = node.function_named(node.type, node.inputs)
    if not fn.outputs and not fn.equations:
        return []
    outs = b.emit("call", [v for v in node.inputs if hasattr(v, "type")], fn=fn)
    return list(outs) if isinstance(outs, tuple) else ([outs] if fn.outputs else [])


def _carry_source(fn_graph, i):
    """The tensor a loop body computes carry `i` from, looking through Identity ops."""
    source, tensor = fn_graph.inputs[i].op, fn_graph.outputs[i]
    while tensor.op.type == "Identity" and tensor.op is not source:
        tensor = tensor.op.inputs[0]
    return tensor


def _passed_through(fn_graph, i):
    return _carry_source(fn_graph, i).op is fn_graph.inputs[i].op


def _recurrent(fn_graph, i):
    """Whether a loop body computes carry `i` from itself by more than identity.

    A counter (`i + 1`) is: it is no loop-invariant constant whatever it starts as, so
    the fixpoint need not import the body once more to find out.
    """
    source = fn_graph.inputs[i].op
    tensor = _carry_source(fn_graph, i)
    return tensor.op is not source and _depends_on(tensor, source)


def _depends_on(tensor, source):
    seen, stack = set(), [tensor.op]
    while stack:
        op = stack.pop()
        if op is source:
            return True
        if op._id not in seen:
            seen.add(op._id)
            stack.extend(t.op for t in op.inputs)
    return False


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
