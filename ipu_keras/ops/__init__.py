"""The op registry and every op family. Importing this package registers all ops."""
from ipu_keras.ops import (  # noqa: F401
    array, control, conv, einsum, image, indexing, linalg, lists, math, nn, norm, pool,
    random, reduce, state, transfer,
)
from ipu_keras.ops.builder import Builder
from ipu_keras.ops.registry import (
    OpDef, Work, all_ops, get_importer, get_op, register_op, supported_tf_ops, tf_import,
)

__all__ = [
    "Builder", "OpDef", "Work", "all_ops", "get_importer", "get_op", "register_op",
    "supported_tf_ops", "tf_import",
]
