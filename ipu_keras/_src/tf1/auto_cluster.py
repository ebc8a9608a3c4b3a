"""Ops built in a TF1 `ipu_scope` outside `ipu_compiler.compile`: clusters run on the IPU.

Graphcore's IPU device clustered such ops by itself (XLA auto-clustering), so that
`Session.run` of them compiled each cluster of IPU ops into an executable fed from the
host. Here the TF1 `ipu_scope` places its ops on the IPU device and adds a graph op
callback (`op_callbacks`: TensorFlow's hook on graph construction, which may replace a
new op's outputs). The callback takes the device off again (the session has no IPU
device), and gives each op placed on the IPU that the simulator can run a host op in place
of its outputs: a `tf.py_function` that computes the op from its *cluster*, the op and
every IPU op it is computed from, back to the host values they read (placeholders,
variables' values, ops on the CPU), which are the host op's inputs. Constants are
compiled in. On its first run for some input shapes the host op cuts its cluster out as a
`GraphDef` and compiles it by the road of `ipu_compiler.compile` (`executor`); every run
then executes it on the simulated IPU, recorded for `profiling.last_report()`. A
functional op (a v2 `tf.cond` or `tf.while_loop`, which their builders finish after the
callback) gets no host op: it joins the clusters of the identities that read it.

The gradient of a host op (`tf.gradients`, an optimizer's `minimize`) is the gradient of
its cluster rebuilt from its inputs, itself clustered for the IPU (the original placed
the gradients of IPU ops with them), wherever `tf.gradients` is called.

Left on the host: ops in `ipu_compiler.compile` (already compiled), ops on variables,
datasets and other resources (their values are cluster inputs; an INFO note says so),
and, with a warning once per op type, ops the simulator cannot run and ops inside
TF1-style (v1) control flow. Each fetched tensor runs its own cluster: fetching two
tensors of one cluster in one `Session.run` executes the shared ops twice. The host op
has a name of its own (`<op>_ipu`, in the op's name scope): the op the user named stays
in the graph with the host ops' outputs as its inputs, so a fetch by that name
(`"out:0"`) computes everything before it on the IPU and that one op on the CPU.
"""
import contextlib
import logging
import threading
import warnings
import weakref

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import op_callbacks
from tensorflow.python.framework import ops as tf_ops
from tensorflow.python.framework import tensor_util

from ipu_keras._src.device import config as ipu_config
from ipu_keras._src.driver import executor as _executor
from ipu_keras._src.runtime import outfeeds
from ipu_keras._src.tracer import import_concrete
from ipu_keras.errors import IPUError

logger = logging.getLogger("ipu_keras")

_IPU = "/device:IPU:"
_GRADIENT = "IpuAutoCluster"
_HANDLES = (tf.resource, tf.variant)
_local = threading.local()
_CLUSTERS = weakref.WeakKeyDictionary()
"""tf.Graph -> _Clusters."""
_WARNED = set()
_COMPILE_ERRORS = (IPUError, ValueError, TypeError, tf.errors.OpError)
"""What tracing or compiling a cluster may raise: the cluster then runs on the CPU."""


@contextlib.contextmanager
def ipu_ops_clustered(device):
    """Inside: ops are placed on `device` and those the IPU can run become clusters."""
    graph = tf.compat.v1.get_default_graph()
    first = len(graph.get_operations())
    op_callbacks.add_op_callback(_callback)
    try:
        with tf.device(device):
            yield
    finally:
        op_callbacks.remove_op_callback(_callback)
        for op in graph.get_operations()[first:]:  # ops built without the callback
            if _IPU in op.device:
                op._set_device("")  # noqa: SLF001 - as move_variable_initialization_to_cpu


@contextlib.contextmanager
def compiling():
    """Inside: ops are being compiled by `ipu_compiler.compile`; none is clustered."""
    previous = getattr(_local, "compiling", False)
    _local.compiling = True
    try:
        yield
    finally:
        _local.compiling = previous


def _callback(op_type, inputs, attrs, outputs, op_name=None, graph=None):
    del op_type, inputs, attrs, op_name
    if graph is None:  # an eager op: not ours
        return None
    op = outputs[0].op if outputs else graph.get_operations()[-1]
    if _IPU not in op.device:
        return None
    op._set_device("")  # noqa: SLF001 - the session has no IPU device
    if graph.building_function or getattr(_local, "compiling", False):
        return None
    clusters = _CLUSTERS.setdefault(graph, _Clusters(graph))
    reason = _refusal(op)
    if reason is not None:
        _say(op, reason)
        return None
    if _calls_functions(op):
        # A functional op (cond, while loop) is finished by its builder after this call,
        # through its outputs' op, and read through identities: it joins its readers'
        # clusters without a host op of its own.
        clusters.cluster_of(op)
        return None
    return clusters.host_outputs(op)


def _calls_functions(op):
    return any(a.HasField("func") or a.list.func for a in op.node_def.attr.values())


def _refusal(op):
    """Why `op` stays on the host, or None when it joins a cluster."""
    from ipu_keras._src.ops import supported_tf_ops  # noqa: PLC0415 - the op table

    tensors = list(op.inputs) + list(op.outputs)
    if any(t.dtype in _HANDLES for t in tensors):
        return "resources"
    if not op.outputs or not op.inputs:
        return "nothing" if not op.outputs else "data"
    if op._get_control_flow_context() is not None:  # noqa: SLF001
        return ("it is inside TF1-style control flow; build the loop or condition inside "
                "ipu_compiler.compile")
    if op.type not in supported_tf_ops():
        return "the simulated IPU has no kernel for it"
    return None


def _say(op, reason):
    if reason in ("nothing", "data"):  # a grouping, a constant or a placeholder
        return
    if reason == "resources":
        if "resources" not in _WARNED:
            _WARNED.add("resources")
            logger.info(
                "Ops on variables, datasets and other resources built in ipu_scope outside "
                "ipu_compiler.compile (here '%s') run on the host; their values are the "
                "inputs of the IPU clusters that use them.", op.type)
        return
    if op.type not in _WARNED:
        _WARNED.add(op.type)
        warnings.warn(
            f"The op '{op.name}' ({op.type}) built in ipu_scope outside "
            f"ipu_compiler.compile runs on the CPU, not on the simulated IPU: {reason}. "
            "(Said once per op type.)", RuntimeWarning, stacklevel=4)


class _Clusters:
    """The clusters of one graph: each IPU op's members and inputs, and its host op."""

    def __init__(self, graph):
        self.graph = graph
        self.original = {}  # host op output name -> the IPU op's own output
        self.clusters = {}  # IPU op name -> _Cluster
        self.by_host = {}   # host op name -> _Cluster

    def cluster_of(self, op):
        """The cluster that computes `op` (which is an IPU op), made on first ask."""
        cluster = self.clusters.get(op.name)
        if cluster is None:
            members, inputs = {op.name: op}, []
            for t in op.inputs:
                t = self.original.get(t.name, t)
                upstream = self.clusters.get(t.op.name)
                if upstream is not None:
                    members.update(upstream.members)
                    inputs.extend(upstream.inputs)
                elif _is_constant(t):
                    members[t.op.name] = t.op
                else:
                    inputs.append(t)
            inputs = list({t.name: t for t in inputs}.values())
            cluster = self.clusters[op.name] = _Cluster(self, op, members, inputs)
        return cluster

    def host_outputs(self, op):
        """The host op's outputs that stand for `op`'s."""
        cluster = self.cluster_of(op)
        with self.graph.device(None), self.graph.gradient_override_map(
                {"EagerPyFunc": _GRADIENT}):
            results = tf.py_function(cluster.run, cluster.inputs, [t.dtype for t in op.outputs],
                                     name=f"{op.name}_ipu")
        results = list(results) if isinstance(results, (list, tuple)) else [results]
        for result, original in zip(results, op.outputs):
            result.set_shape(original.shape)
            self.original[result.name] = original
        self.by_host[results[0].op.name] = cluster
        return results

    def gradient(self, host, grads):
        """The gradients of a host op's inputs: its cluster rebuilt from them and
        differentiated, clustered for the IPU (as the original placed the gradients of IPU
        ops with them), wherever `tf.gradients` was called."""
        graph = self.graph
        first = len(graph.get_operations())
        with graph.device(None), graph.colocate_with(None, ignore_existing=True):
            forward = self.by_host[host.name].forward(host)
            results = tf.compat.v1.gradients(forward, list(host.inputs), grad_ys=list(grads))
            results = [None if g is None else tf.convert_to_tensor(g) for g in results]
        for op in graph.get_operations()[first:]:
            reason = _refusal(op)
            if reason is None:
                self.cluster_of(op)
            else:
                _say(op, reason)
        return [self._hosted(g) for g in results]

    def _hosted(self, t):
        if t is None or t.op.name not in self.clusters:
            return t
        return self.host_outputs(t.op)[t.value_index]


def _is_constant(t):
    return not t.op.inputs and tensor_util.constant_value(t) is not None


class _Cluster:
    """The IPU ops that compute one op, compiled per input signature when first run."""

    def __init__(self, clusters, op, members, inputs):
        self.clusters = clusters
        self.op = op
        self.members = members
        self.inputs = inputs
        self.compiled = {}
        self._graph_def = None

    def graph_def(self):
        """The cluster as a GraphDef: a placeholder per input, the members in order."""
        if self._graph_def is None:
            self._graph_def = _cut_out(self.clusters, self.members, self.inputs)
        return self._graph_def

    def run(self, *arrays):
        signature = tuple((tuple(a.shape.as_list()), a.dtype.name) for a in arrays)
        function = self.compiled.get(signature)
        if function is None:
            function = self.compiled[signature] = self._compile(arrays)
        outputs = function(arrays)
        return [np.asarray(o, t.dtype.as_numpy_dtype) for o, t in zip(outputs, self.op.outputs)]

    def _compile(self, arrays):
        from ipu_keras._src.tf1.cluster import _rename_functions  # noqa: PLC0415

        graph_def = tf.compat.v1.GraphDef()
        graph_def.CopyFrom(self.graph_def())
        _rename_functions(graph_def, f"_ipu_auto{id(self)}_{len(self.compiled)}")
        names = [f"{_input_name(i)}:0" for i in range(len(self.inputs))]
        outputs = [t.name for t in self.op.outputs]

        def body(*args):
            return list(tf.graph_util.import_graph_def(
                graph_def, input_map=dict(zip(names, args)), return_elements=outputs,
                name="cluster"))

        body.__name__ = self.op.name.replace("/", "_")
        signature = [tf.TensorSpec(a.shape, a.dtype) for a in arrays]
        concrete = tf.compat.v1.wrap_function(body, signature)
        try:
            traced = import_concrete(concrete, len(signature),
                                     outfeed_queues=outfeeds.registry())
            compiled = _executor.CompiledFunction(body, (), {}, ipu_config.get_active_config(),
                                                  traced=traced)
        except _COMPILE_ERRORS as e:
            if self.op.type not in _WARNED:
                _WARNED.add(self.op.type)
                warnings.warn(
                    f"The cluster of '{self.op.name}' ({self.op.type}) built in ipu_scope "
                    "outside ipu_compiler.compile runs on the CPU, not on the simulated IPU: "
                    f"it cannot be compiled for it ({type(e).__name__}: {e}). (Said once per "
                    "op type.)", RuntimeWarning, stacklevel=2)
            return lambda arrays: [t.numpy() for t in concrete(*arrays)]
        return lambda arrays: compiled.session.run([a.numpy() for a in arrays])

    def forward(self, host):
        """The cluster rebuilt in the user's graph from the host op's inputs."""
        names = [f"{_input_name(i)}:0" for i in range(len(self.inputs))]
        return tf.graph_util.import_graph_def(
            self.graph_def(), input_map=dict(zip(names, host.inputs)),
            return_elements=[t.name for t in self.op.outputs], name=f"{self.op.name}_forward")


def _input_name(i):
    return f"ipu_cluster_input_{i}"


def _cut_out(clusters, members, inputs):
    """The GraphDef of `members`, reading `inputs` from placeholders."""
    graph = clusters.graph
    position = {t.name: i for i, t in enumerate(inputs)}
    whole = graph.as_graph_def()
    graph_def = tf.compat.v1.GraphDef()
    graph_def.library.CopyFrom(whole.library)
    graph_def.versions.CopyFrom(whole.versions)
    for i, t in enumerate(inputs):
        node = graph_def.node.add(name=_input_name(i), op="Placeholder")
        node.attr["dtype"].type = t.dtype.as_datatype_enum
        node.attr["shape"].shape.unknown_rank = True
    for op in graph.get_operations():  # in the order they were made: inputs first
        if op.name not in members:
            continue
        node = graph_def.node.add()
        node.CopyFrom(op.node_def)
        node.device = ""
        if "_class" in node.attr:
            del node.attr["_class"]
        del node.input[:]
        for t in op.inputs:
            t = clusters.original.get(t.name, t)
            node.input.append(f"{_input_name(position[t.name])}:0" if t.name in position
                              else _tensor_name(t))
    return graph_def


def _tensor_name(t):
    return t.op.name if t.value_index == 0 else f"{t.op.name}:{t.value_index}"


@tf_ops.RegisterGradient(_GRADIENT)
def _cluster_gradient(host, *grads):
    return _CLUSTERS[host.graph].gradient(host, grads)


__all__ = ["compiling", "ipu_ops_clustered"]
