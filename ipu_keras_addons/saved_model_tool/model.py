"""SavedModels in and out: the frozen signature graph every subcommand works on.

Owns reading a SavedModel (TensorFlow 2 `tf.saved_model.save` or Keras `model.export`):
the designed errors for a missing directory, tag set or signature key; freezing one
signature's function into a `GraphDef` with its variables as constants
(`convert_variables_to_constants_v2`); the Python function that imports such a graph
(traced by the project's tracer for the IPU, by `tf.function` for the host), optionally
node run by node run under the placement scopes; and writing a graph back as a SavedModel
that TensorFlow loads and runs on the CPU. The graph rewrites are in `rewrite.py`.
"""
import contextlib
import dataclasses
import inspect
import os

import tensorflow as tf
from tensorflow.core.framework import graph_pb2
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2
from tensorflow.python.tools import saved_model_utils

from ipu_keras import scopes
from ipu_keras.errors import SavedModelError

DEFAULT_SIGNATURE = "serving_default"


@dataclasses.dataclass
class SignatureGraph:
    """One signature as a frozen graph.

    Attributes:
        graph_def: The frozen `GraphDef` (variables are constants).
        inputs: Input key -> (tensor name in `graph_def`, `tf.TensorSpec` of the signature).
        outputs: Output key -> (tensor name in `graph_def`, `tf.TensorSpec`).
    """

    graph_def: graph_pb2.GraphDef
    inputs: dict
    outputs: dict

    def copy(self):
        graph_def = graph_pb2.GraphDef()
        graph_def.CopyFrom(self.graph_def)
        return SignatureGraph(graph_def, dict(self.inputs), dict(self.outputs))


def split_tags(tag_set):
    return sorted(t.strip() for t in str(tag_set).split(",") if t.strip())


def check_directory(directory):
    """Raises SavedModelError unless `directory` holds a SavedModel."""
    if not directory or not os.path.isdir(directory):
        raise SavedModelError(
            f"ipu_saved_model_cli expected --dir to be an existing SavedModel directory. "
            f"Received: dir={directory!r}. Pass the directory that holds saved_model.pb.")
    if not any(os.path.exists(os.path.join(directory, name))
               for name in ("saved_model.pb", "saved_model.pbtxt")):
        raise SavedModelError(
            f"ipu_saved_model_cli expected a SavedModel (saved_model.pb) in --dir. Received: "
            f"dir={directory!r}, which holds {sorted(os.listdir(directory))[:8]}. Save the "
            "model with tf.saved_model.save or Keras model.export first.")


def read_saved_model(directory):
    """The `SavedModel` protobuf of `directory`, with at least one MetaGraphDef.

    Raises:
        SavedModelError: no SavedModel there, or its file cannot be parsed (garbage, cut
            short) or holds no MetaGraphDef (an empty file parses as one with none).
    """
    check_directory(directory)
    try:
        saved = saved_model_utils.read_saved_model(directory)
    except (OSError, RuntimeError) as e:   # TensorFlow's IOError for a proto it cannot parse
        raise SavedModelError(
            f"ipu_saved_model_cli expected a readable SavedModel in --dir. Received: "
            f"dir={directory!r}, whose saved_model.pb cannot be parsed ({e}). The file is "
            "damaged or not a SavedModel: save the model again.") from None
    if not saved.meta_graphs:
        raise SavedModelError(
            f"ipu_saved_model_cli expected a SavedModel with at least one MetaGraphDef in "
            f"--dir. Received: dir={directory!r}, whose saved_model.pb holds none (an empty "
            "or truncated file). Save the model again.")
    return saved


def tag_sets(directory):
    """The tag sets of the SavedModel in `directory`, each a sorted list of tags."""
    return [sorted(meta.meta_info_def.tags) for meta in read_saved_model(directory).meta_graphs]


def meta_graph(directory, tag_set):
    """The MetaGraphDef of `tag_set` ("serve" or "serve,gpu")."""
    available = tag_sets(directory)
    tags = split_tags(tag_set or "")
    if tags not in available:
        names = ", ".join("'" + ",".join(t) + "'" for t in available)
        raise SavedModelError(
            f"ipu_saved_model_cli expected --tag_set to be one of the SavedModel's tag sets "
            f"({names}). Received: tag_set={tag_set!r}. Run 'ipu_saved_model_cli show --dir "
            f"{directory}' to list them.")
    return next(meta for meta in read_saved_model(directory).meta_graphs
                if sorted(meta.meta_info_def.tags) == tags)


def signature_def(meta, key, directory=""):
    """The SignatureDef `key` of `meta`, with a designed error naming the valid keys."""
    if key not in meta.signature_def:
        raise SavedModelError(
            f"ipu_saved_model_cli expected --signature_def to be one of "
            f"{sorted(meta.signature_def)}. Received: signature_def={key!r}. Run "
            f"'ipu_saved_model_cli show --dir {directory} --tag_set "
            f"{','.join(meta.meta_info_def.tags)}' to list them.")
    return meta.signature_def[key]


def load_signature(directory, tag_set, key=DEFAULT_SIGNATURE):
    """Loads signature `key` of the SavedModel and freezes it (see `SignatureGraph`)."""
    signature_def(meta_graph(directory, tag_set), key, directory)
    try:
        loaded = tf.saved_model.load(directory, tags=split_tags(tag_set))
        function = loaded.signatures[key]
        frozen = convert_variables_to_constants_v2(function)
    except (tf.errors.OpError, OSError, ValueError, KeyError) as e:
        raise SavedModelError(
            f"ipu_saved_model_cli expected a SavedModel that TensorFlow can load. Received: "
            f"dir={directory!r}, whose signature {key!r} failed to load: "
            f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}. Its variables "
            "or assets may be missing or damaged: save the model again.") from None
    specs = function.structured_input_signature[1]
    by_name = {t.op.name: t for t in frozen.inputs if t.dtype != tf.resource}
    inputs = {}
    for i, name in enumerate(sorted(specs)):
        spec = specs[name]
        tensor = by_name.get(spec.name, by_name.get(name))
        tensor = frozen.inputs[i] if tensor is None else tensor
        inputs[name] = (tensor.name, tf.TensorSpec(spec.shape, spec.dtype, name))
    # Freezing keeps the outputs' order (the signature's keys, sorted) but not their keys.
    keys = _output_keys(function.structured_outputs)
    outputs = {k: (t.name, tf.TensorSpec(t.shape, t.dtype, k))
               for k, t in zip(keys, tf.nest.flatten(frozen.structured_outputs))}
    return SignatureGraph(frozen.graph.as_graph_def(), inputs, outputs)


def _output_keys(structured):
    if isinstance(structured, dict):
        return sorted(structured)
    return [f"output_{i}" for i in range(len(tf.nest.flatten(structured)))]


def importing_body(sig, parameter_names=None, placement=None):
    """A Python function computing `sig`'s outputs (a dict) by importing its graph.

    With `placement` (node name -> (shard, stage), either None), the graph is imported in
    runs of consecutive nodes of one placement, each inside `scopes.ipu_shard(shard)` and
    `scopes.pipeline_stage(stage)`, so the ops are made under the user's placement scopes.
    """
    keys = sorted(sig.inputs)
    if parameter_names is None:
        parameter_names = [f"ipu_saved_model_input_{i}" for i in range(len(keys))]

    def body(*args):
        env = {_tensor_name(sig.inputs[k][0]): a for k, a in zip(keys, args)}
        runs = _placement_runs(sig.graph_def, placement or {}, skip=set(env))
        for (shard, stage), nodes in runs:
            with _scope(scopes.ipu_shard, shard), _scope(scopes.pipeline_stage, stage):
                env.update(_import_nodes(sig.graph_def, nodes, env))
        return {k: env[_tensor_name(sig.outputs[k][0])] for k in sorted(sig.outputs)}

    body.__signature__ = inspect.Signature([
        inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in parameter_names])
    return body


def _tensor_name(name):
    return name if ":" in name else name + ":0"


def _scope(factory, value):
    return contextlib.nullcontext() if value is None else factory(value)


def _placement_runs(graph_def, placement, skip):
    """[((shard, stage), [NodeDef])] of consecutive nodes with one placement, in order,
    leaving out the nodes whose tensor is in `skip` (the fed placeholders)."""
    runs = []
    for node in graph_def.node:
        if node.name + ":0" in skip:
            continue
        where = tuple(placement.get(node.name, (None, None)))
        if runs and runs[-1][0] == where:
            runs[-1][1].append(node)
        else:
            runs.append((where, [node]))
    return runs


def _import_nodes(graph_def, nodes, env):
    """Imports `nodes` (a topologically closed-under-`env` run); returns their tensors."""
    part = graph_pb2.GraphDef(versions=graph_def.versions, library=graph_def.library)
    names = {n.name for n in nodes}
    input_map = {}
    for node in nodes:
        copy = part.node.add()
        copy.CopyFrom(node)
        del copy.input[:]
        for name in node.input:
            if name.startswith("^"):
                if name[1:] in names:
                    copy.input.append(name)
                continue  # control edges across runs: frozen graphs only order NoOps
            tensor = _tensor_name(name)
            if tensor.split(":")[0] not in names:
                input_map[tensor] = env[tensor]
            copy.input.append(name)
    ops = tf.graph_util.import_graph_def(part, input_map=input_map, name="",
                                         return_elements=[n.name for n in nodes])
    # Keys by the GraphDef's names: importing may have made an op's name unique.
    return {f"{node.name}:{i}": t for node, op in zip(nodes, ops)
            for i, t in enumerate(op.outputs)}


def graph_function(sig, input_shapes, placement=None):
    """A concrete function of `sig` with static input shapes, for the tracer.

    Its arguments are the inputs in sorted key order; it returns the outputs as a dict.
    Node names inside are those of `sig.graph_def`; `placement` (node name -> (shard,
    stage)) makes each node under its `ipu_shard` / `pipeline_stage` scopes.
    """
    keys = sorted(sig.inputs)
    body = importing_body(sig, placement=placement)
    specs = [tf.TensorSpec(input_shapes[k], sig.inputs[k][1].dtype) for k in keys]
    return tf.function(body, autograph=False).get_concrete_function(*specs)


def save_signature(sig, directory, tags, key=DEFAULT_SIGNATURE):
    """Writes `sig` as a SavedModel TensorFlow can load and run, signature `key`."""
    keys = sorted(sig.inputs)
    body = importing_body(sig, keys)
    specs = [tf.TensorSpec(sig.inputs[k][1].shape, sig.inputs[k][1].dtype, k) for k in keys]
    function = tf.function(body, input_signature=specs, autograph=False)
    module = tf.Module()
    module.serve = function
    tf.saved_model.save(module, directory, signatures={key: function.get_concrete_function()})
    _retag(directory, tags)


def _retag(directory, tags):
    """tf.saved_model.save always writes tag 'serve'; keep the original's tag set."""
    if tags == ["serve"]:
        return
    path = os.path.join(directory, "saved_model.pb")
    model = saved_model_pb2.SavedModel()
    with open(path, "rb") as f:
        model.ParseFromString(f.read())
    for meta in model.meta_graphs:
        del meta.meta_info_def.tags[:]
        meta.meta_info_def.tags.extend(tags)
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
