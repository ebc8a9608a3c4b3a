"""The IPU Keras layers of IPU TensorFlow Addons, with the original's names and aliases."""
from ipu_keras_addons.keras.layers.ctc import CTCInferenceLayer
from ipu_keras_addons.keras.layers.ctc import CTCLoss
from ipu_keras_addons.keras.layers.ctc import CTCPredictionsLayer
from ipu_keras_addons.keras.layers.dense import SerialDense
from ipu_keras_addons.keras.layers.dropout import Dropout
from ipu_keras_addons.keras.layers.effective_transformer import EffectiveTransformer
from ipu_keras_addons.keras.layers.embedding_lookup import Embedding
from ipu_keras_addons.keras.layers.assume_equal_across_replicas import AssumeEqualAcrossReplicas
from ipu_keras_addons.keras.layers.recomputation import RecomputationCheckpoint
from ipu_keras_addons.keras.layers.normalization import GroupNorm
from ipu_keras_addons.keras.layers.normalization import GroupNormalization
from ipu_keras_addons.keras.layers.normalization import InstanceNorm
from ipu_keras_addons.keras.layers.normalization import InstanceNormalization
from ipu_keras_addons.keras.layers.normalization import LayerNorm
from ipu_keras_addons.keras.layers.normalization import LayerNormalization
from ipu_keras_addons.keras.layers.rnn import GRU
from ipu_keras_addons.keras.layers.rnn import LSTM
from ipu_keras_addons.keras.layers.rnn import PopnnGRU
from ipu_keras_addons.keras.layers.rnn import PopnnLSTM

__all__ = [
    "AssumeEqualAcrossReplicas", "CTCInferenceLayer", "CTCLoss", "CTCPredictionsLayer",
    "Dropout", "EffectiveTransformer", "Embedding", "GroupNorm", "GroupNormalization", "GRU", "InstanceNorm",
    "InstanceNormalization", "LayerNorm", "LayerNormalization", "LSTM", "PopnnGRU",
    "PopnnLSTM", "RecomputationCheckpoint", "SerialDense",
]
