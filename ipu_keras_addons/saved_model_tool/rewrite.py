"""The graph conversions of `convert ipu`, each `SignatureGraph -> SignatureGraph`.

Applied in the original's order by `convert.py`: GELU replacement, excluded nodes,
int64 -> int32, precision. Every result is still a graph TensorFlow imports and runs on
the CPU: the signature keeps its dtypes (casts are inserted at its edges), and the GELU
becomes a call of a library function `IpuGelu` (whose body TensorFlow runs, and which
the tracer imports like any function call). Regular expressions use `re.search` on node
names, as the original does, and one that matches no node is an error (`NodeMatchError`).
"""
import heapq
import math
import re

import tensorflow as tf

from ipu_keras.errors import ConversionConfigError, NodeMatchError

GELU_FUNCTION = "IpuGelu"


def match_nodes(names, regexes, option):
    """Names among `names` matched by any of `regexes`; each regex must match one."""
    matched = set()
    for regex in regexes:
        try:
            pattern = re.compile(regex)
        except re.error as e:
            raise ConversionConfigError(
                f"{option} expected regular expressions. Received: {regex!r} ({e}).") from None
        hits = {n for n in names if pattern.search(n)}
        if not hits:
            raise NodeMatchError(
                f"{option} expected each regular expression to match a node of the graph. "
                f"Received: {regex!r}, which matches none of its {len(names)} nodes (e.g. "
                f"{sorted(names)[:5]}). Run with a pattern that re.search finds in a name.")
        matched |= hits
    return matched


def _node_of(tensor):
    return tensor.lstrip("^").split(":")[0]


def _nodes(sig):
    return {n.name: n for n in sig.graph_def.node}


def sort_nodes(sig):
    """Orders `sig`'s nodes topologically (stable: a node moves only after its inputs),
    the program order that placement runs and the stage search rely on."""
    nodes = list(sig.graph_def.node)
    index = {n.name: i for i, n in enumerate(nodes)}
    users = {n.name: [] for n in nodes}
    waiting = {}
    for node in nodes:
        inputs = {_node_of(i) for i in node.input} & set(index)
        waiting[node.name] = len(inputs)
        for name in inputs:
            users[name].append(node.name)
    ready = [i for i, n in enumerate(nodes) if not waiting[n.name]]
    heapq.heapify(ready)
    ordered = []
    while ready:
        node = nodes[heapq.heappop(ready)]
        ordered.append(node)
        for user in users[node.name]:
            waiting[user] -= 1
            if not waiting[user]:
                heapq.heappush(ready, index[user])
    assert len(ordered) == len(nodes), "the graph has a cycle"
    del sig.graph_def.node[:]
    sig.graph_def.node.extend(ordered)
    return sig


# -- GELU --------------------------------------------------------------------------------


def _gelu_function(dtype):
    x_spec = tf.TensorSpec(None, dtype)

    @tf.function(input_signature=[x_spec], autograph=False)
    def gelu(x):
        return 0.5 * x * (1.0 + tf.math.erf(x * tf.constant(1 / math.sqrt(2.0), dtype)))

    fdef = gelu.get_concrete_function().function_def
    fdef.signature.name = f"{GELU_FUNCTION}_{tf.as_dtype(dtype).name}"
    return fdef


def _add_gelu_function(sig, dtype):
    """Adds the GELU function of `dtype` to the graph's library (once); returns its name."""
    name = f"{GELU_FUNCTION}_{tf.as_dtype(dtype).name}"
    if name not in {f.signature.name for f in sig.graph_def.library.function}:
        sig.graph_def.library.function.add().CopyFrom(_gelu_function(dtype))
    return name


def replace_gelu(sig, rules, node_dtype):
    """Replaces the nodes of `rules["nodes"]` with one `IpuGelu` call per GELU input.

    Args:
        sig: The SignatureGraph (a copy is returned).
        rules: {"nodes", "node_as_gelu_input", "node_use_gelu_output"}: regex lists.
        node_dtype: node name -> dtype of its first output (`tf.DType`).
    """
    sig = sig.copy()
    nodes = _nodes(sig)
    names = list(nodes)
    deleted = match_nodes(names, rules["nodes"], "gelu_replacement 'nodes'")
    sources = sorted(match_nodes(names, rules["node_as_gelu_input"],
                                 "gelu_replacement 'node_as_gelu_input'"))
    users = match_nodes(names, rules["node_use_gelu_output"],
                        "gelu_replacement 'node_use_gelu_output'")
    gelu_of = {}
    for source in sources:
        dtype = node_dtype[source]
        node = sig.graph_def.node.add(name=f"{source}/{GELU_FUNCTION}",
                                      op=_add_gelu_function(sig, dtype))
        node.input.append(source)
        gelu_of[source] = node.name
    for user in users:
        node = nodes[user]
        for i, name in enumerate(node.input):
            if _node_of(name) in deleted:
                node.input[i] = gelu_of[_gelu_source(name, nodes, deleted, gelu_of, sources)]
    _remove(sig, deleted, "gelu_replacement 'nodes'")
    return sort_nodes(sig)


def _gelu_source(tensor, nodes, deleted, gelu_of, sources):
    """The GELU input that the deleted node `tensor` computes from (its nearest ancestor)."""
    stack, seen = [_node_of(tensor)], set()
    while stack:
        name = stack.pop()
        if name in gelu_of:
            return name
        if name in seen or name not in deleted:
            continue
        seen.add(name)
        stack.extend(_node_of(i) for i in nodes[name].input)
    return sources[-1]  # no ancestor found: the original's choice, the last GELU made


def _remove(sig, removed, option):
    kept = [n for n in sig.graph_def.node if n.name not in removed]
    for node in kept:
        dangling = [i for i in node.input if _node_of(i) in removed]
        if dangling:
            raise ConversionConfigError(
                f"{option} expected the removed nodes to be used only by replaced nodes. "
                f"Received: node '{node.name}' still reads {dangling}; add it to the rules.")
    del sig.graph_def.node[:]
    sig.graph_def.node.extend(kept)


# -- excluded nodes ---------------------------------------------------------------------


def split_excluded(sig, excluded):
    """(host SignatureGraph or None, IPU SignatureGraph) for the excluded nodes.

    What an excluded node reads runs on the host too (its ancestors join it), so the host
    part is the graph's head: it computes, from the signature inputs, every tensor an IPU
    node reads from it. In the IPU part those tensors become placeholders (new inputs keyed
    by the tensor's name with '/' and ':' made '_').
    """
    if not excluded:
        return None, sig
    nodes = _nodes(sig)
    input_nodes = {_node_of(t) for t, _ in sig.inputs.values()}
    excluded, stack = set(), list(excluded)
    while stack:
        name = stack.pop()
        if name in excluded or name in input_nodes:
            continue
        excluded.add(name)
        stack.extend(_node_of(i) for i in nodes[name].input)
    ipu = sig.copy()
    boundary, specs, taken = {}, _tensor_specs(sig), set(nodes)
    for node in ipu.graph_def.node:
        if node.name in excluded:
            continue
        inputs = list(node.input)
        del node.input[:]
        for name in inputs:
            if _node_of(name) not in excluded:
                node.input.append(name)
            elif not name.startswith("^"):  # control edges from the host part are dropped
                tensor = name if ":" in name else name + ":0"
                if tensor not in boundary:
                    boundary[tensor] = _unique("host_" + re.sub(r"\W", "_", tensor), taken)
                node.input.append(boundary[tensor])
    host = sig.copy()
    host.outputs = {p: (t, specs[t]) for t, p in boundary.items()}
    kept = [n for n in ipu.graph_def.node if n.name not in excluded]
    for tensor, placeholder in boundary.items():
        kept.insert(0, _placeholder(placeholder, specs[tensor].dtype))
    del ipu.graph_def.node[:]
    ipu.graph_def.node.extend(kept)
    ipu.inputs = {p: (p + ":0", tf.TensorSpec(specs[t].shape, specs[t].dtype, p))
                  for t, p in boundary.items()}
    ipu.inputs.update({k: v for k, v in sig.inputs.items() if any(
        _node_of(v[0]) == _node_of(i) for n in kept for i in n.input)})
    return host, ipu


def _unique(name, taken):
    candidate, i = name, 1
    while candidate in taken:
        candidate, i = f"{name}_{i}", i + 1
    taken.add(candidate)
    return candidate


def _placeholder(name, dtype):
    node = tf.compat.v1.NodeDef(name=name, op="Placeholder")
    node.attr["dtype"].type = dtype.as_datatype_enum
    return node


def _tensor_specs(sig):
    """Tensor name -> TensorSpec (batch dimension unknown) of every tensor of `sig`."""
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(sig.graph_def, name="")
    specs = {}
    for op in graph.get_operations():
        for t in op.outputs:
            specs[t.name] = tf.TensorSpec(t.shape, t.dtype)
    return specs


def node_dtypes(sig):
    """Node name -> dtype of its first output (None for nodes without outputs)."""
    specs = _tensor_specs(sig)
    return {n.name: getattr(specs.get(n.name + ":0"), "dtype", None) for n in sig.graph_def.node}


# -- dtype conversions (int64 -> int32, precision) ---------------------------------------

_KEEP_ATTRS = {"U"}  # FusedBatchNorm's statistics stay float when its data is half


def convert_int64(sig, excluded=()):
    """int64 -> int32 everywhere but at the signature's edges (casts are inserted there)
    and in the nodes of `excluded` (kept on the host)."""
    return retype(sig, tf.int64, tf.int32, _inner_nodes(sig) - set(excluded),
                  "int64_to_int32_conversion")


def convert_precision(sig, mode, excluded=()):
    """FP16: float32 -> float16 in every node but the signature's edges, the nodes of
    `excluded` and library calls; casts named `<consumer>/CastInsertion_<i>` join them.
    FP32: the reverse."""
    src, dst = (tf.float32, tf.float16) if mode == "FP16" else (tf.float16, tf.float32)
    converted = _inner_nodes(sig) - set(excluded)
    library = {f.signature.name for f in sig.graph_def.library.function}
    nodes = {n.name for n in sig.graph_def.node if n.op not in library or n.op.startswith(
        GELU_FUNCTION)}
    return retype(sig, src, dst, nodes & converted, "precision_mode",
                  edit=lambda new: _retype_gelu_calls(new, src, dst, converted))


def _retype_gelu_calls(sig, src, dst, converted):
    """Points the converted GELU calls at the function of the new dtype."""
    for node in sig.graph_def.node:
        if node.name in converted and node.op == f"{GELU_FUNCTION}_{src.name}":
            _add_gelu_function(sig, dst)
            node.op = f"{GELU_FUNCTION}_{dst.name}"


def _inner_nodes(sig):
    edges = {_node_of(t) for t, _ in list(sig.inputs.values()) + list(sig.outputs.values())}
    return {n.name for n in sig.graph_def.node} - edges


def retype(sig, src, dst, converted, option, edit=None):
    """Changes dtype `src` to `dst` in the nodes `converted` and inserts casts between them
    and the other nodes; returns the new SignatureGraph. `edit(new_sig)`, if given, makes
    the changes to nodes that have no dtype attributes (which function they call)."""
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(sig.graph_def, name="")
    sig = sig.copy()
    if edit is not None:
        edit(sig)
    old_in = {op.name: [t.dtype for t in op.inputs] for op in graph.get_operations()}
    old_out = {t.name: t.dtype for op in graph.get_operations() for t in op.outputs}

    def new(dtype, node):
        return dst if node in converted and dtype == src else dtype

    casts = []
    for node in sig.graph_def.node:
        if node.name in converted:
            _retype_node(node, src, dst)
        data_inputs = [i for i, name in enumerate(node.input) if not name.startswith("^")]
        for k, i in enumerate(data_inputs):
            tensor = node.input[i] if ":" in node.input[i] else node.input[i] + ":0"
            have = new(old_out[tensor], _node_of(tensor))
            want = new(old_in[node.name][k], node.name)
            if have != want:
                cast = _cast(f"{node.name}/CastInsertion_{len(casts)}", node.input[i], have,
                             want)
                casts.append(cast)
                node.input[i] = cast.name
    sig.graph_def.node.extend(casts)
    _check_importable(sig, option)
    return sort_nodes(sig)


def _retype_node(node, src, dst):
    for key, attr in node.attr.items():
        if key in _KEEP_ATTRS:
            continue
        if attr.HasField("type") and attr.type == src.as_datatype_enum:
            attr.type = dst.as_datatype_enum
        elif attr.HasField("list") and attr.list.type:
            attr.list.type[:] = [dst.as_datatype_enum if t == src.as_datatype_enum else t
                                 for t in attr.list.type]
        elif attr.HasField("tensor") and attr.tensor.dtype == src.as_datatype_enum:
            value = tf.make_ndarray(attr.tensor)
            if dst.is_integer and value.size and (value.min() < dst.min or value.max() > dst.max):
                raise ConversionConfigError(
                    f"int64_to_int32_conversion expected the constant '{node.name}' to fit in "
                    f"int32. Received: values in [{value.min()}, {value.max()}].")
            attr.tensor.CopyFrom(tf.make_tensor_proto(value.astype(dst.as_numpy_dtype)))


def _cast(name, tensor, src, dst):
    node = tf.compat.v1.NodeDef(name=name, op="Cast")
    node.input.append(tensor)
    node.attr["SrcT"].type = src.as_datatype_enum
    node.attr["DstT"].type = dst.as_datatype_enum
    node.attr["Truncate"].b = False
    return node


def _check_importable(sig, option):
    try:
        with tf.Graph().as_default():
            tf.graph_util.import_graph_def(sig.graph_def, name="")
    except (ValueError, tf.errors.InvalidArgumentError) as e:
        raise ConversionConfigError(
            f"{option} produced a graph TensorFlow rejects: {str(e).splitlines()[0]}. Exclude "
            "the node it names (precision_conversion_excluded_nodes) and convert again.") \
            from None


def dtype_counts(sig):
    """{dtype name: number of nodes whose first output has it}, for tests and reports."""
    counts = {}
    for dtype in node_dtypes(sig).values():
        if dtype is not None:
            counts[dtype.name] = counts.get(dtype.name, 0) + 1
    return counts
