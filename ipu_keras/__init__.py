"""ipu_keras: train and run Keras models on a simulated Graphcore IPU.

`import ipu_keras as ipu` stands where `from tensorflow.python import ipu` stood:
`ipu.config.IPUConfig`, `ipu.ipu_strategy.IPUStrategy`, `ipu.ipu_compiler.compile`,
`ipu.ipu_infeed_queue`, `ipu.ipu_outfeed_queue`, `ipu.loops`, `ipu.scopes`,
`ipu.utils`, and the names of older SDKs (`ipu.compat` lists them all). The road
from a TensorFlow function to the simulator is:
tracer (TF graph -> IR) -> compiler (passes -> Executable) -> simulator (engine),
with runtime (feeds, variables) on the host side.

Names are loaded on first use, so that `ipu_keras.ir`, `ops`, `compiler` and
`simulator` import without TensorFlow.
"""
import importlib

from ipu_keras.version import __version__

_MODULES = (
    "compat", "config", "cross_replica_ops", "errors", "flags", "gen_ipu_ops",
    "gradient_accumulation", "ipu_compiler", "keras", "ipu_infeed_queue", "ipu_outfeed_queue",
    "ipu_strategy", "loops", "nn_ops", "optimizers", "pipelining_ops", "profiling", "rand_ops",
    "replication_ops", "scopes", "sharding", "utils",
)
_NAMES = {
    "IPUConfig": ("config", "IPUConfig"),
    "IPUInfeedQueue": ("ipu_infeed_queue", "IPUInfeedQueue"),
    "IPUOutfeedMode": ("ipu_outfeed_queue", "IPUOutfeedMode"),
    "IPUOutfeedQueue": ("ipu_outfeed_queue", "IPUOutfeedQueue"),
    "IPUStrategy": ("ipu_strategy", "IPUStrategy"),
    "Model": ("keras", "Model"),
    "PipelineStage": ("keras", "PipelineStage"),
    "Sequential": ("keras", "Sequential"),
    "supported_ops": ("ops", "supported_tf_ops"),
}

__all__ = sorted(("__version__",) + _MODULES + tuple(_NAMES))


def __getattr__(name):
    if name in _MODULES:
        return importlib.import_module(f"ipu_keras.{name}")
    if name in _NAMES:
        module, attr = _NAMES[name]
        return getattr(importlib.import_module(f"ipu_keras.{module}"), attr)
    raise AttributeError(f"module 'ipu_keras' has no attribute '{name}'")


def __dir__():
    return __all__
