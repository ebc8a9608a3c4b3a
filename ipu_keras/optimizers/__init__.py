"""`ipu.optimizers`: optimizer wrappers of the IPU port of TensorFlow."""
from ipu_keras.optimizers.als_optimizer import (
    ALSGradientAccumulationOptimizer, ALSOptimizer, ALSOptimizerAdam, ALSOptimizerRMSProp,
    ALSOptimizerSGD,
)
from ipu_keras._src.keras.cross_replica_optimizer import CrossReplicaOptimizer
from ipu_keras._src.keras.gradient_accumulation_optimizer import (
    GradientAccumulationOptimizer, GradientAccumulationOptimizerV2,
)

__all__ = ["ALSGradientAccumulationOptimizer", "ALSOptimizer", "ALSOptimizerAdam",
           "ALSOptimizerRMSProp", "ALSOptimizerSGD", "CrossReplicaOptimizer",
           "GradientAccumulationOptimizer", "GradientAccumulationOptimizerV2"]
