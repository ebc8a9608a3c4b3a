"""`ipu_compiler.compile` in a TensorFlow 1 graph: a compiled cluster run by one host op.

`compile_in_graph(fn, inputs)` calls `fn` in the user's graph, as the original did
when it built an XLA cluster, so the variables it creates are the session's own and
`tf.compat.v1.global_variables_initializer()` initialises them. The ops of the cluster
are then cut out as a `GraphDef` (its placeholders, variable handles and dataset
iterators become its inputs, and so do the tensors it reads from other ops made before
`compile`, which the session computes on the host: a one-shot iterator's `get_next()`,
a dataset made in `ipu_scope`), and one host op (`tf.py_function`) is put in the graph
in their place. On its first run the host op imports the `GraphDef` into a function
(eagerly, with stand-in variables and the infeeds' eager iterators bound to it),
traces and compiles it (`tracer`, `_compile.py`), and then runs the executable on the
simulated IPU every time the session evaluates it.

Variables travel transactionally: the session's values are read into the host op, the
stand-ins carry them through the execution, and the new values are assigned back by
ops that run only when the host op completed. The outputs the user gets depend on
those assignments, so a failed execution leaves the session's variables untouched.
"""
import contextlib
import itertools
import logging
import re

import tensorflow as tf
from tensorflow.python.ops import control_flow_util

from ipu_keras._src.driver import executor as _executor
from ipu_keras._src.device import config as ipu_config
from ipu_keras._src.runtime import outfeeds
from ipu_keras.errors import StaticShapeRequiredError
from ipu_keras._src.tracer import import_concrete
from ipu_keras._src.tracer.importer import is_effect

logger = logging.getLogger("ipu_keras")

_BOUND = ("Placeholder", "VarHandleOp")
_clusters = itertools.count(1)
_VARIABLE_SETUP = ("VarHandleOp", "VarIsInitializedOp", "VariableV2")


def compile_in_graph(computation, inputs):
    """Builds `computation(*inputs)` as a compiled cluster in the default graph.

    Returns:
        A list of the cluster's output tensors (a one-element list for one output),
        or the cluster's operation when `computation` returns only operations.
    """
    graph = tf.compat.v1.get_default_graph()
    first = len(graph.get_operations())
    initializers = {v.initializer.name for v in tf.compat.v1.global_variables()}
    with _control_flow_v2():
        result = computation(*inputs)
    new_ops = graph.get_operations()[first:]
    initializers |= {v.initializer.name for v in tf.compat.v1.global_variables()}
    flat = [r for r in tf.nest.flatten(result) if r is not None]
    outputs = [t for t in flat if isinstance(t, tf.Tensor)]
    name = re.sub(r"[^A-Za-z0-9_.]", "_", getattr(computation, "__name__", "cluster")).strip("_")
    name = name or "cluster"
    cluster = Cluster(graph, outputs, new_ops, initializers, name)
    return cluster.build()


def _cut(graph, whole, dest, new_names):
    """The nodes of the cluster, walking back from `dest`, and the tensors it reads
    from ops made before `compile` that run on the host (as the original's compiled
    cluster took captured tensors as inputs): a dataset iterator's `get_next()`, or any
    computation outside the function. Placeholders, variables, constants, and
    resources or datasets are taken into the cluster (bound or copied) instead.

    Returns:
        (kept node names, host tensor names in order, host op names to run first).
    """
    nodes = {n.name: n for n in whole.node}
    keep, host, host_deps, stack = set(), [], set(), list(dest)
    while stack:
        name = stack.pop()
        if name in keep:
            continue
        keep.add(name)
        for item in nodes[name].input:
            source, _, index = item.lstrip("^").partition(":")
            if name in new_names and source not in new_names and _on_host(graph, source):
                if item.startswith("^"):
                    host_deps.add(source)
                elif f"{source}:{index or 0}" not in host:
                    host.append(f"{source}:{index or 0}")
                continue
            stack.append(source)
    return keep, host, sorted(host_deps)


def _on_host(graph, name):
    op = graph.get_operation_by_name(name)
    if op.type in ("Placeholder", "VarHandleOp", "Const", "VariableV2", "Variable"):
        return False
    from ipu_keras._src.tf1 import feeds  # noqa: PLC0415 - feeds imports queues lazily

    if feeds.queue_of_iterator(graph, name) is not None:
        return False
    if any(t.dtype._is_ref_dtype for t in op.inputs):  # noqa: SLF001 - a v1 variable's read
        return False
    return all(t.dtype not in (tf.resource, tf.variant) for t in op.outputs)


class Cluster:
    """The cut-out ops of one `compile` call and the host op that runs them."""

    def __init__(self, graph, outputs, new_ops, initializers, name):
        self.name = name
        self.graph = graph
        self.outputs = outputs
        setup = _initialization_ops(graph, initializers)
        effects = [op.name for op in new_ops
                   if is_effect(op, None) and op.name not in setup
                   and op.type not in _VARIABLE_SETUP]
        dest = sorted({t.op.name for t in outputs} | set(effects))
        whole = graph.as_graph_def(add_shapes=True)
        keep, host, self.host_deps = _cut(graph, whole, dest, {op.name for op in new_ops})
        sub = tf.compat.v1.GraphDef()
        sub.library.CopyFrom(whole.library)
        sub.versions.CopyFrom(whole.versions)
        sub.node.extend(n for n in whole.node if n.name in keep)
        for node in sub.node:       # control edges to host ops: the host op waits for them
            kept = [i for i in node.input if not i.startswith("^") or i[1:] in keep]
            del node.input[:]
            node.input.extend(kept)
        _check_resource_variables(sub)
        self.placeholders = [graph.get_operation_by_name(n.name) for n in sub.node
                             if n.op == "Placeholder"]
        self.host_inputs = [graph.get_tensor_by_name(name) for name in host]
        self.variables = [graph.get_operation_by_name(n.name) for n in sub.node
                          if n.op == "VarHandleOp"]
        from ipu_keras._src.tf1 import feeds  # noqa: PLC0415 - feeds imports queues lazily

        self.iterators = [(n.name, feeds.queue_of_iterator(graph, n.name)) for n in sub.node
                          if feeds.queue_of_iterator(graph, n.name) is not None]
        bound = {name for name, _ in self.iterators}
        self.graph_def = tf.compat.v1.GraphDef()
        self.graph_def.library.CopyFrom(sub.library)
        self.graph_def.versions.CopyFrom(sub.versions)
        self.graph_def.node.extend(n for n in sub.node
                                   if n.op not in _BOUND and n.name not in bound)
        for node in self.graph_def.node:
            if "_class" in node.attr:  # colocation with variables left in the session
                del node.attr["_class"]
        _rename_functions(self.graph_def, f"_ipu{next(_clusters)}")
        self.effects = [e for e in effects if e not in {t.op.name for t in outputs}]
        self.compiled = None
        self.standins = None
        self.bound = []
        for tensor in self.inputs:
            if not tensor.shape.is_fully_defined():
                raise StaticShapeRequiredError(
                    f"ipu_compiler.compile expected every input to have a fully defined shape. "
                    f"Received: {tensor.name} with shape={tensor.shape}. Give the placeholder "
                    "(or the dataset: batch(..., drop_remainder=True)) a static shape (the IPU "
                    "compiles for fixed shapes).")

    @property
    def inputs(self):
        """The tensors the host op feeds: the placeholders, then the host-side tensors."""
        return [op.outputs[0] for op in self.placeholders] + self.host_inputs

    def build(self):
        """The ops in the user's graph: reads, the host op, the write-backs."""
        feeds = self.inputs
        host_deps = [self.graph.get_operation_by_name(n) for n in self.host_deps]
        with tf.device("cpu"), tf.control_dependencies(host_deps):
            reads = [tf.raw_ops.ReadVariableOp(resource=op.outputs[0], dtype=op.get_attr("dtype"))
                     for op in self.variables]
            tout = [t.dtype for t in self.outputs] + [r.dtype for r in reads]
            results = tf.py_function(self._run, feeds + reads, tout,
                                     name=f"ipu_compiled_{self.name}")
            if isinstance(results, tf.Operation):  # nothing to return: the op itself
                host, results = results, []
            else:
                results = list(results) if isinstance(results, (list, tuple)) else [results]
                host = results[0].op
            n = len(self.outputs)
            writes = [tf.raw_ops.AssignVariableOp(resource=op.outputs[0], value=value)
                      for op, value in zip(self.variables, results[n:])]
            with tf.control_dependencies(writes):
                outputs = []
                for out, value in zip(self.outputs, results[:n]):
                    value = tf.identity(value)
                    value.set_shape(out.shape)
                    outputs.append(value)
                if not outputs:
                    return tf.group(host, *writes, name=f"{self.name}_done")
        return outputs

    def _run(self, *arrays):
        iterators = [queue.eager_handle() for _, queue in self.iterators]
        if self.compiled is None or any(a is not b for a, b in zip(iterators, self.bound)):
            # First run, or an infeed was initialised again: bind its new iterator.
            self.bound = iterators
            self.compiled = self._compile()
        k = len(self.inputs)
        for var, value in zip(self.standins, arrays[k:]):
            var.assign(value)
        outputs = self.compiled.session.run([a.numpy() for a in arrays[:k]])
        return list(outputs) + [v.read_value() for v in self.standins]

    def _compile(self):
        """Imports the cut-out graph eagerly and compiles it (once)."""
        self.standins = [tf.Variable(tf.zeros(_variable_shape(op), op.get_attr("dtype")),
                                     name=op.name) for op in self.variables]
        handles = {f"{op.name}:0": v.handle for op, v in zip(self.variables, self.standins)}
        for (name, _), handle in zip(self.iterators, self.bound):
            handles[f"{name}:0"] = handle
        names = [t.name for t in self.inputs]
        output_names = [t.name for t in self.outputs]
        effects = self.effects

        def body(*args):
            graph = tf.compat.v1.get_default_graph()
            input_map = {name: graph.capture(h) for name, h in handles.items()}
            input_map.update(dict(zip(names, args)))
            results = tf.graph_util.import_graph_def(
                self.graph_def, input_map=input_map, return_elements=output_names + effects,
                name="cluster")
            return list(results[:len(output_names)])

        signature = [tf.TensorSpec(t.shape, t.dtype) for t in self.inputs]
        body.__name__ = self.name
        concrete = tf.compat.v1.wrap_function(body, signature)
        concrete.graph.variables = self.standins
        traced = import_concrete(concrete, len(signature),
                                 outfeed_queues=outfeeds.registry())
        return _executor.CompiledFunction(body, (), {}, ipu_config.get_active_config(),
                                          traced=traced)


def _variable_shape(op):
    return tf.TensorShape(op.get_attr("shape"))


@contextlib.contextmanager
def _control_flow_v2():
    """Builds `tf.while_loop`/`tf.cond` as functional ops (the ones the tracer imports)."""
    previous = control_flow_util.ENABLE_CONTROL_FLOW_V2
    control_flow_util.ENABLE_CONTROL_FLOW_V2 = True
    try:
        yield
    finally:
        control_flow_util.ENABLE_CONTROL_FLOW_V2 = previous


def _rename_functions(graph_def, suffix):
    """Gives the library's functions names of their own (the eager context holds the
    graph's functions under their original names already)."""
    names = {f.signature.name: f.signature.name + suffix for f in graph_def.library.function}

    def fix(node):
        if node.op in names:
            node.op = names[node.op]
        for attr in node.attr.values():
            if attr.HasField("func") and attr.func.name in names:
                attr.func.name = names[attr.func.name]
            for func in attr.list.func:
                if func.name in names:
                    func.name = names[func.name]

    for node in graph_def.node:
        fix(node)
    for function in graph_def.library.function:
        function.signature.name = names[function.signature.name]
        for node in function.node_def:
            fix(node)
    for gradient in graph_def.library.gradient:
        gradient.function_name = names.get(gradient.function_name, gradient.function_name)
        gradient.gradient_func = names.get(gradient.gradient_func, gradient.gradient_func)


def _initialization_ops(graph, initializers):
    """Names of the variables' initializers and of every op they are computed from."""
    names, stack = set(), [graph.get_operation_by_name(n) for n in initializers]
    while stack:
        op = stack.pop()
        if op.name not in names:
            names.add(op.name)
            stack.extend(t.op for t in op.inputs)
            stack.extend(op.control_inputs)
    return names


def _check_resource_variables(graph_def):
    for node in graph_def.node:
        if node.op in ("VariableV2", "Variable"):
            raise tf.errors.InvalidArgumentError(
                None, None,
                f"Cannot assign a device for operation '{node.name}': Could not satisfy "
                "explicit device specification '/device:IPU:0' because no supported kernel for "
                "IPU devices is available (VariableV2 is not a resource variable). Create "
                "variables used in ipu_compiler.compile as resource variables: "
                "tf.compat.v1.get_variable(..., use_resource=True), a "
                "tf.compat.v1.variable_scope(..., use_resource=True), or inside "
                "ipu.scopes.ipu_scope.")
