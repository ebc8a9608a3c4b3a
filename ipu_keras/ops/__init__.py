"""The op registry and every op family. Importing this package registers all ops."""
from ipu_keras.ops import (  # noqa: F401
    array, collective, control, conv, ctc, dropout, einsum, image, indexing, linalg, lists, math,
    nn, norm, pool, random, reduce, rnn, state, transfer,
)
from ipu_keras.ops.builder import Builder
from ipu_keras.ops.registry import (
    OpDef, Work, all_ops, get_importer, get_op, register_op, supported_tf_ops, tf_import,
)



def __getattr__(name):
    # Graphcore's `ipu.ops.pipelining_ops` is the API module `ipu_keras.pipelining_ops`, not
    # an op family: loaded on first use only, so the op layer never imports TensorFlow.
    if name == "pipelining_ops":
        import importlib

        return importlib.import_module("ipu_keras.pipelining_ops")
    raise AttributeError(f"module 'ipu_keras.ops' has no attribute '{name}'")


__all__ = [
    "Builder", "OpDef", "Work", "all_ops", "get_importer", "get_op", "register_op",
    "supported_tf_ops", "tf_import",
]
