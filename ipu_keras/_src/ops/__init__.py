"""The op definitions: the registry and every op family. Importing this package registers
all ops. (Graphcore's public op modules, `nn_ops`, `rand_ops`, ..., are `ipu_keras.ops`.)"""
from ipu_keras._src.ops import (  # noqa: F401
    array, collective, control, conv, ctc, dropout, einsum, host_embedding, image, indexing,
    linalg, lists, math, nn, norm, pool, random, reduce, rnn, state, transfer,
)
from ipu_keras._src.ops.builder import Builder
from ipu_keras._src.ops.registry import (
    OpDef, Work, all_ops, get_importer, get_op, register_op, supported_tf_ops, tf_import,
)


__all__ = [
    "Builder", "OpDef", "Work", "all_ops", "get_importer", "get_op", "register_op",
    "supported_tf_ops", "tf_import",
]
