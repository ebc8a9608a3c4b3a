"""`convert ipu`: a SavedModel in, a converted SavedModel and what the IPU needs out.

The conversion runs the original's steps in its order over the frozen `serving_default`
graph: GELU replacement, excluded nodes (kept on the host, or removed with
`remove_excluded_nodes`, their outputs becoming new signature inputs), int64 -> int32,
precision, then placement (manual sharding or pipeline stages). It writes to
`output_dir`:

* a SavedModel (same tag set, signature `serving_default`) that TensorFlow loads and runs
  on the CPU, with the converted graph;
* `conversion_params.json`: every option, and the MD5 of the new `saved_model.pb`;
* `ipu/`: what `run` needs for the IPU: `graph.pb` (the IPU part), `host_graph.pb` (the
  excluded head, if kept), `signature.json` and `placement.json` (node -> shard/stage);
* with `embedded_runtime_save_config`: the compiled executable of the IPU part,
  `<embedded_runtime_exec_cachedir>/application.ipu_exec` (a relative directory is taken
  inside `output_dir`), looping `batch_per_step` micro-batches of `batch_size` per run;
* with `pipeline_cfg` `auto` or `manual`: the solution file in its `solution_dir`
  (relative to `output_dir`).
"""
import hashlib
import json
import os
import shutil

import tensorflow as tf
from tensorflow.core.framework import graph_pb2

from ipu_keras._src.device.executable import Executable
from ipu_keras.errors import OutputExistsError
from ipu_keras_addons.saved_model_tool import model, placement, rewrite, runner

SIDECAR = "ipu"
EXECUTABLE = "application.ipu_exec"


def convert(directory, output_dir, tag_set, params, overwrite=False):
    """Converts the SavedModel in `directory` (see the module docstring); returns a dict of
    the files written and the placement, for printing.

    Everything is written to `<output_dir>.converting` first and moved to `output_dir` at
    the end, so a failed conversion leaves an existing `output_dir` as it was.
    """
    _check_output(output_dir, overwrite)
    sig, excluded = _convert_graph(model.load_signature(directory, tag_set), params)
    host, ipu = rewrite.split_excluded(sig, excluded)
    saved = ipu if params.remove_excluded_nodes else sig
    host = None if params.remove_excluded_nodes else host
    report = {"output_dir": output_dir, "nodes": len(ipu.graph_def.node),
              "excluded": sorted(excluded)}
    if params.precision_mode:
        casts = sum("/CastInsertion_" in n.name for n in sig.graph_def.node)
        report["precision"] = (f"{params.precision_mode}, node outputs by dtype "
                               f"{rewrite.dtype_counts(sig)}, {casts} casts inserted")
    staging = output_dir.rstrip(os.sep) + ".converting"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        mapping = _placement(ipu, params, staging, report)
        model.save_signature(saved, staging, model.split_tags(tag_set))
        _write_sidecar(staging, saved, ipu, host, mapping)
        if params.embedded_runtime_save_config and not params.no_ipu_placement:
            report["executable"] = _compile_embedded(ipu, params, mapping, staging)
        report["conversion_params"] = _write_params(staging, params)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(output_dir, ignore_errors=True)
    os.replace(staging, output_dir)
    return {k: v.replace(staging, output_dir, 1) if isinstance(v, str) else v
            for k, v in report.items()}


def _convert_graph(sig, params):
    """The converted graph and the nodes kept on the host, in the original's order: GELU,
    excluded nodes, int64, precision."""
    if params.gelu_replacement:
        sig = rewrite.replace_gelu(sig, params.gelu_replacement, rewrite.node_dtypes(sig))
    names = placement.placeable_nodes(sig)
    excluded = rewrite.match_nodes(names, params.excluded_nodes, "excluded_nodes")
    if params.no_ipu_placement:  # the whole graph stays on the host: nothing to split off
        excluded = set()
    if params.int64_to_int32_conversion:
        sig = rewrite.convert_int64(sig, excluded)
    if params.precision_mode:
        kept = rewrite.match_nodes([n.name for n in sig.graph_def.node],
                                   params.precision_conversion_excluded_nodes,
                                   "precision_conversion_excluded_nodes")
        sig = rewrite.convert_precision(sig, params.precision_mode, kept | excluded)
    return sig, excluded


def _check_output(output_dir, overwrite):
    if os.path.isdir(output_dir) and os.listdir(output_dir) and not overwrite:
        raise OutputExistsError(
            f"convert expected --output_dir to be a new or empty directory. Received: "
            f"output_dir={output_dir!r}, which holds files. Add --overwrite to replace it.")


def _placement(ipu, params, output_dir, report):
    cfg = params.pipeline_cfg
    if cfg is None:
        if params.manual_sharding:
            report["placement"] = "manual sharding"
            return placement.manual_sharding(ipu, params.manual_sharding)
        return {}
    solution_dir = os.path.join(output_dir, cfg.get("solution_dir", "solution"))
    if cfg["converter"] == "manual":
        stages, devices = placement.manual_pipeline(ipu, cfg["manual_pipeline_config"]), \
            list(cfg["device_info"])
        path = placement.write_solution(os.path.join(solution_dir, placement.MANUAL_SOLUTION),
                                        stages, devices)
    elif cfg["converter"] == "load":
        path = cfg["solution_path"]
        stages, devices = placement.load_solution(path, ipu)
    else:
        stages, devices, report["auto_search"] = _auto(ipu, params)
        path = placement.write_solution(os.path.join(solution_dir, placement.AUTO_SOLUTION),
                                        stages, devices)
    report["placement"] = f"pipeline ({cfg['converter']}): {len(devices)} stages"
    report["solution"] = path
    return placement.placement_from_stages(stages, devices)


def _auto(ipu, params):
    options = _options(params)
    shapes = _static_shapes(ipu, params.batch_size)
    traced = runner.trace_signature(ipu, shapes)
    target = options.config().target()
    cycles, nbytes = placement.node_costs(traced.graph, target, options)
    return placement.auto_pipeline(ipu, cycles, nbytes, params.pipeline_cfg,
                                   target.tiles_per_ipu * target.bytes_per_tile)


def _options(params):
    return runner.IPUOptions(params.num_ipus, params.matmul_amp, params.conv_amp,
                             params.matmul_partial_type, params.conv_partial_type)


def _static_shapes(sig, batch_size):
    shapes = {}
    for key, (_, spec) in sig.inputs.items():
        dims = spec.shape.as_list()
        dims = [batch_size if (i == 0 and d is None) else d for i, d in enumerate(dims)]
        if any(d is None for d in dims):
            from ipu_keras.errors import StaticShapeRequiredError

            raise StaticShapeRequiredError(
                f"convert ipu expected the input '{key}' to have a static shape apart from its "
                f"batch dimension. Received: shape={tuple(spec.shape.as_list())}.")
        shapes[key] = dims
    return shapes


def _compile_embedded(ipu, params, mapping, output_dir):
    config = params.embedded_runtime_save_config
    cachedir = os.path.join(output_dir, config["embedded_runtime_exec_cachedir"])
    # A pipeline's stages may be on more IPUs than --num_ipus (auto picks the count).
    options = runner.with_device_for(_options(params), mapping)
    executable = runner.compile_signature(ipu, _static_shapes(ipu, params.batch_size),
                                          options, mapping, params.batch_per_step)
    os.makedirs(cachedir, exist_ok=True)
    path = os.path.join(cachedir, EXECUTABLE)
    executable.save(path)
    return path


def _write_params(output_dir, params):
    values = params.to_dict()
    with open(os.path.join(output_dir, "saved_model.pb"), "rb") as f:
        values["saved_model_md5"] = hashlib.md5(f.read()).hexdigest()
    path = os.path.join(output_dir, "conversion_params.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(values, f, indent=2, sort_keys=True)
    return path


# -- the sidecar: what `run` reads back -------------------------------------------------


def _spec_json(entries):
    return {k: [t, spec.shape.as_list() if spec.shape.rank is not None else None,
                spec.dtype.name] for k, (t, spec) in entries.items()}


def _spec_from_json(entries):
    return {k: (t, tf.TensorSpec(shape, tf.as_dtype(dtype), k))
            for k, (t, shape, dtype) in entries.items()}


def _write_sidecar(output_dir, saved, ipu, host, mapping):
    folder = os.path.join(output_dir, SIDECAR)
    os.makedirs(folder, exist_ok=True)
    doc = {"signature": {"inputs": _spec_json(saved.inputs), "outputs": _spec_json(saved.outputs)},
           "ipu": {"inputs": _spec_json(ipu.inputs), "outputs": _spec_json(ipu.outputs)}}
    with open(os.path.join(folder, "graph.pb"), "wb") as f:
        f.write(ipu.graph_def.SerializeToString())
    if host is not None:
        doc["host"] = {"inputs": _spec_json(host.inputs), "outputs": _spec_json(host.outputs)}
        with open(os.path.join(folder, "host_graph.pb"), "wb") as f:
            f.write(host.graph_def.SerializeToString())
    with open(os.path.join(folder, "signature.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
    with open(os.path.join(folder, "placement.json"), "w", encoding="utf-8") as f:
        json.dump({n: list(p) for n, p in sorted(mapping.items())}, f, indent=1)


def is_converted(directory):
    return os.path.isfile(os.path.join(directory, SIDECAR, "signature.json"))


def load_converted(directory):
    """(signature specs, ipu SignatureGraph, host SignatureGraph or None, placement, params,
    executable path or None) of a converted model."""
    folder = os.path.join(directory, SIDECAR)
    with open(os.path.join(folder, "signature.json"), encoding="utf-8") as f:
        doc = json.load(f)
    with open(os.path.join(directory, "conversion_params.json"), encoding="utf-8") as f:
        params = json.load(f)
    graphs = {}
    for part in ("ipu", "host"):
        if part in doc:
            graph_def = graph_pb2.GraphDef()
            name = "graph.pb" if part == "ipu" else "host_graph.pb"
            with open(os.path.join(folder, name), "rb") as f:
                graph_def.ParseFromString(f.read())
            graphs[part] = model.SignatureGraph(graph_def, _spec_from_json(doc[part]["inputs"]),
                                                _spec_from_json(doc[part]["outputs"]))
    with open(os.path.join(folder, "placement.json"), encoding="utf-8") as f:
        mapping = {n: tuple(p) for n, p in json.load(f).items()}
    executable = None
    config = params.get("embedded_runtime_save_config")
    if config:
        path = os.path.join(directory, config["embedded_runtime_exec_cachedir"], EXECUTABLE)
        executable = Executable.load(path)
    return (_spec_from_json(doc["signature"]["inputs"]), graphs["ipu"], graphs.get("host"),
            mapping, params, executable)
