"""`ipu.gradient_accumulation`: Graphcore's `GradientAccumulationReductionMethod`.

The accumulation window itself (buffers, counter and the once-per-window update) is the
Keras trainer's machinery, `ipu_keras/_src/keras/gradient_accumulation.py`; the
optimizer wrappers (`ipu_keras.optimizers`) and `loops.repeat` use it from there.
"""
from ipu_keras._src.keras.gradient_accumulation import GradientAccumulationReductionMethod

__all__ = ["GradientAccumulationReductionMethod"]
