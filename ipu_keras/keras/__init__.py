"""Keras models on the simulated IPU: `Model`, `Sequential` and the trainer mixin."""
from ipu_keras.keras import layers
from ipu_keras.keras.models import Functional, Model, Sequential
from ipu_keras.keras.trainer import IPUTrainerMixin

__all__ = ["Functional", "IPUTrainerMixin", "Model", "Sequential", "layers"]
