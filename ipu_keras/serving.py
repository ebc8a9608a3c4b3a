"""`ipu.serving`: export a model as a SavedModel holding its compiled IPU program.

Graphcore's `tensorflow.python.ipu.serving` (SDK 2.5+; the SDK 3.x signatures): each
export freezes the function (variables become constants), compiles it for the active
`IPUConfig` and writes a TensorFlow SavedModel to `export_dir`:

* its `serving_default` signature is preprocessing -> the IPU step -> postprocessing, as
  plain TensorFlow: `tf.saved_model.load(export_dir)` runs it anywhere, on the CPU, and
  inside `IPUStrategy.run` it is compiled for the simulated IPU like any function;
* `assets/application_<uuid>.ipu_exec` is the IPU program compiled at export time, and
  `assets/ipu_serving.json` says how to run it. `ipu_keras.serving.load(export_dir)` (and
  the function each export returns, and `ipu_saved_model_cli run`) runs the
  preprocessing and postprocessing on the CPU and that executable on the simulated IPU,
  without recompiling, as the SDK's embedded runtime did.

`model.export_for_ipu_serving(...)` (SDK 2.6+) is `export_keras(model, ...)`. A
TensorFlow Serving server cannot run the executable; it runs the plain graph on the CPU.

Each call runs the step once, on one batch. `iterations` is checked and recorded: the
SDK's engine read that many batches per run (padding with dummy batches when requests
stop), which changes latency, not results.
"""
from ipu_keras._src import compat as _compat
from ipu_keras._src.keras.trainer import IPUTrainerMixin as _IPUModel
from ipu_keras._src.serving import exports as _exports
from ipu_keras._src.serving import signatures as _signatures
from ipu_keras._src.serving.runtime import ServingRuntime, is_serving_export, load
from ipu_keras.errors import ServingError
from ipu_keras.ops import pipelining_ops as _pipelining_ops


def _legacy_signature(predict_step_signature, input_signature, function):
    """SDK 2.5-2.6 called `predict_step_signature` `input_signature`."""
    if input_signature is None:
        return predict_step_signature
    _compat.warn_once(f"ipu.serving.{function}(input_signature=)", "predict_step_signature=")
    if predict_step_signature is not None:
        raise ServingError(
            "Both `predict_step_signature` and its SDK 2.x name `input_signature` were given. "
            "Please pass only `predict_step_signature`.")
    return input_signature


def export_single_step(predict_step, export_dir, iterations, predict_step_signature=None,
                       input_dataset=None, output_names=None, preprocessing_step=None,
                       preprocessing_step_signature=None, postprocessing_step=None,
                       postprocessing_step_signature=None, purge_export_dir=False,
                       input_signature=None):
    """Writes a SavedModel in `export_dir` that runs `predict_step` on the IPU.

    Flow of the exported model: `preprocessing_step` (optional, CPU) -> `predict_step`
    (IPU) -> `postprocessing_step` (optional, CPU).

    Args:
        predict_step: The function (Python or tf.function) compiled for the IPU.
        export_dir: A new or empty directory.
        iterations: Batches per run of the SDK's engine (a positive int; recorded).
        predict_step_signature: `tf.TensorSpec`s of `predict_step`'s arguments (else the
            tf.function's `input_signature`, or `input_dataset`'s element spec).
        input_dataset: A `tf.data.Dataset` whose element spec gives the exported inputs.
        output_names: A name or list of names for the outputs (default `output_<i>`).
        preprocessing_step: A function run on the CPU before `predict_step`; its outputs
            must match `predict_step`'s signature exactly.
        preprocessing_step_signature: Its `tf.TensorSpec`s (the exported inputs then).
        postprocessing_step: A function run on the CPU on `predict_step`'s outputs.
        postprocessing_step_signature: Its `tf.TensorSpec`s.
        purge_export_dir: Empty a non-empty `export_dir` first instead of failing.
        input_signature: The SDK 2.5-2.6 name of `predict_step_signature` (warns once).

    Returns:
        A `ServingRuntime`: calling it with the exported inputs runs the model (the
        executable on the simulated IPU) and returns a list of tensors, or a dict when
        `output_names` is given.

    Raises:
        ServingError (a ValueError) or ServingTypeError (a TypeError): with the SDK's
            rules, for a non-empty `export_dir`, a signature that cannot be deduced or does
            not match, mismatched pre/postprocessing, wrong `output_names` or `iterations`.
    """
    predict_step_signature = _legacy_signature(predict_step_signature, input_signature,
                                               "export_single_step")
    iterations = _signatures.check_iterations(iterations)
    output_names = _signatures.check_output_names(output_names)
    export_dir = _signatures.check_export_dir(export_dir, purge_export_dir)
    found = _exports.signatures_of(predict_step, predict_step_signature, input_dataset,
                                   preprocessing_step, preprocessing_step_signature,
                                   postprocessing_step, postprocessing_step_signature)
    return _exports.export_and_load(predict_step, found, export_dir, iterations, output_names,
                                    preprocessing_step, postprocessing_step, "single_step")


def _check_stages(computational_stages, iterations, device_mapping, pipeline_schedule):
    if not isinstance(computational_stages, (list, tuple)) or not computational_stages or \
            not all(callable(s) for s in computational_stages):
        raise ServingError(
            "ipu.serving.export_pipeline expected `computational_stages` to be a list of "
            f"functions. Received: computational_stages={computational_stages!r}")
    stages = list(computational_stages)
    mapping = list(range(len(stages))) if device_mapping is None else device_mapping
    if not isinstance(mapping, list) or len(mapping) != len(stages) or not all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in mapping):
        raise ServingError(
            f"ipu.serving.export_pipeline expected `device_mapping` to be a list of IPU "
            f"indices, one per stage ({len(stages)}). Received: device_mapping={mapping!r}")
    schedule = (_pipelining_ops.PipelineSchedule.Grouped if pipeline_schedule is None
                else _pipelining_ops.PipelineSchedule(pipeline_schedule))
    _pipelining_ops.check_depth(iterations, schedule, len(stages), False, mapping)
    return stages, mapping, schedule


def export_pipeline(computational_stages, export_dir, iterations, inputs=None,
                    device_mapping=None, pipeline_schedule=None, poplar_options=None,
                    name=None, predict_step_signature=None, input_dataset=None,
                    output_names=None, preprocessing_step=None,
                    preprocessing_step_signature=None, postprocessing_step=None,
                    postprocessing_step_signature=None, purge_export_dir=False,
                    input_signature=None):
    """Writes a SavedModel in `export_dir` that runs `computational_stages` on the IPUs.

    As `export_single_step`, with the step made of the stages: stage k takes the outputs
    of stage k - 1, stage 0 takes `inputs` (constants, not part of the exported
    signature) then the fed inputs. Stage k runs on IPU `device_mapping[k]` (default k),
    so the active `IPUConfig` needs that many IPUs. `iterations` is the pipeline depth
    and follows the pipeline's rule for `pipeline_schedule` (Grouped: a multiple of the
    number of stages). Each call takes one micro-batch through the stages;
    `poplar_options` and `name` are recorded.

    Returns:
        A `ServingRuntime` (see `export_single_step`).
    """
    predict_step_signature = _legacy_signature(predict_step_signature, input_signature,
                                               "export_pipeline")
    iterations = _signatures.check_iterations(iterations)
    stages, mapping, schedule = _check_stages(computational_stages, iterations,
                                              device_mapping, pipeline_schedule)
    output_names = _signatures.check_output_names(output_names)
    export_dir = _signatures.check_export_dir(export_dir, purge_export_dir)
    leading = list(inputs or [])
    found = _exports.signatures_of(stages[0], predict_step_signature, input_dataset,
                                   preprocessing_step, preprocessing_step_signature,
                                   postprocessing_step, postprocessing_step_signature, leading)
    extra = {"stages": len(stages), "device_mapping": mapping, "pipeline_schedule":
             schedule.name, "name": name, "poplar_options": poplar_options is not None}
    step = _exports.pipelined_step(stages, mapping, leading)
    return _exports.export_and_load(step, found, export_dir, iterations, output_names,
                                    preprocessing_step, postprocessing_step, "pipeline", extra)


def export_keras(model, export_dir, batch_size=None, output_names=None,
                 preprocessing_step=None, preprocessing_step_signature=None,
                 postprocessing_step=None, postprocessing_step_signature=None,
                 purge_export_dir=False):
    """Writes a SavedModel in `export_dir` that runs the Keras `model`'s inference.

    The model must have been created in `IPUStrategy().scope()` (an IPU model). The
    inputs are the model's, with dimension 0 set to `batch_size` when given; `iterations`
    is the model's `steps_per_execution`. The step is `model(inputs, training=False)`;
    a pipelined model's stages run in order, one batch per call.

    Returns:
        A `ServingRuntime` (see `export_single_step`).
    """
    if not isinstance(model, _IPUModel):
        raise ServingError(
            "Provided model was not created inside an IPU strategy, so it does not contain "
            "IPU-specific functions. Please wrap its creation inside an IPU strategy. "
            f"Received: {type(model).__name__}")
    return _exports.export_model(model, export_dir, batch_size, output_names,
                                 preprocessing_step, preprocessing_step_signature,
                                 postprocessing_step, postprocessing_step_signature,
                                 purge_export_dir)


__all__ = ["ServingRuntime", "export_keras", "export_pipeline", "export_single_step",
           "is_serving_export", "load"]
