"""The public surface: the original's names and aliases, under the original's module layout."""
import importlib

import pytest

LAYERS = ["AssumeEqualAcrossReplicas", "CTCInferenceLayer", "CTCLoss", "CTCPredictionsLayer",
          "SerialDense", "Dropout", "Embedding", "GroupNorm", "InstanceNorm", "LayerNorm",
          "GroupNormalization", "InstanceNormalization", "LayerNormalization",
          "RecomputationCheckpoint", "PopnnLSTM", "LSTM", "PopnnGRU", "GRU",
          "EffectiveTransformer"]
OPTIMIZERS = ["IpuOptimizerBase", "AdamIpuOptimizer", "LAMBIpuOptimizer", "SGDIpuOptimizer"]
MODULES = {
    "keras.layers.dense": "SerialDense", "keras.layers.dropout": "Dropout",
    "keras.layers.embedding_lookup": "Embedding", "keras.layers.normalization": "GroupNorm",
    "keras.layers.rnn": "PopnnLSTM", "keras.layers.ctc": "CTCLoss",
    "keras.layers.recomputation": "RecomputationCheckpoint",
    "keras.layers.effective_transformer": "EffectiveTransformer",
    "keras.layers.assume_equal_across_replicas": "AssumeEqualAcrossReplicas",
    "keras.optimizers.adam_optimizer": "AdamIpuOptimizer",
    "keras.optimizers.lamb_optimizer": "LAMBIpuOptimizer",
    "keras.optimizers.sgd_optimizer": "SGDIpuOptimizer",
    "keras.optimizers.ipu_optimizer_base": "IpuOptimizerBase",
}


def test_the_packages_export_the_original_names():
    from ipu_keras_addons.keras import layers, optimizers
    assert set(LAYERS) <= set(layers.__all__)
    assert set(OPTIMIZERS) <= set(optimizers.__all__)
    assert layers.LSTM is layers.PopnnLSTM and layers.GRU is layers.PopnnGRU
    assert layers.LayerNormalization is layers.LayerNorm


@pytest.mark.parametrize("module, name", sorted(MODULES.items()))
def test_the_original_module_layout(module, name):
    assert hasattr(importlib.import_module(f"ipu_keras_addons.{module}"), name)
