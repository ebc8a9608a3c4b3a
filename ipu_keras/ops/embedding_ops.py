"""`ipu.embedding_ops`: the IPU's embedding lookup, and embeddings that live on the host.

`embedding_lookup(params, ids, serialization_factor)` is `tf.nn.embedding_lookup` of one
table as the SDK built it: ids flattened, the table seen as [rows, the rest], one gather,
the result reshaped to `ids.shape + params.shape[1:]`. With a serialization factor S the
gather is split into S lookups, each into a block of rows with the other ids masked out,
and their partial results summed (the same numbers; each lookup needs a smaller
temporary), its gradient one scatter-add into a table of zeros.

Host embeddings (`create_host_embedding`, `HostEmbedding`, the optimizer specs) keep the
table in host memory: inside `with embedding.register(session):` the table is bound as
host memory (`ipu_keras._src.ops.host_embedding`), each `lookup` on the device is one
call to the host that sends the indices and receives the rows over the host link, and
a trainable embedding's backward pass sends `-learning_rate * gradient` back, which the
host adds into the rows it served (plain SGD; with `HostEmbeddingSGDGAOptimizerSpec`
the host sums `accumulation_factor` updates before applying them). The device's memory
never holds the table; the simulator's profile counts each lookup and update as a host
transfer. On leaving the scope the host table is written back to the embedding's
variable (`get_embedding_tensor()`), which is when a session or eager code sees the
updates. As in the SDK, a trainable lookup reads a scalar variable `<name>/__dummy`
whose gradient (zero) carries the update into the step: let the optimizer see it
(`minimize` does in TensorFlow 1; with a GradientTape, watch it).
"""
import functools
import operator

import numpy as np
import tensorflow as tf

from ipu_keras._src.ops import host_embedding as host
from ipu_keras._src.ops.registry import get_op
from ipu_keras._src.tracer.marked import marked_call
from ipu_keras.errors import OpArgumentError

__all__ = ["HostEmbedding", "HostEmbeddingOptimizerSpec", "HostEmbeddingSGDGAOptimizerSpec",
           "create_host_embedding", "embedding_lookup"]

v1 = tf.compat.v1


def _static_shape(tensor, what, function):
    shape = tensor.shape
    if shape.rank is None or not shape.is_fully_defined():
        raise OpArgumentError(f"{function} expected {what} of a fully known shape. Received: "
                              f"{what} of shape {shape}")
    return shape.as_list()


def embedding_lookup(params, ids, serialization_factor=1, indices_are_sorted=False, name=None):
    """Looks up `ids` in the table `params`, as `tf.nn.embedding_lookup` of one tensor.

    Args:
        params: The table: a tensor (or variable) of rank >= 1, rows first.
        ids: int32 indices into the rows, any shape; out-of-range ids are undefined, as
            on the IPU (here: TensorFlow's error on the CPU, the simulator's on the IPU).
        serialization_factor: Split the lookup into this many lookups, each into a block
            of rows; it must divide the number of rows.
        indices_are_sorted: A hint to the IPU's planner; no effect on the numbers.
        name: A name for the operation (default "embedding_lookup").

    SDK 2.6 and older had `embedding_lookup(params, ids, name=None, serialization_factor=1)`:
    a string or None in third place is read in that order.

    Returns:
        A tensor of shape `ids.shape + params.shape[1:]` and the dtype of `params`.
    """
    if serialization_factor is None or isinstance(serialization_factor, str):
        name, serialization_factor = serialization_factor, (
            1 if isinstance(indices_are_sorted, bool) else indices_are_sorted)
    try:
        factor = int(serialization_factor)
    except (TypeError, ValueError):
        factor = 0
    if factor < 1:
        raise OpArgumentError("embedding_lookup expected a serialization_factor of at least 1."
                              f" Received: serialization_factor={serialization_factor!r}")
    params = tf.convert_to_tensor(params)
    ids = tf.convert_to_tensor(ids)
    ids_shape = _static_shape(ids, "ids", "embedding_lookup")
    params_shape = _static_shape(params, "params", "embedding_lookup")
    if not params_shape:
        raise OpArgumentError("embedding_lookup expected params of rank >= 1. Received: a "
                              "scalar params")
    rows, rest = params_shape[0], params_shape[1:]
    if rows % factor:
        raise OpArgumentError(f"embedding_lookup expected a serialization_factor dividing the "
                              f"{rows} rows of params. Received: serialization_factor={factor}")
    with tf.name_scope(name or "embedding_lookup"):
        table = tf.reshape(params, [rows, functools.reduce(operator.mul, rest, 1)])
        flat = tf.reshape(tf.cast(ids, tf.int32), [-1])
        rows_found = (tf.gather(table, flat) if factor == 1
                      else _serialized_lookup(table, flat, factor))
        return tf.reshape(rows_found, ids_shape + rest)


def _serialized_lookup(table, ids, factor):
    """`tf.gather(table, ids)` as `factor` masked lookups into blocks of rows, summed."""
    block = table.shape[0] // factor

    @tf.custom_gradient
    def lookup(table):
        out = None
        for i in range(factor):
            local = ids - i * block
            inside = tf.logical_and(local >= 0, local < block)
            piece = tf.gather(table[i * block:(i + 1) * block], tf.where(inside, local, 0))
            piece = piece * tf.cast(inside, table.dtype)[:, None]
            out = piece if out is None else out + piece

        def gradient(dy):   # one scatter-add into a table of zeros
            return tf.math.unsorted_segment_sum(dy, ids, table.shape[0])

        return out, gradient

    return lookup(table)


# -- host embeddings ---------------------------------------------------------------------

class HostEmbeddingOptimizerSpec:
    """How the host updates a host embedding: plain SGD at `learning_rate` (0: frozen).

    Args:
        learning_rate: The SGD learning rate (a Python number).
        optimizer_name: "SGD" (default); the SGD+GA spec sets "SGD+GA".
    """

    def __init__(self, learning_rate, optimizer_name=None):
        self._learning_rate = learning_rate
        self._optimizer_name = optimizer_name or "SGD"

    def get_learning_rate(self):
        return self._learning_rate

    def _accumulation(self):
        return 1

    def create_lookup_instruction(self, embedding_tensor, indices, slot_vars,
                                  partition_strategy, name):
        """The lookup of flat `indices` on the device (called by `HostEmbedding.lookup`)."""
        del slot_vars, partition_strategy
        rows, encoding = embedding_tensor.shape.as_list()
        params = {"embedding_id": name, "rows": rows, "encoding": encoding,
                  "dtype": embedding_tensor.dtype.base_dtype.name}
        if not self.get_learning_rate():
            return marked_call(host.LOOKUP_TF_TYPE, _host_rows(params), [indices], params)
        return _trainable_lookup(self._dummy(name, embedding_tensor.dtype.base_dtype),
                                 indices, params, float(self.get_learning_rate()))

    def _dummy(self, name, dtype):
        """The SDK's `<name>/__dummy`: a trainable scalar whose gradient (zero) carries the
        update into the backward pass. A TensorFlow 1 variable of the scope `name`; in
        TensorFlow 2, one variable made eagerly (and kept here) on the first lookup."""
        if not tf.compat.v1.executing_eagerly_outside_functions():
            with v1.variable_scope(name, reuse=v1.AUTO_REUSE):
                return v1.get_variable("__dummy", shape=[], dtype=dtype, trainable=True,
                                       initializer=v1.zeros_initializer())
        dummies = self.__dict__.setdefault("_dummies", {})
        if name not in dummies:
            with tf.init_scope():
                dummies[name] = tf.Variable(tf.zeros([], dtype), name=f"{name}/__dummy")
        return dummies[name]

    def create_register_instruction(self, embedding_tensor, slot_vars, name):
        """A callable of the session (None eagerly) binding the table as host memory."""
        del slot_vars

        def register(session):
            value = session.run(embedding_tensor) if session is not None \
                else embedding_tensor.numpy()
            host.register_table(name, np.array(value), self._accumulation())

        return register

    def create_deregister_instruction(self, embedding_tensor, slot_vars, name):
        """A callable of the session (None eagerly) writing the host table back."""
        del slot_vars

        def deregister(session):
            table = host.deregister_table(name)
            if table is None or not isinstance(embedding_tensor, tf.Variable):
                return   # a plain tensor cannot take the updates back
            if session is None:
                embedding_tensor.assign(table)
            else:
                embedding_tensor.load(table, session)

        return deregister

    def create_slot_variables(self, embedding_tensor, name):
        del embedding_tensor, name
        return []


class HostEmbeddingSGDGAOptimizerSpec(HostEmbeddingOptimizerSpec):
    """SGD whose updates the host sums over `accumulation_factor` steps before applying.

    Args:
        learning_rate: The SGD learning rate.
        accumulation_factor: The micro-batches of one gradient accumulation window.
    """

    def __init__(self, learning_rate, accumulation_factor):
        super().__init__(learning_rate, "SGD+GA" if accumulation_factor > 1 else None)
        self._accumulation_factor = accumulation_factor

    def get_accumulation_factor(self):
        return self._accumulation_factor

    def _accumulation(self):
        return max(1, int(self._accumulation_factor))


@tf.autograph.experimental.do_not_convert   # plain Python run while tracing: nothing to convert
def _host_rows(params):
    """The CPU body of a lookup: the same call to the host table."""
    kernel = get_op("host_embedding_lookup").kernel

    def body(*args):
        indices = args[-1]
        rows = tf.numpy_function(lambda i: kernel(i, **params), [indices],
                                 tf.as_dtype(params["dtype"]), stateful=True)
        rows.set_shape([indices.shape[0], params["encoding"]])
        return rows

    return body


@tf.autograph.experimental.do_not_convert
def _host_update(params):
    kernel = get_op("host_embedding_update").kernel

    def body(indices, updates):
        zero = tf.numpy_function(lambda i, u: kernel(i, u, **params), [indices, updates],
                                 tf.as_dtype(params["dtype"]), stateful=True)
        zero.set_shape([])
        return zero

    return body


def _trainable_lookup(dummy, indices, params, learning_rate):
    @tf.custom_gradient
    def lookup(weight):
        rows = marked_call(host.TRAINABLE_LOOKUP_TF_TYPE, _host_rows(params),
                           [weight, indices], params)

        def gradient(d_rows):
            updates = tf.cast(-learning_rate * d_rows, rows.dtype)
            return marked_call(host.UPDATE_TF_TYPE, _host_update(params), [indices, updates],
                               params)

        return rows, gradient

    return lookup(tf.convert_to_tensor(dummy))


class HostEmbedding:
    """An embedding table that lives on the host, looked up (and trained) from the IPU.

    Args:
        name: The name that identifies the embedding (one registration at a time).
        embedding_tensor: The table: a rank-2 variable [tokens, encoding] on the CPU.
        partition_strategy: "TOKEN" or "ENCODING": how the SDK split a table over
            replicas in remote buffers; one host table here, so only checked.
        optimizer_spec: A `HostEmbeddingOptimizerSpec`; None: not trainable.
    """

    def __init__(self, name, embedding_tensor, partition_strategy="TOKEN",
                 optimizer_spec=None):
        if not tf.is_tensor(embedding_tensor) and not isinstance(embedding_tensor,
                                                                 tf.Variable):
            raise OpArgumentError("HostEmbedding expected a TensorFlow tensor or variable as "
                                  f"embedding_tensor. Received: {embedding_tensor!r}")
        if embedding_tensor.shape.rank != 2 or not embedding_tensor.shape.is_fully_defined():
            raise OpArgumentError("HostEmbedding expected an embedding_tensor of a known rank-2 "
                                  "shape [tokens, encoding]. Received: shape "
                                  f"{embedding_tensor.shape}")
        if not isinstance(optimizer_spec, (type(None), HostEmbeddingOptimizerSpec)):
            raise OpArgumentError("HostEmbedding expected a HostEmbeddingOptimizerSpec or None "
                                  f"as optimizer_spec. Received: {optimizer_spec!r}")
        if partition_strategy not in ("TOKEN", "ENCODING"):
            raise OpArgumentError("HostEmbedding expected partition_strategy 'TOKEN' or "
                                  f"'ENCODING'. Received: {partition_strategy!r}")
        self._name = name
        self._embedding_tensor = embedding_tensor
        self._partition_strategy = partition_strategy
        self._optimizer_spec = optimizer_spec or HostEmbeddingOptimizerSpec(0)
        self._slot_vars = self._optimizer_spec.create_slot_variables(embedding_tensor, name)
        self._has_lookup = False

    def get_embedding_tensor(self):
        """The table's variable on the CPU."""
        return self._embedding_tensor

    def register(self, session=None):
        """A context manager binding the table as host memory while it is open.

        Every device step that looks the embedding up runs inside it; on leaving it the
        host table (with the updates the steps made) is written back to the variable.

        Args:
            session: The `tf.compat.v1.Session` holding the variable (TensorFlow 1);
                None when executing eagerly.
        """
        if session is None and not tf.executing_eagerly():
            raise OpArgumentError("HostEmbedding.register expected a session when eager "
                                  "execution is disabled. Received: session=None")
        return HostEmbeddingScope(self, session)

    def __call__(self, *args, **kwargs):
        raise NotImplementedError("HostEmbedding.__call__ is not supported. Please use the "
                                  "context manager created with HostEmbedding.register.")

    def lookup(self, indices, clip_indices=True):
        """The rows of `indices` (any shape), looked up on the host from the device.

        Args:
            indices: int indices of a known shape.
            clip_indices: Clip them to [0, tokens - 1] first; else out-of-range indices
                are undefined (the host clips them anyway).

        Returns:
            A tensor of shape `indices.shape + [encoding]`.
        """
        indices = tf.convert_to_tensor(indices)
        shape = _static_shape(indices, "indices", "HostEmbedding.lookup")
        tokens, encoding = self._embedding_tensor.shape.as_list()
        indices = tf.cast(indices, tf.int32)
        if clip_indices:
            indices = tf.clip_by_value(indices, 0, tokens - 1)
        rows = self._optimizer_spec.create_lookup_instruction(
            self._embedding_tensor, tf.reshape(indices, [-1]), self._slot_vars,
            self._partition_strategy, self._name)
        self._has_lookup = True
        return tf.reshape(rows, shape + [encoding])


class HostEmbeddingScope:
    """What `HostEmbedding.register` returns: entering binds the table as host memory
    (and returns the embedding), leaving writes it back and unbinds it."""

    def __init__(self, parent, session=None):
        self._parent = parent
        self._session = session

    def __enter__(self):
        parent = self._parent
        parent._optimizer_spec.create_register_instruction(
            parent._embedding_tensor, parent._slot_vars, parent._name)(self._session)
        return parent

    def __exit__(self, exception_type, exception_value, traceback):
        parent = self._parent
        parent._optimizer_spec.create_deregister_instruction(
            parent._embedding_tensor, parent._slot_vars, parent._name)(self._session)


def create_host_embedding(name, shape, dtype, partition_strategy="TOKEN", optimizer_spec=None,
                          initializer=None):
    """A `HostEmbedding` over a new variable `name` on the CPU.

    Args:
        name: The embedding's (and its variable's) name.
        shape: [tokens, encoding].
        dtype: The table's dtype.
        partition_strategy: "TOKEN" or "ENCODING" (see `HostEmbedding`).
        optimizer_spec: A `HostEmbeddingOptimizerSpec`; None: not trainable.
        initializer: The initial value: None (zeros), an initializer called with the
            shape and dtype, or a value.
    """
    shape = [int(d) for d in shape]
    if len(shape) != 2:
        raise OpArgumentError("create_host_embedding expected a rank-2 shape [tokens, "
                              f"encoding]. Received: shape={shape!r}")
    dtype = tf.as_dtype(dtype)
    if initializer is None:
        initial = tf.zeros(shape, dtype)
    elif callable(initializer):
        initial = functools.partial(initializer, shape, dtype)
    else:
        initial = tf.cast(initializer, dtype)
    with tf.device("/device:CPU:0"):
        if tf.executing_eagerly():
            variable = tf.Variable(initial, name=name)
        else:   # the SDK's RefVariable on the CPU
            variable = v1.Variable(initial, name=name, use_resource=False)
    return HostEmbedding(name, variable, partition_strategy, optimizer_spec)
