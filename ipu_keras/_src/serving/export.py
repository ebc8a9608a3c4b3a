"""Writing an `ipu.serving` export: a TensorFlow SavedModel holding an IPU executable.

Owns freezing the functions (variables become constants with their values at export
time), compiling the IPU part for the active `IPUConfig` (the project's tracer and
`compile_for_ipu`, as `IPUStrategy.run` does), and writing the directory:

* `saved_model.pb`: a real SavedModel. Its `serving_default` signature (the tf.function
  `predict`) is preprocessing -> the frozen step -> postprocessing as plain TensorFlow,
  so `tf.saved_model.load` without ipu_keras runs all of it on the CPU. The parts are
  also saved on their own (`ipu_step`, `ipu_preprocessing`, `ipu_postprocessing`) for the
  runtime.
* `assets/application_<uuid>.ipu_exec`: the compiled step, in the executable format of
  `_src/device/executable.py` (the SDK wrote a PopEF file there).
* `assets/ipu_serving.json`: what the runtime needs (`runtime.py`): the executable's file
  name, the signature keys, which parts exist, `iterations`, the kind of export.

Loading and running the export is `runtime.py`'s.
"""
import json
import os
import tempfile
import uuid

import numpy as np
import tensorflow as tf
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

from ipu_keras._src.driver.compile import compile_for_ipu
from ipu_keras._src.tracer import trace
from ipu_keras.errors import ServingError

INFO_FILE = "ipu_serving.json"
FORMAT = 1


def as_list(values):
    """A function's result as a flat list of tensors (one tensor -> [tensor])."""
    if values is None:
        return []
    return list(tf.nest.flatten(values))


def freeze(fn, signature, fn_name):
    """`fn` traced on `signature` with its variables as constants: (ConcreteFunction,
    output TensorSpecs of its flattened results)."""
    def wrapper(*args):
        return as_list(fn(*args))

    wrapper.__name__ = fn_name
    function = tf.function(wrapper, input_signature=signature)
    concrete = convert_variables_to_constants_v2(function.get_concrete_function())
    outputs = [tf.TensorSpec(t.shape, t.dtype) for t in concrete.outputs]
    if not outputs:
        raise ServingError(
            f"ipu.serving expected `{fn_name}` to return at least one tensor. Received: "
            f"{function.python_function.__name__} returned nothing.")
    return concrete, outputs


def _check_matching(tensors, specs, source, target):
    """The tensors `source` returns must be exactly what `target`'s signature takes."""
    if len(tensors) != len(specs):
        raise ServingError(
            f"The number of the `{source}` outputs does not match the number of "
            f"`tf.TensorSpec` objects in the signature of `{target}`. Received: "
            f"{len(tensors)} outputs for {len(specs)} specs.")
    for index, (tensor, spec) in enumerate(zip(tensors, specs)):
        if tensor.shape.as_list() != spec.shape.as_list() or tensor.dtype != spec.dtype:
            raise ServingError(
                f"`{source}` returned Tensor at position {index} does not match required "
                f"`{target}` TensorSpec. Received: shape {tensor.shape}, dtype "
                f"{tensor.dtype.name}; expected shape {spec.shape}, dtype {spec.dtype.name}.")


def _static(signature, fn_name):
    for spec in signature:
        if not spec.shape.is_fully_defined():
            raise ServingError(
                f"ipu.serving expected the signature of `{fn_name}` to have static shapes: "
                f"the IPU program is compiled for fixed shapes. Received: {spec} (give every "
                "dimension, the batch size too).")


def compile_step(step, step_signature, name):
    """The executable of the frozen `step` on its signature (the active IPUConfig)."""
    examples = [np.zeros(s.shape, s.dtype.as_numpy_dtype) for s in step_signature]
    traced = trace(lambda *args: as_list(step(*args)), examples)
    if traced.variables:
        raise ServingError(
            f"ipu.serving expected the frozen step to hold no variables. Received: "
            f"{len(traced.variables)} variables left after freezing '{name}'.")
    return compile_for_ipu(traced.graph, None, name)


class Parts:
    """The frozen functions of one export and the checks between them."""

    def __init__(self, step, step_signature, input_signature, preprocessing=None,
                 postprocessing=None, postprocessing_signature=None, output_names=None):
        _static(step_signature, "predict_step")
        self.step, self.step_outputs = freeze(step, step_signature, "predict_step")
        self.pre = self.post = None
        if preprocessing is not None:
            self.pre, pre_outputs = freeze(preprocessing, input_signature, "preprocessing_step")
            _check_matching(pre_outputs, step_signature, "preprocessing_step", "predict_step")
        results = self.step_outputs
        if postprocessing is not None:
            _check_matching(self.step_outputs, postprocessing_signature, "predict_step",
                            "postprocessing_step")
            self.post, results = freeze(postprocessing, postprocessing_signature,
                                        "postprocessing_step")
        if output_names is not None and len(output_names) != len(results):
            raise ServingError(
                f"Length of output_names does not match the number of results returned by "
                f"the predict function. Received: output_names={output_names} for "
                f"{len(results)} results.")
        self.output_keys = output_names or [f"output_{i}" for i in range(len(results))]
        self.output_names = output_names
        self.step_signature, self.input_signature = step_signature, input_signature
        self.post_signature = postprocessing_signature

    def predict(self, *args):
        values = list(args)
        if self.pre is not None:
            values = as_list(self.pre(*values))
        results = as_list(self.step(*values))
        if self.post is not None:
            results = as_list(self.post(*results))
        return dict(zip(self.output_names, results)) if self.output_names else results


def _function(fn, signature):
    return tf.function(fn, input_signature=signature, autograph=False)


def _module(parts, executable_path, info_path):
    module = tf.Module()
    module.ipu_executable = tf.saved_model.Asset(executable_path)
    module.ipu_serving_info = tf.saved_model.Asset(info_path)
    module.ipu_step = _function(lambda *a: as_list(parts.step(*a)), parts.step_signature)
    if parts.pre is not None:
        module.ipu_preprocessing = _function(lambda *a: as_list(parts.pre(*a)),
                                             parts.input_signature)
    if parts.post is not None:
        module.ipu_postprocessing = _function(lambda *a: as_list(parts.post(*a)),
                                              parts.post_signature)
    module.predict = _function(parts.predict, parts.input_signature)
    return module


def _spec_json(specs):
    return [{"name": s.name, "shape": s.shape.as_list(), "dtype": s.dtype.name} for s in specs]


def write(export_dir, parts, iterations, kind, extra=None):
    """Compiles the step and writes the export (module docstring)."""
    executable = compile_step(parts.step, parts.step_signature, f"serving_{kind}")
    name = f"application_{uuid.uuid4()}.ipu_exec"
    with tempfile.TemporaryDirectory() as folder:
        executable_path = os.path.join(folder, name)
        executable.save(executable_path)
        info = {
            "format": FORMAT, "kind": kind, "executable": name, "iterations": iterations,
            "inputs": _spec_json(parts.input_signature),
            "step_inputs": _spec_json(parts.step_signature),
            "step_outputs": _spec_json(parts.step_outputs),
            "output_keys": parts.output_keys, "output_names": parts.output_names,
            "preprocessing": parts.pre is not None, "postprocessing": parts.post is not None,
            "target": executable.target,
        }
        info.update(extra or {})
        info_path = os.path.join(folder, INFO_FILE)
        with open(info_path, "w", encoding="utf-8") as f:
            json.dump(info, f, indent=2)
        module = _module(parts, executable_path, info_path)
        tf.saved_model.save(module, export_dir,
                            signatures={"serving_default": module.predict.get_concrete_function()})
    return info


__all__ = ["FORMAT", "INFO_FILE", "Parts", "as_list", "compile_step", "freeze", "write"]
