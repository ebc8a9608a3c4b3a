"""`ipu.optimizers`: optimizer wrappers of the IPU port of TensorFlow."""
from ipu_keras.optimizers.gradient_accumulation_optimizer import (
    GradientAccumulationOptimizer, GradientAccumulationOptimizerV2,
)

__all__ = ["GradientAccumulationOptimizer", "GradientAccumulationOptimizerV2"]
