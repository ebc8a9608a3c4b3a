"""Running an `ipu.serving` export: the host parts on the CPU, the step on the simulated IPU.

A `ServingRuntime` stands where the SDK's embedded application runtime stood. It loads
the SavedModel with TensorFlow (for the preprocessing and postprocessing functions, run
on the CPU as in the SDK), reads the executable from the export's assets (no
recompiling: the program is the one compiled at export time) and keeps one `Session`
for it. Each call is one execution of the step on one batch; the SDK's engine read
`iterations` batches per run and topped a run up with dummy batches when requests
stopped coming, which changes latency, not results, so the simulator runs each request
as it comes.

Called while a function is being traced (inside `IPUStrategy.run` or a tf.function), the
runtime calls the SavedModel's own `predict` graph instead, which the caller then
compiles like any other TensorFlow code.
"""
import json
import os
import threading

import numpy as np
import tensorflow as tf

from ipu_keras._src.device.executable import CYCLE_KINDS, Executable
from ipu_keras._src.runtime import Session
from ipu_keras._src.serving.export import FORMAT, INFO_FILE, as_list
from ipu_keras.errors import ServingError, ServingTypeError


def info_path(export_dir):
    return os.path.join(os.fspath(export_dir), "assets", INFO_FILE)


def is_serving_export(export_dir):
    """True if `export_dir` was written by `ipu.serving` (it has the info asset)."""
    return os.path.isfile(info_path(export_dir))


def read_info(export_dir):
    """The export's `ipu_serving.json`, checked.

    Raises:
        ServingError: the directory holds no ipu.serving export, or one of another format.
    """
    path = info_path(export_dir)
    if not os.path.isfile(path):
        _refuse_sdk_export(export_dir)
        raise ServingError(
            f"ipu.serving expected a directory written by ipu.serving.export_single_step, "
            f"export_pipeline or export_keras (with assets/{INFO_FILE}). Received: "
            f"export_dir={os.fspath(export_dir)!r}, which has no such file. A SavedModel of "
            "another origin runs with tf.saved_model.load, or on the IPU with "
            "ipu_saved_model_cli run.")
    with open(path, encoding="utf-8") as f:
        try:
            info = json.load(f)
        except ValueError as e:
            raise ServingError(f"ipu.serving expected '{path}' to be JSON. Received: {e}. "
                               "Export the model again.") from None
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        raise ServingError(
            f"ipu.serving expected export format {FORMAT}. Received: format="
            f"{info.get('format') if isinstance(info, dict) else None!r} in '{path}'. Export "
            "the model again with this version of ipu_keras.")
    return info


def _refuse_sdk_export(export_dir):
    """An export made by Graphcore's SDK holds a Poplar executable for real IPUs."""
    assets = os.path.join(os.fspath(export_dir), "assets")
    files = sorted(os.listdir(assets)) if os.path.isdir(assets) else []
    poplar = [f for f in files if f.endswith((".popef", ".poplar_exec"))]
    if poplar:
        raise ServingError(
            f"ipu.serving expected an export written by ipu_keras. Received: "
            f"export_dir={os.fspath(export_dir)!r}, whose assets hold {poplar[0]!r}, a "
            "Poplar executable made by Graphcore's SDK for real IPUs, which the simulator "
            "cannot run. Export the model again with ipu_keras.serving from its Python code.")


def _specs(entries):
    return [tf.TensorSpec(e["shape"], tf.as_dtype(e["dtype"]), name=e["name"]) for e in entries]


class ServingRuntime:
    """An exported model, loaded: call it as the function `ipu.serving.export_*` returned.

    Attributes:
        export_dir: The directory.
        info: Its `ipu_serving.json` (dict).
        input_signature: The exported inputs (`tf.TensorSpec`s named as the signature keys).
        loaded: The object `tf.saved_model.load` returned.
        executable: The IPU executable of the step (from the assets).
        signatures: `{'serving_default': fn}`: `fn(**inputs)` returns a dict of tensors
            keyed as the SavedModel signature's outputs (`output_0`, ... or the names).
        executions: How many times the step ran on the simulated IPU.
        last_cycles: The cycles of the last execution by kind (None before the first).
    """

    def __init__(self, export_dir):
        self.export_dir = os.fspath(export_dir)
        self.info = read_info(self.export_dir)
        self.input_signature = _specs(self.info["inputs"])
        self.step_signature = _specs(self.info["step_inputs"])
        self.loaded = tf.saved_model.load(self.export_dir)
        path = os.path.join(self.export_dir, "assets", self.info["executable"])
        self.executable = Executable.load(path)
        self.session = Session(self.executable, [], [], [])
        self.signatures = {"serving_default": self._serve}
        self.executions = 0
        self.last_cycles = None
        self._lock = threading.Lock()

    def __call__(self, *args, **kwargs):
        """Runs the export on one batch; returns a list of tensors, or a dict by output
        name when the export has `output_names` (as the SDK's function did)."""
        if any(tf.is_symbolic_tensor(x) for x in tf.nest.flatten((args, kwargs))):
            return self.loaded.predict(*args, **kwargs)
        results = self._run(self._inputs(args, kwargs))
        names = self.info["output_names"]
        return dict(zip(names, results)) if names else results

    def _serve(self, **kwargs):
        if any(tf.is_symbolic_tensor(x) for x in tf.nest.flatten(kwargs)):
            return self.loaded.signatures["serving_default"](**kwargs)
        return dict(zip(self.info["output_keys"], self._run(self._inputs((), kwargs))))

    def _inputs(self, args, kwargs):
        """The call's inputs as tensors in signature order, checked against it."""
        specs = self.input_signature
        names = [s.name for s in specs]
        unknown = sorted(set(kwargs) - set(names))
        given = dict(zip(names, args))
        twice = sorted(set(given) & set(kwargs))
        given.update(kwargs)
        if len(args) > len(specs) or unknown or twice or set(given) != set(names):
            raise ServingError(
                f"The exported model expected the inputs {names} (positional or by name). "
                f"Received: {len(args)} positional and {sorted(kwargs)} by name.")
        tensors = []
        for spec in specs:
            value = given[spec.name]
            if isinstance(value, (tf.Tensor, np.ndarray, np.generic)):
                tensor = tf.convert_to_tensor(value)   # arrays keep their dtype
            else:   # Python numbers and lists take the signature's
                tensor = tf.convert_to_tensor(value, dtype_hint=spec.dtype)
            if tensor.dtype != spec.dtype:
                raise ServingTypeError(
                    f"The exported model expected input '{spec.name}' of dtype "
                    f"{spec.dtype.name}. Received: dtype {tensor.dtype.name}.")
            if not spec.shape.is_compatible_with(tensor.shape):
                raise ServingError(
                    f"The exported model expected input '{spec.name}' of shape {spec.shape} "
                    f"and dtype {spec.dtype.name}. Received: shape {tensor.shape}, dtype "
                    f"{tensor.dtype.name}.")
            tensors.append(tensor)
        return tensors

    def _run(self, tensors):
        if self.info["preprocessing"]:
            tensors = as_list(self.loaded.ipu_preprocessing(*tensors))
        outputs = self.run_step([np.asarray(t) for t in tensors])
        results = [tf.convert_to_tensor(o) for o in outputs]
        if self.info["postprocessing"]:
            results = as_list(self.loaded.ipu_postprocessing(*results))
        return results

    def run_step(self, arrays):
        """One execution of the step's executable on `arrays`; returns its outputs."""
        with self._lock:
            outputs = self.session.run(arrays)
            self.executions += 1
            self.last_cycles = dict(self.session.last_cycles)
        return outputs

    def run_signature(self, arrays):
        """`serving_default` on numpy `arrays` (input key -> array): (outputs by key as
        numpy arrays, cycles of the execution by kind), for `ipu_saved_model_cli run`."""
        tensors = self._inputs((), arrays)
        results = self._run(tensors)
        outputs = {k: np.asarray(r) for k, r in zip(self.info["output_keys"], results)}
        cycles = {k: int(self.last_cycles.get(k, 0)) for k in CYCLE_KINDS}
        return outputs, cycles


def load(export_dir):
    """The `ServingRuntime` of the export in `export_dir`."""
    return ServingRuntime(export_dir)


__all__ = ["ServingRuntime", "is_serving_export", "load", "read_info"]
