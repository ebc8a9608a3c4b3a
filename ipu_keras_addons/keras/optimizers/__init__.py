"""The IPU Keras optimizers of IPU TensorFlow Addons."""
from ipu_keras_addons.keras.optimizers.adam_optimizer import AdamIpuOptimizer
from ipu_keras_addons.keras.optimizers.ipu_optimizer_base import IpuOptimizerBase
from ipu_keras_addons.keras.optimizers.lamb_optimizer import LAMBIpuOptimizer
from ipu_keras_addons.keras.optimizers.sgd_optimizer import SGDIpuOptimizer

__all__ = ["AdamIpuOptimizer", "IpuOptimizerBase", "LAMBIpuOptimizer", "SGDIpuOptimizer"]
