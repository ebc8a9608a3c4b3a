"""Keras models on the simulated IPU: `Model`, `Sequential`, the trainer mixin, layers and
the pipelining API (`PipelineStage`, stage assignment records)."""
from ipu_keras.keras import layers
from ipu_keras.keras.models import Functional, Model, Sequential
from ipu_keras.keras.pipeline_stage import (
    FunctionalLayerPipelineStageAssignment, ModelLayerPipelineStageAssignment, PipelineStage,
    SequentialLayerPipelineStageAssignment,
)
from ipu_keras.keras.trainer import IPUTrainerMixin

__all__ = ["Functional", "FunctionalLayerPipelineStageAssignment", "IPUTrainerMixin", "Model",
           "ModelLayerPipelineStageAssignment", "PipelineStage",
           "SequentialLayerPipelineStageAssignment", "Sequential", "layers"]
