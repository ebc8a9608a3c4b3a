"""`run`: a signature on the simulated IPU, for an original or a converted SavedModel.

An `ipu.serving` export runs its preprocessing and postprocessing on the host and its
executable, compiled at export time, on the simulated IPU (`ipu_keras._src.serving`).
An original SavedModel's signature is frozen, traced and compiled now with the `run`
options. A converted one (`convert.is_converted`) runs its excluded head on the host with
TensorFlow (all of it with `no_ipu_placement`), then its IPU part: with the embedded
executable as compiled by `convert` (no recompilation; the `run` IPU options do not apply,
as in the original), otherwise compiled now with the `run` options and the recorded
placement.
"""
import os

import numpy as np

from ipu_keras._src.serving import runtime
from ipu_keras.errors import OutputExistsError, OutputWriteError
from ipu_keras_addons.saved_model_tool import convert, model, runner
from ipu_keras_addons.saved_model_tool.inputs import check_inputs


def run_saved_model(directory, tag_set, signature_def, feeds, options=None):
    """Runs signature `signature_def` on `feeds` (input key -> array); returns a RunResult."""
    options = options or runner.IPUOptions()
    meta = model.meta_graph(directory, tag_set)
    model.signature_def(meta, signature_def, directory)
    if runtime.is_serving_export(directory):
        return _run_serving_export(directory, feeds)
    if not convert.is_converted(directory):
        sig = model.load_signature(directory, tag_set, signature_def)
        arrays = check_inputs(feeds, {k: spec for k, (_, spec) in sig.inputs.items()})
        shapes = {k: a.shape for k, a in arrays.items()}
        return runner.execute(runner.compile_signature(sig, shapes, options), sig, arrays)
    specs, ipu, host, mapping, params, executable = convert.load_converted(directory)
    arrays = check_inputs(feeds, {k: spec for k, (_, spec) in specs.items()})
    if params.get("no_ipu_placement"):
        return runner.host_result(_run_on_host(ipu, arrays))
    if host is not None:
        arrays.update(_run_on_host(host, arrays))
    arrays = {k: arrays[k] for k in ipu.inputs}
    if executable is not None:
        result = runner.execute(executable, ipu, arrays, params["batch_size"],
                                params["batch_per_step"])
        result.embedded = True
        return result
    shapes = {k: a.shape for k, a in arrays.items()}
    options = runner.with_device_for(options, mapping)
    return runner.execute(runner.compile_signature(ipu, shapes, options, mapping), ipu, arrays)


def _run_serving_export(directory, feeds):
    """An `ipu.serving` export: its pre/postprocessing on the host, its executable (compiled
    at export time, so the `run` IPU options do not apply) on the simulated IPU."""
    serving = runtime.ServingRuntime(directory)
    arrays = check_inputs(feeds, {s.name: s for s in serving.input_signature})
    outputs, cycles = serving.run_signature(arrays)
    executable = serving.executable
    target = dict(executable.target,
                  num_ipus=executable.info.get("device_ipus", executable.target["num_ipus"]))
    return runner.RunResult(outputs, cycles, serving.executions, target, executable.memory,
                            embedded=True)


def _run_on_host(host, arrays):
    keys = sorted(host.inputs)
    function = model.graph_function(host, {k: arrays[k].shape for k in keys})
    outputs = function(*[arrays[k] for k in keys])
    return {k: np.asarray(v) for k, v in outputs.items()}


def save_outputs(outputs, outdir, overwrite=False):
    """Saves each output as `<outdir>/<key>.npy`; returns the paths written.

    Raises:
        OutputExistsError: if a file exists and `overwrite` is False (nothing is written).
        OutputWriteError: if `outdir` or a file in it cannot be written.
    """
    paths = {k: os.path.join(outdir, k + ".npy") for k in sorted(outputs)}
    existing = [p for p in paths.values() if os.path.exists(p)]
    if existing and not overwrite:
        raise OutputExistsError(
            f"run expected --outdir to hold no output files yet. Received: {existing} "
            "already exist. Add --overwrite to replace them.")
    try:
        os.makedirs(outdir, exist_ok=True)
        for key, path in paths.items():
            np.save(path, outputs[key])
    except OSError as e:
        raise OutputWriteError(
            f"run expected --outdir to be a directory it can write. Received: "
            f"outdir={outdir!r}: {e.strerror or e} ({e.filename or outdir}). Choose a "
            "writable directory.") from None
    return paths
