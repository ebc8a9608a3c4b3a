"""The three exports behind `ipu.serving` and `model.export_for_ipu_serving`, argument
checks done by the callers: which signature feeds which part, the step of a pipeline
(its stages on their IPUs) and of a Keras model, then writing the export and loading it
back as the function the caller returns.

The public checks of each export (its arguments with the SDK's rules) are in
`ipu_keras/serving.py`; `signatures.py` has the signature rules, `export.py` writes the
directory and `runtime.py` runs it.
"""
import tensorflow as tf

from ipu_keras._src.placement import ipu_shard
from ipu_keras._src.serving import export, signatures
from ipu_keras._src.serving.runtime import load
from ipu_keras.errors import ServingError


def signatures_of(predict_step, predict_step_signature, input_dataset, preprocessing_step,
                  preprocessing_step_signature, postprocessing_step,
                  postprocessing_step_signature, leading=()):
    """(exported input signature, step signature, postprocessing signature)."""
    signatures.check_sources(predict_step, predict_step_signature, input_dataset,
                             preprocessing_step, preprocessing_step_signature,
                             postprocessing_step, postprocessing_step_signature)
    if preprocessing_step is not None:
        exported = signatures.prepare(preprocessing_step, "preprocessing_step",
                                      preprocessing_step_signature, input_dataset)
        step = signatures.prepare(predict_step, "predict_step", predict_step_signature,
                                  leading=leading)
    else:
        step = exported = signatures.prepare(predict_step, "predict_step",
                                             predict_step_signature, input_dataset, leading)
    post = None
    if postprocessing_step is not None:
        post = signatures.prepare(postprocessing_step, "postprocessing_step",
                                  postprocessing_step_signature)
    return exported, step, post


def export_and_load(step, specs, export_dir, iterations, output_names, preprocessing_step,
                    postprocessing_step, kind, extra=None):
    """Freezes, compiles and writes the export; returns its `ServingRuntime`."""
    exported, step_signature, post = specs
    parts = export.Parts(step, step_signature, exported, preprocessing_step,
                         postprocessing_step, post, output_names)
    export.write(export_dir, parts, iterations, kind, extra)
    return load(export_dir)


def pipelined_step(stages, mapping, inputs):
    """One micro-batch through the stages in order, each stage's ops on its IPU."""
    leading = [tf.convert_to_tensor(x) for x in (inputs or [])]

    def step(*fed):
        values = leading + list(fed)
        for stage, ipu in zip(stages, mapping):
            with ipu_shard(ipu):
                values = export.as_list(stage(*values))
        return values

    return step


def keras_signature(model, batch_size):
    """The model's inputs as `tf.TensorSpec`s named after its Input layers, dimension 0
    set to `batch_size` when given."""
    inputs = getattr(model, "inputs", None)
    if not inputs:
        raise ServingError(
            "Cannot get model's input signature: ipu.serving.export_keras expected a model "
            "with known inputs (a functional or Sequential model built with an Input, or a "
            f"model that was called). Received: {type(model).__name__} without `inputs`.")
    specs, names = [], set()
    for index, tensor in enumerate(inputs):
        shape = list(tensor.shape)
        if batch_size is not None:
            shape[0] = int(batch_size)
        if any(d is None for d in shape):
            raise ServingError(
                "Not all dimensions of inputs can be determined. Please specify batch size in "
                "model's input layer or specify `batch_size` parameter when exporting model. "
                f"Received: input {index} of shape {tuple(tensor.shape)}, "
                f"batch_size={batch_size!r}")
        name = getattr(tensor, "name", None)
        name = name if isinstance(name, str) and name and name not in names else f"input_{index}"
        names.add(name)
        specs.append(tf.TensorSpec(shape, tensor.dtype, name=name))
    return specs


def export_model(model, export_dir, batch_size=None, output_names=None,
                 preprocessing_step=None, preprocessing_step_signature=None,
                 postprocessing_step=None, postprocessing_step_signature=None,
                 purge_export_dir=False):
    """`export_keras` of an IPU model (see `ipu_keras.serving.export_keras`)."""
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(
            batch_size, int) or batch_size < 1):
        raise ServingError(f"ipu.serving.export_keras expected `batch_size` to be a positive "
                           f"int or None. Received: batch_size={batch_size!r}")
    output_names = signatures.check_output_names(output_names)
    export_dir = signatures.check_export_dir(export_dir, purge_export_dir)
    specs = keras_signature(model, batch_size)
    iterations = signatures.check_iterations(
        int(getattr(model, "steps_per_execution", 1) or 1), "steps_per_execution")
    single = len(specs) == 1

    def predict_step(*xs):
        return model(xs[0] if single else list(xs), training=False)

    found = signatures_of(predict_step, specs, None, preprocessing_step,
                          preprocessing_step_signature, postprocessing_step,
                          postprocessing_step_signature)
    return export_and_load(predict_step, found, export_dir, iterations, output_names,
                           preprocessing_step, postprocessing_step, "keras",
                           {"model": model.name})


__all__ = ["export_and_load", "export_model", "keras_signature", "pipelined_step",
           "signatures_of"]
