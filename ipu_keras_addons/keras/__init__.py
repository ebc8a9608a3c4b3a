"""Keras (TF2) part of the addons: `layers` and `optimizers`."""
from ipu_keras_addons.keras import layers
from ipu_keras_addons.keras import optimizers

__all__ = ["layers", "optimizers"]
