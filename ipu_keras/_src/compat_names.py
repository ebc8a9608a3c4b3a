"""The IPU TensorFlow names that need no code of their own in `compat.py`'s table.

Deprecated spellings are declared where they are implemented (by the decorators of
`compat.py`); this module declares the current names, the ones other work is adding
(supported as soon as the code has them, pending until then) and the ones that will
not be supported.
"""
from ipu_keras import keras as ipu_keras_keras
from ipu_keras._src.compat import NOT_SUPPORTED, PENDING, SUPPORTED, declare
from ipu_keras._src.keras.trainer import IPUTrainerMixin

_SUPPORTED = (
    # name, how, since
    ("ipu.config.IPUConfig", "options validated with Graphcore's rules; the simulator reads "
     "the device, tiles, matmul/conv options", "2.1"),
    ("ipu.config.IPUConfig.configure_ipu_system", "makes a snapshot the active config", "2.1"),
    ("ipu.config.configure_ipu_system", "same as `IPUConfig.configure_ipu_system()`", "2.1"),
    ("ipu.ipu_strategy.IPUStrategy", "`scope`, `run`, `reduce`, `num_replicas_in_sync` (1), "
     "`extended`, `experimental_distribute_dataset`", "2.1"),
    ("ipu.ipu_strategy.IPUStrategy.run", "compiles once per signature, returns tf.Tensors",
     "2.2"),
    ("ipu.ipu_compiler.compile", "returns the flattened outputs as a list of tf.Tensors",
     "2.1"),
    ("ipu.ipu_infeed_queue.IPUInfeedQueue", "host thread prefetches `prefetch_depth`", "2.1"),
    ("ipu.ipu_outfeed_queue.IPUOutfeedQueue", "`dequeue` returns tf.Tensors", "2.1"),
    ("ipu.ipu_outfeed_queue.IPUOutfeedMode", "ALL and LAST", "2.1"),
    ("ipu.loops.repeat", "a counted loop in the executable", "2.1"),
    ("ipu.scopes.ipu_scope", "the device scope (one simulated system)", "2.1"),
    ("ipu.scopes.ipu_scope: TF1 ops outside ipu_compiler.compile", "clustered for the IPU "
     "as the SDK's auto-clustering did: `Session.run` compiles each cluster (per input "
     "shape, cached) and runs it on the simulated IPU, gradients included; ops on variables "
     "and datasets stay on the host; an op without an IPU kernel warns and runs on the CPU",
     "2.1"),
    ("tf.device('/device:IPU:0'): eager ops", "each op compiled on its own for the simulated "
     "IPU (after `import ipu_keras`), cached by op, attributes and input signature; ops on "
     "variables, eager tf.function calls and ops without an IPU kernel warn and run on the "
     "CPU", "2.1"),
    ("Keras models created in IPUStrategy().scope()", "the IPU trainer mixin is put in front "
     "of their class (Sequential, functional, subclassed, keras.applications)", "2.2"),
    ("model.fit / evaluate / predict (steps_per_execution)", "`steps_per_execution` steps "
     "per device execution", "2.2"),
    ("model.train_on_batch / test_on_batch / predict_on_batch", "one step per execution",
     "2.2"),
    ("model.set_asynchronous_callbacks", "per-step callbacks replayed from the outfeed",
     "2.2"),
)

# Names other work adds (pipelining, accumulation, replication): supported as soon as
# `ipu_keras.keras` (for `keras.ipu.X`) or the trainer mixin (for `model.X`) has them.
_KERAS_IPU = (  # name, since, until
    ("PipelineStage", "2.6", None),
    ("FunctionalLayerPipelineStageAssignment", "2.6", None),
    ("SequentialLayerPipelineStageAssignment", "2.6", None),
    ("ModelLayerPipelineStageAssignment", "2.6", None),
    ("NestedModelPipelineStageAssignment", "2.6", None),
    ("FunctionalNestedModelPipelineStageAssignment", "2.6", None),
    ("SequentialNestedModelPipelineStageAssignment", "2.6", None),
    ("ReplicatedMetricReductionMethod", "2.6", None),
)
_MODEL_METHODS = (  # name, since
    ("set_gradient_accumulation_options", "2.2"),
    ("set_pipelining_options", "2.2"),
    ("set_pipeline_stage_assignment", "2.2"),
    ("get_pipeline_stage_assignment", "2.2"),
    ("reset_pipeline_stage_assignment", "2.2"),
    ("print_pipeline_stage_assignment_summary", "2.2"),
    ("set_replication_options", "2.5"),
)

_NOT_SUPPORTED = (
    ("model.set_infeed_queue_options / set_outfeed_queue_options", "the Keras data path "
     "stages batches itself; no queue options to set", "2.2", None),
    ("ipu.ipu_estimator.IPUEstimator", "TensorFlow 1 estimators are not part of ipu_keras",
     "2.1", None),
)

for _name, _how, _since in _SUPPORTED:
    declare(_name, SUPPORTED, _how, _since)
# The SDK 2.0-2.1 IPU Keras classes; SDK 2.2 replaced them by Keras models in the scope.
declare("ipu.keras.Model", SUPPORTED, "`ipu_keras.Model` (Keras models created in "
        "`IPUStrategy().scope()` behave the same)", "2.0", "2.2")
declare("ipu.keras.Sequential", SUPPORTED, "`ipu_keras.Sequential`", "2.0", "2.2")

for _name, _since, _until in _KERAS_IPU:
    if hasattr(ipu_keras_keras, _name):
        declare(f"keras.ipu.{_name}", SUPPORTED, f"`ipu_keras.keras.{_name}`", _since, _until)
    else:
        declare(f"keras.ipu.{_name}", PENDING, f"to come as `ipu_keras.keras.{_name}`", _since,
                _until)
for _name, _since in _MODEL_METHODS:
    if hasattr(IPUTrainerMixin, _name):
        declare(f"model.{_name}", SUPPORTED, "a method of the IPU trainer mixin", _since)
    else:
        declare(f"model.{_name}", PENDING, "to come in the IPU trainer mixin", _since)
for _name, _since in (("GradientAccumulationOptimizer", "3.1"), ("ALSOptimizer", "3.0"),
                      ("ALSOptimizerAdam", "3.1"), ("ALSOptimizerSGD", "3.1"),
                      ("ALSOptimizerRMSProp", "3.1"), ("ALSGradientAccumulationOptimizer", "3.1")):
    declare(f"keras.ipu.optimizers.{_name}", SUPPORTED, f"`ipu_keras.keras.optimizers.{_name}`"
            " (the same as `ipu.optimizers.`)", _since)
for _name, _how, _since, _until in _NOT_SUPPORTED:
    declare(_name, NOT_SUPPORTED, _how, _since, _until)
