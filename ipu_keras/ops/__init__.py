"""Graphcore's IPU op modules, as `tensorflow.python.ipu.ops` had them.

`from ipu_keras.ops import nn_ops, rand_ops, pipelining_ops` stands where
`from tensorflow.python.ipu.ops import ...` stood; the same modules are reached as
`ipu.nn_ops`, `ipu.pipelining_ops`, ... (`import ipu_keras as ipu`), as in the SDK.
Each is a façade over the machinery in `ipu_keras._src`. Modules load on first use: the
op definitions the simulator runs (`ipu_keras._src.ops`) need no TensorFlow, these do.
"""
import importlib

MODULES = ("application_compile_op", "cross_replica_ops", "custom_ops",
           "embedded_runtime", "embedding_ops", "functional_ops", "gen_ipu_ops",
           "nn_ops", "normalization_ops", "pipelining_ops", "rand_ops",
           "replication_ops")

__all__ = list(MODULES)


def __getattr__(name):
    if name in MODULES:
        return importlib.import_module(f"ipu_keras.ops.{name}")
    raise AttributeError(f"module 'ipu_keras.ops' has no attribute '{name}'")


def __dir__():
    return __all__
