"""Op family 'host_embedding': embedding tables that live on the host, not on the IPU.

The SDK's host embeddings (`ipu.embedding_ops.HostEmbedding`) keep a table in host
memory; the device sends the indices it wants over the host link and receives the rows,
and a trainable embedding's gradient goes back the same way, the host adding
`-learning_rate * gradient` into the rows it served (plain SGD, duplicates accumulating).

* `host_embedding_lookup(indices) {embedding_id, rows, encoding, dtype}` -> the rows
  [n, encoding] of the table registered as `embedding_id`, for int indices [n];
* `host_embedding_update(indices, updates) {embedding_id, rows, encoding, dtype}` ->
  a scalar zero (the gradient of the SDK's `__dummy` variable, which carries the update
  into the backward pass); adds `updates` [n, encoding] into the table's rows `indices`.
  With `accumulate` > 1 (the SGD+GA spec) the host buffers the updates and applies their
  sum after every `accumulate`-th one, so the lookups of one accumulation window all
  read the table as it was at the window's start.

Both are "host_call" steps: they cost no tile compute but an external sync and their
bytes over the host link (`device/cost.py: host_io_cycles`), as a stream copy does.
They are effects, so they are never folded, dropped or reordered. Their kernels reach
the host's tables, which live here as the process's host memory: `register_table` (by
`HostEmbedding.register`) binds an array under its name, `deregister_table` unbinds it
and hands it back. Replicas running in threads share one table, as the SDK's host did.
The TensorFlow side is `ipu.embedding_ops`, calls marked with the SDK's op names.
"""
import threading

import numpy as np

from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops.registry import NO_WORK, register_op, tf_import
from ipu_keras.errors import HostEmbeddingError

LOOKUP_TF_TYPE = "IpuDeviceEmbeddingLookup"
TRAINABLE_LOOKUP_TF_TYPE = "IpuDeviceEmbeddingLookupTrainable"
UPDATE_TF_TYPE = "IpuDeviceEmbeddingUpdateAdd"
"""The marked calls' op types (the SDK's TensorFlow ops)."""


class _Table:
    def __init__(self, array, accumulate):
        self.array = array
        self.accumulate = accumulate
        self.pending = np.zeros_like(array) if accumulate > 1 else None
        self.updates = 0


_TABLES = {}
_LOCK = threading.Lock()


def register_table(name, array, accumulate=1):
    """Binds `array` (rank 2, written in place by updates) as the host table `name`."""
    with _LOCK:
        if name in _TABLES:
            raise HostEmbeddingError(
                f"A host embedding expected a name not registered yet. Received: name={name!r}"
                ", which is registered: leave its `register` scope first.")
        _TABLES[name] = _Table(array, max(1, int(accumulate)))


def deregister_table(name):
    """Unbinds the host table `name`, applying updates still buffered; returns its array."""
    with _LOCK:
        table = _TABLES.pop(name, None)
    if table is None:
        return None
    if table.pending is not None and table.updates % table.accumulate:
        table.array += table.pending
    return table.array


def is_registered(name):
    return name in _TABLES


def _table(name, rows, encoding):
    table = _TABLES.get(name)
    if table is None:
        raise HostEmbeddingError(
            f"The host embedding {name!r} expected to be registered while the device uses "
            f"it. Received: a lookup or update of {name!r} outside "
            "`with embedding.register(session):`. Run the step inside that scope.")
    if table.array.shape != (rows, encoding):
        raise HostEmbeddingError(
            f"The host embedding {name!r} expected a table of shape {(rows, encoding)}. "
            f"Received: a registered table of shape {table.array.shape}.")
    return table


def _lookup(indices, *, embedding_id, rows, encoding, dtype):
    table = _table(embedding_id, rows, encoding)
    with _LOCK:
        return table.array[np.clip(indices, 0, rows - 1)].astype(dtype)


def _update(indices, updates, *, embedding_id, rows, encoding, dtype):
    table = _table(embedding_id, rows, encoding)
    indices = np.clip(indices, 0, rows - 1)
    with _LOCK:
        if table.pending is None:
            np.add.at(table.array, indices, updates.astype(table.array.dtype))
        else:
            np.add.at(table.pending, indices, updates.astype(table.array.dtype))
            table.updates += 1
            if table.updates % table.accumulate == 0:
                table.array += table.pending
                table.pending[...] = 0
    return np.zeros((), dtype)


def _check_indices(op, indices):
    if len(indices.shape) != 1 or "int" not in indices.dtype:
        raise ValueError(f"{op} expected int indices of rank 1. Received: {indices}")


def _lookup_shape(in_types, *, embedding_id, rows, encoding, dtype):
    _check_indices("host_embedding_lookup", in_types[0])
    return [TensorType((in_types[0].shape[0], encoding), dtype)]


def _update_shape(in_types, *, embedding_id, rows, encoding, dtype):
    indices, updates = in_types
    _check_indices("host_embedding_update", indices)
    if updates.shape != (indices.shape[0], encoding):
        raise ValueError(f"host_embedding_update expected updates of shape "
                         f"{(indices.shape[0], encoding)}. Received: {updates}")
    return [TensorType((), dtype)]


def _no_tile_work(in_types, out_types, **_):
    """The rows arrive from the host onto their tiles: the cost is the host transfer,
    which the lowering charges for every "host_call" step."""
    return NO_WORK


register_op("host_embedding_lookup", shape=_lookup_shape, kernel=_lookup, cost=_no_tile_work,
            mapping="linear", effect=True, role="host_call", exchange="none")
register_op("host_embedding_update", shape=_update_shape, kernel=_update, cost=_no_tile_work,
            mapping="linear", effect=True, role="host_call", exchange="none")


def _params(embedding_id, rows, encoding, dtype):
    return {"embedding_id": embedding_id, "rows": int(rows), "encoding": int(encoding),
            "dtype": str(dtype)}


@tf_import(LOOKUP_TF_TYPE, TRAINABLE_LOOKUP_TF_TYPE)
def _import_lookup(node, b, *, embedding_id, rows, encoding, dtype, **_):
    indices = node.inputs[-1]   # the trainable lookup's first input is `__dummy`
    return b.emit("host_embedding_lookup", [indices],
                  **_params(embedding_id, rows, encoding, dtype))


@tf_import(UPDATE_TF_TYPE)
def _import_update(node, b, *, embedding_id, rows, encoding, dtype, **_):
    indices, updates = node.inputs[:2]
    return b.emit("host_embedding_update", [indices, updates],
                  **_params(embedding_id, rows, encoding, dtype))


__all__ = ["LOOKUP_TF_TYPE", "TRAINABLE_LOOKUP_TF_TYPE", "UPDATE_TF_TYPE", "deregister_table",
           "is_registered", "register_table"]
