"""ipu_keras: train and run Keras models on a simulated Graphcore IPU.

`import ipu_keras as ipu` stands where `from tensorflow.python import ipu` stood:
`ipu.config.IPUConfig`, `ipu.ipu_strategy.IPUStrategy`, `ipu.ipu_compiler.compile`,
`ipu.ipu_infeed_queue`, `ipu.ipu_outfeed_queue`, `ipu.loops`, `ipu.scopes`,
`ipu.utils`, Graphcore's op modules (`ipu.ops.nn_ops`, also reached as `ipu.nn_ops`, as
in the SDK), and the names of older SDKs (`ipu.compat` lists them all). These modules
are the public face: each validates with Graphcore's rules and calls into the machinery
of `ipu_keras._src` (tracer -> compiler -> simulator, with the runtime on the host side;
`docs/architecture.md`).

Names are loaded on first use, so that the lower layers of `ipu_keras._src` import
without TensorFlow.

Once TensorFlow is loaded (before `import ipu_keras`, or before the first name is
used), eager ops under `tf.device('/device:IPU:0')` run on the simulated IPU, one
compiled op at a time, as the SDK's IPU device ran them (`_src/driver/eager.py`).
"""
import importlib
import sys

from ipu_keras.version import __version__

_MODULES = (
    "compat", "config", "distributed", "errors", "gradient_accumulation", "ipu_compiler",
    "ipu_infeed_queue", "ipu_outfeed_queue", "ipu_strategy", "keras", "loops", "ops",
    "optimizers", "profiling", "scopes", "sharding", "utils",
)
# Graphcore's op modules live in `ipu_keras.ops`; the SDK's `ipu` package named them too.
_OP_MODULES = ("cross_replica_ops", "gen_ipu_ops", "nn_ops", "pipelining_ops", "rand_ops",
               "replication_ops")
_NAMES = {
    "IPUConfig": ("config", "IPUConfig"),
    "IPUInfeedQueue": ("ipu_infeed_queue", "IPUInfeedQueue"),
    "IPUOutfeedMode": ("ipu_outfeed_queue", "IPUOutfeedMode"),
    "IPUOutfeedQueue": ("ipu_outfeed_queue", "IPUOutfeedQueue"),
    "IPUStrategy": ("ipu_strategy", "IPUStrategy"),
    "Model": ("keras", "Model"),
    "PipelineStage": ("keras", "PipelineStage"),
    "Sequential": ("keras", "Sequential"),
    "supported_ops": ("_src.ops", "supported_tf_ops"),
}

__all__ = sorted(("__version__",) + _MODULES + _OP_MODULES + tuple(_NAMES))


def _place_eager_ops_on_the_ipu():
    """Installs the eager IPU device once TensorFlow is loaded (it is not loaded here)."""
    if sys.modules.get("tensorflow") is not None:
        importlib.import_module("ipu_keras._src.driver.eager").install()


def __getattr__(name):
    if name in _MODULES:
        value = importlib.import_module(f"ipu_keras.{name}")
    elif name in _OP_MODULES:
        value = importlib.import_module(f"ipu_keras.ops.{name}")
    elif name in _NAMES:
        module, attr = _NAMES[name]
        value = getattr(importlib.import_module(f"ipu_keras.{module}"), attr)
    else:
        raise AttributeError(f"module 'ipu_keras' has no attribute '{name}'")
    _place_eager_ops_on_the_ipu()
    return value


_place_eager_ops_on_the_ipu()


def __dir__():
    return __all__
