"""Keras models on the simulated IPU: `Model`, `Sequential`, the trainer mixin, layers and
the pipelining API (`PipelineStage`, stage assignment records) and SDK 2.0-2.1's
`PipelineSequential` and `PipelineModel`; `callbacks.IPUTensorBoard`. `optimizers` is `ipu_keras.optimizers` (the
SDK 3.x `keras.ipu.optimizers`: ALS and gradient accumulation)."""
from ipu_keras import optimizers
from ipu_keras.keras import callbacks, layers
from ipu_keras._src.keras.models import Functional, Model, Sequential
from ipu_keras._src.keras.pipeline_stage import (
    FunctionalLayerPipelineStageAssignment, ModelLayerPipelineStageAssignment, PipelineStage,
    SequentialLayerPipelineStageAssignment,
)
from ipu_keras._src.keras.replication import ReplicatedMetricReductionMethod
from ipu_keras._src.keras.sdk20_pipeline import PipelineModel, PipelineSequential
from ipu_keras._src.keras.trainer import IPUTrainerMixin

__all__ = ["Functional", "FunctionalLayerPipelineStageAssignment", "IPUTrainerMixin", "Model",
           "ModelLayerPipelineStageAssignment", "PipelineModel", "PipelineSequential",
           "PipelineStage", "ReplicatedMetricReductionMethod",
           "SequentialLayerPipelineStageAssignment", "Sequential", "callbacks", "layers",
           "optimizers"]
