"""The IPU TensorFlow names that need no code of their own in `compat.py`'s table.

Deprecated spellings are declared where they are implemented (by the decorators of
`compat.py`); this module declares the current names, the ones other work is adding
(supported as soon as the code has them, pending until then) and the ones that will
not be supported.
"""
from ipu_keras import keras as ipu_keras_keras
from ipu_keras._src.compat import DEPRECATED, NOT_SUPPORTED, PENDING, SUPPORTED, declare
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
    ("ipu.ipu_outfeed_queue.IPUOutfeedQueueIterator", "`for x in queue` (eager, mode ALL) "
     "yields one enqueue at a time, in its structure, until the queue is drained", "2.2"),
    ("ipu.loops.repeat", "a counted loop in the executable; the body returns tensors then "
     "operations (run every iteration, not carried), as the SDK", "2.1"),
    ("ipu.pipelining_ops.pipeline", "stages on the simulated IPUs, gradients accumulated on "
     "the device; in tf.function and in TF1 graphs (`ipu_compiler.compile`); results leave "
     "through the outfeed in the SDK's structures", "2.1"),
    ("ipu.config.IPUConfig.allow_recompute", "recomputation, as the SDK's compiler: in a "
     "training pipeline each stage's backward pass recomputes its forward values from its "
     "inputs and checkpoints (the memory plan frees them after the forward pass, the cycles "
     "count the recomputed forward); outside pipelines Conv -> fused batch norm (-> relu or "
     "sigmoid) chains are recomputed before their gradients and casts of parameters per "
     "reader", "2.1"),
    ("ipu.pipelining_ops.RecomputationMode", "Auto, RecomputeThenBackpropagate, "
     "RecomputeAndBackpropagateInterleaved, with the SDK's schedule rules; also "
     "`set_pipelining_options(recomputation_mode=...)`", "2.1"),
    ("ipu.pipelining_ops.recomputation_checkpoint", "kept values recomputation starts from "
     "(RecomputeAndBackpropagateInterleaved); a view, no copy", "2.1"),
    ("ipu_tensorflow_addons.keras.layers.RecomputationCheckpoint", "`ipu_keras_addons.keras."
     "layers.RecomputationCheckpoint`: `recomputation_checkpoint` as a layer", "2.6"),
    ("ipu.scopes.ipu_scope: TF1 ops outside ipu_compiler.compile", "clustered for the IPU "
     "as the SDK's auto-clustering did: `Session.run` compiles each cluster (per input "
     "shape, cached) and runs it on the simulated IPU, gradients included; ops on variables "
     "and datasets stay on the host; an op without an IPU kernel warns and runs on the CPU",
     "2.1"),
    ("tf.device('/device:IPU:0'): eager ops", "each op compiled on its own for the simulated "
     "IPU (after `import ipu_keras`), cached by op, attributes and input signature; ops on "
     "variables, eager tf.function calls and ops without an IPU kernel warn and run on the "
     "CPU", "2.1"),
    ("keras.ipu, tf.keras.ipu", "after `import keras` or `from tensorflow import keras`, "
     "`import ipu_keras` makes them the module `ipu_keras.keras` (also `import keras.ipu`, "
     "`from keras.ipu.optimizers import ...`)", "2.6"),
    ("ipu.scopes.ipu_scope", "the device scope (one simulated system); in a TF1 graph, "
     "variables made inside are resource variables and tf.data datasets stay on the host",
     "2.1"),
    ("ipu.ipu_compiler.compile (TF1 graph)", "one host op runs the compiled cluster per "
     "Session.run; tensors it reads from outside (placeholders, a dataset iterator's "
     "get_next()) are its inputs, computed on the host", "2.1"),
    ("ipu.optimizers.CrossReplicaOptimizer", "the mean of the replicas' gradients is applied; "
     "wraps Keras optimizers and TF1 optimizers (minimize included)", "2.1"),
    ("ipu_tensorflow_addons.v1.layers.PopnnLSTM", "`ipu_keras_addons.v1.layers.PopnnLSTM`: "
     "time-major, (outputs, LSTMStateTuple(c, h)); weights in Keras' layout", "2.6"),
    ("ipu_tensorflow_addons.v1.layers.PopnnGRU", "`ipu_keras_addons.v1.layers.PopnnGRU`: "
     "time-major, (outputs, state); weights in Keras' layout", "2.6"),
    ("Keras models created in IPUStrategy().scope()", "the IPU trainer mixin is put in front "
     "of their class (Sequential, functional, subclassed, keras.applications)", "2.2"),
    ("model.fit / evaluate / predict (steps_per_execution)", "`steps_per_execution` steps "
     "per device execution", "2.2"),
    ("model.train_on_batch / test_on_batch / predict_on_batch", "one step per execution",
     "2.2"),
    ("model.set_asynchronous_callbacks", "per-step callbacks replayed from the outfeed",
     "2.2"),
    ("ipu.serving.export_single_step", "a TensorFlow SavedModel whose `serving_default` is "
     "the frozen step (plain TensorFlow runs it on the CPU) plus the step's compiled "
     "executable as an asset; the returned function, `ipu_keras.serving.load` and "
     "`ipu_saved_model_cli run` run that executable on the simulated IPU, one batch per "
     "call (`iterations` is checked and recorded); pre/postprocessing (SDK 3.0+) on the CPU",
     "2.5"),
    ("ipu.serving.export_pipeline", "as `export_single_step`; each stage on its IPU "
     "(`device_mapping`), one micro-batch through the stages per call; `iterations` follows "
     "the pipeline-depth rule of `pipeline_schedule`", "2.5"),
    ("ipu.serving.export_keras", "as `export_single_step` for a model created in "
     "`IPUStrategy().scope()`; `iterations` is its `steps_per_execution`; a pipelined "
     "model's stages run in order", "2.6"),
    ("model.set_infeed_queue_options", "Graphcore's checks; `prefetch_depth` prefetches that "
     "many batches on the host ahead of the device; `optimise_latency`, `device_ordinal` "
     "kept without effect", "2.4"),
    ("model.set_outfeed_queue_options", "Graphcore's checks; `buffer_depth` and "
     "`optimise_latency` kept without effect (the host buffer is unbounded)", "2.4"),
    ("model.compile(steps_per_execution=<tensor>)", "an integer scalar tensor or variable "
     "(`dataset.cardinality()`) is kept as its int", "2.2"),
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
    ("export_for_ipu_serving", "2.6"),
)

# Graphcore's op package and the SDK 3.x spellings (issue 31, item 7).
_OPS_PACKAGE = (  # name, how, since, until
    ("ipu.normalization_ops.group_norm", "TensorFlow ops run on the simulated IPU; its "
     "`beta`/`gamma` variables as in the SDK (TensorFlow 1 `get_variable`); strided or "
     "contiguous groups", "2.1", None),
    ("ipu.normalization_ops.layer_norm", "`group_norm` with one group: every non-batch axis",
     "2.1", None),
    ("ipu.normalization_ops.instance_norm", "`group_norm` with one group per channel", "2.1",
     None),
    ("ipu.embedding_ops.embedding_lookup", "a gather, or `serialization_factor` masked "
     "gathers summed; gradient one scatter-add", "2.1", None),
    ("ipu.embedding_ops.embedding_lookup(params, ids, name, serialization_factor)", "the "
     "SDK <= 2.6 order: a string or None third argument is the name", "2.1", "3.0"),
    ("ipu.embedding_ops.create_host_embedding", "a CPU variable; a `HostEmbedding` over it",
     "2.1", None),
    ("ipu.embedding_ops.HostEmbedding", "the table lives in host memory while registered; "
     "each lookup and update is a host transfer in the profile", "2.1", None),
    ("ipu.embedding_ops.HostEmbedding.register", "binds the table as host memory (session "
     "or eager); writes it back to the variable on exit", "2.1", None),
    ("ipu.embedding_ops.HostEmbedding.lookup", "one call to the host per lookup; trainable: "
     "the host adds -lr x gradient into the rows", "2.1", None),
    ("ipu.embedding_ops.HostEmbeddingOptimizerSpec", "SGD at a constant learning rate (0: "
     "frozen)", "2.1", None),
    ("ipu.embedding_ops.HostEmbeddingSGDGAOptimizerSpec", "the host sums "
     "`accumulation_factor` updates, then applies them", "2.1", None),
    ("ipu.distributed.popdist_strategy.PopDistStrategy", "`ipu_keras.distributed."
     "PopDistStrategy`; `update_ipu_config` checks and returns the config", "3.0", None),
    ("ipu.utils.IPUConfig", "the same class as `ipu.config.IPUConfig`", "2.1", None),
)

# Outlined functions and the embedded application runtime (issue 31).
_SUPPORTED += (
    ("ipu.functional_ops.outlined_function", "one body program per IPU shared by every call "
     "(arguments copied in, results out, a call overhead per call; the backward pass is "
     "outlined too; a stateful body is inlined, as in the SDK); the report lists it once "
     "with its calls; `unique_sharding` and "
     "`keep_input_layouts` are accepted (the body runs on its call's IPU and always gets "
     "its arguments copied)", "2.0"),
    ("ipu.outlined_function", "`ipu.functional_ops.outlined_function`", "2.0"),
    ("ipu.application_compile_op.experimental_application_compile_op", "writes the "
     "simulator's own executable format (a checksummed zip, no pickle) with the "
     "application's interface; eagerly it compiles at once, in a tf.function or a TF1 "
     "graph when run; `freeze_variables` embeds the variables' values at that time", "2.2"),
    ("ipu.embedded_runtime.embedded_runtime_start", "loads the file (refusing Poplar/PopEF "
     "files clearly) and starts its engine in a background thread; `timeout` is accepted "
     "and unused", "2.3"),
    ("ipu.embedded_runtime.embedded_runtime_call", "one infeed element in, one outfeed "
     "element out (one iteration of the program's loop; the program restarts when its loop "
     "is done), eagerly or inside a tf.function", "2.3"),
    ("ipu.embedded_runtime.embedded_runtime_start_and_call", "start, then call", "2.3"),
    ("ipu.embedded_runtime.embedded_runtime_stop", "raises NotImplementedError, as the "
     "SDK's", "2.3"),
    ("ipu.embedded_runtime.RuntimeContext", "`start_output`, `name`, `signature` (inputs, "
     "streamed inputs and outputs with names, shapes, dtypes), `output_types`", "2.3"),
)

_NOT_SUPPORTED = (
    ("ipu.ipu_estimator.IPUEstimator", "TensorFlow 1 estimators are not part of ipu_keras",
     "2.1", None),
    ("ipu.horovod.popdist_strategy.PopDistStrategy", "no `horovod` module: use "
     "`ipu.distributed.popdist_strategy.PopDistStrategy` (its SDK 3.0 path)", "2.4", "3.1"),
    ("ipu_tensorflow_addons.v1.layers.PopnnDynamicLSTM", "refused by name: use PopnnLSTM and "
     "mask the padded steps", "2.6", None),
    ("ipu_tensorflow_addons.v1.layers.PopnnDynamicGRU", "refused by name: use PopnnGRU and "
     "mask the padded steps", "2.6", None),
    ("ipu_tensorflow_addons.v1.layers.PopnnAUGRU", "refused by name: use PopnnGRU", "2.6",
     None),
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
for _function in ("export_single_step", "export_pipeline"):
    declare(f"ipu.serving.{_function}(input_signature=)", DEPRECATED, "accepted; warns once, "
            "use `predict_step_signature=` (renamed in SDK 3.0)", "2.5", "3.0")


for _name, _how, _since, _until in _OPS_PACKAGE:
    declare(_name, SUPPORTED, _how, _since, _until)
for _name, _how, _since, _until in _NOT_SUPPORTED:
    declare(_name, NOT_SUPPORTED, _how, _since, _until)
