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

Once TensorFlow is loaded (before `import ipu_keras`, or after it: a finder on
`sys.meta_path` waits for it), eager ops under `tf.device('/device:IPU:0')` run on the
simulated IPU, one compiled op at a time, as the SDK's IPU device ran them
(`_src/driver/eager.py`, which wraps TensorFlow's two eager execution functions for it,
as TensorFlow's own op callbacks wrap one of them).

Importing `ipu_keras` also makes `ipu_keras.keras` reachable as `keras.ipu` and
`tf.keras.ipu` (the SDK 2.6+ spelling; `_src/keras_namespace.py`): the one change
ipu_keras makes to another package's namespace. Neither Keras nor TensorFlow is loaded
for it.
"""
import importlib
import importlib.abc
import importlib.util
import sys

from ipu_keras._src import keras_namespace
from ipu_keras.version import __version__

keras_namespace.install()

_MODULES = (
    "compat", "config", "distributed", "errors", "gradient_accumulation", "ipu_compiler",
    "ipu_infeed_queue", "ipu_outfeed_queue", "ipu_strategy", "keras", "loops", "ops",
    "optimizers", "profiling", "scopes", "serving", "sharding", "utils",
)
# Graphcore's op modules live in `ipu_keras.ops`; the SDK's `ipu` package named them too.
_OP_MODULES = ("application_compile_op", "cross_replica_ops", "custom_ops",
               "embedded_runtime", "embedding_ops", "functional_ops", "gen_ipu_ops",
               "nn_ops", "normalization_ops", "pipelining_ops", "rand_ops",
               "replication_ops")
_NAMES = {
    "IPUConfig": ("config", "IPUConfig"),
    "IPUInfeedQueue": ("ipu_infeed_queue", "IPUInfeedQueue"),
    "IPUOutfeedMode": ("ipu_outfeed_queue", "IPUOutfeedMode"),
    "IPUOutfeedQueue": ("ipu_outfeed_queue", "IPUOutfeedQueue"),
    "IPUStrategy": ("ipu_strategy", "IPUStrategy"),
    "Model": ("keras", "Model"),
    "outlined_function": ("ops.functional_ops", "outlined_function"),
    "PipelineStage": ("keras", "PipelineStage"),
    "Sequential": ("keras", "Sequential"),
    "supported_ops": ("_src.ops", "supported_tf_ops"),
}

__all__ = sorted(("__version__",) + _MODULES + _OP_MODULES + tuple(_NAMES))


def _place_eager_ops_on_the_ipu():
    """Installs the eager IPU device once TensorFlow is loaded (it is not loaded here)."""
    if sys.modules.get("tensorflow") is not None:
        importlib.import_module("ipu_keras._src.driver.eager").install()
    elif not any(isinstance(f, _AfterTensorFlow) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterTensorFlow())


class _AfterTensorFlow(importlib.abc.MetaPathFinder):
    """Finds nothing; when TensorFlow is first imported, installs the eager IPU device
    right after TensorFlow's own module has run, and leaves `sys.meta_path`."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _place_eager_ops_on_the_ipu()

        spec.loader.exec_module = exec_module
        return spec


def __getattr__(name):
    if name in _MODULES:
        return importlib.import_module(f"ipu_keras.{name}")
    if name in _OP_MODULES:
        return importlib.import_module(f"ipu_keras.ops.{name}")
    if name in _NAMES:
        module, attr = _NAMES[name]
        return getattr(importlib.import_module(f"ipu_keras.{module}"), attr)
    raise AttributeError(f"module 'ipu_keras' has no attribute '{name}'")


_place_eager_ops_on_the_ipu()


def __dir__():
    return __all__
