"""IPU-specific ops as marked TensorFlow function calls.

The original ran some ops as one PopLibs operation (dropout that regenerates its mask,
the CTC loss, ...), not as the graph of TensorFlow ops that computes the same numbers.
`marked_call(op_type, body, inputs, params)` builds such an op: `body` is the plain
TensorFlow composition, traced as a function so that TensorFlow on the CPU runs it
unchanged (and is our oracle), and its call op carries `_ipu_op = op_type` and
`_ipu_op_params` (JSON). The tracer imports a marked call with the importer registered
for `op_type` in `ipu_keras._src.ops` (`ops/control.py`), never the body: the IR holds the op
family's one op with its own kernel, cost and tile mapping.

A marked op's gradient is usually another marked op (`tf.custom_gradient` around the
call), so the backward pass is the original's backward op too. The cross-replica
reductions (`cross_replica_sum`, `cross_replica_mean`) are an `Identity` marked with the
all-reduce attribute of `ops/collective.py`.
"""
import json

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2

from ipu_keras._src.ops.collective import ALL_REDUCE_ATTR
from ipu_keras._src.ops.control import MARKED_OP_ATTR as OP_ATTR
from ipu_keras._src.ops.control import MARKED_PARAMS_ATTR as PARAMS_ATTR
_CALL_TYPES = ("PartitionedCall", "StatefulPartitionedCall")


def marked_call(op_type, body, inputs, params=None):
    """`body(*inputs)` as one call op marked as the IPU op `op_type` with `params`.

    Args:
        op_type: The op's type name as the tracer's importer registry knows it (the
            original's TensorFlow op name, e.g. "IpuDropout").
        body: A function of tensors computing the op with TensorFlow ops (run as is on
            the CPU). It must not create variables.
        inputs: The tensors passed to `body`.
        params: JSON-serialisable attributes for the importer.

    Returns:
        What `body` returns. Outside a graph (eagerly) the body simply runs.
    """
    function = tf.function(body, autograph=False)
    outputs = function(*inputs)
    flat = tf.nest.flatten(outputs)
    if flat and not tf.executing_eagerly():
        call = flat[0].op
        if call.type not in _CALL_TYPES:
            raise TypeError(f"marked_call({op_type!r}) expected a function call op. "
                            f"Received: {call.type}.")
        call._set_attr(OP_ATTR, attr_value_pb2.AttrValue(s=op_type.encode()))
        text = json.dumps(params or {}, sort_keys=True)
        call._set_attr(PARAMS_ATTR, attr_value_pb2.AttrValue(s=text.encode()))
    return outputs


def marked_with_gradient(op_type, grad_type, body, inputs, params=None, wrt=None):
    """`marked_call(op_type, body, inputs, params)` whose gradient is one marked op too.

    The gradient op `grad_type` takes `inputs` followed by the gradients of every output
    of `body` (zeros where none flows) and returns the gradients of the inputs listed in
    `wrt` (indices; all by default), in that order. On the CPU its body differentiates
    `body` with a GradientTape; on the simulated IPU it is the op family's backward op,
    whose importer gets the same `params` (plus `wrt`).

    Returns:
        What `body` returns (a tensor or a tuple of tensors).
    """
    wrt = list(range(len(inputs)) if wrt is None else wrt)
    params = dict(params or {})
    inputs = [tf.convert_to_tensor(x) for x in inputs]

    def backward_body(*args):
        xs, dys = list(args[:len(inputs)]), list(args[len(inputs):])
        with tf.GradientTape() as tape:
            for i in wrt:
                tape.watch(xs[i])
            ys = tf.nest.flatten(body(*xs))
        grads = tape.gradient(ys, [xs[i] for i in wrt], output_gradients=dys)
        return tuple(tf.zeros_like(xs[i]) if g is None else g for i, g in zip(wrt, grads))

    @tf.custom_gradient
    def forward(*xs):
        outputs = marked_call(op_type, body, list(xs), params)

        def gradient(*dys):
            flat = tf.nest.flatten(outputs)
            dys = [tf.zeros_like(y) if d is None else d for y, d in zip(flat, dys)]
            grads = marked_call(grad_type, backward_body, list(xs) + dys,
                                {**params, "wrt": wrt})
            full = [None] * len(xs)
            for i, g in zip(wrt, tf.nest.flatten(grads)):
                full[i] = g
            return full

        return outputs, gradient

    return forward(*inputs)


def _group_size(replica_group_size):
    if replica_group_size is None:
        return 0
    if isinstance(replica_group_size, bool) or not isinstance(replica_group_size, int) \
            or replica_group_size < 1:
        raise ValueError("replica_group_size expected a positive integer or None. Received: "
                         f"replica_group_size={replica_group_size!r}")
    return replica_group_size


def _all_reduce(x, reduction, replica_group_size, name):
    size = _group_size(replica_group_size)
    x = tf.convert_to_tensor(x)
    out = tf.identity(x, name=name or f"cross_replica_{reduction}")
    out.op._set_attr(ALL_REDUCE_ATTR,
                     attr_value_pb2.AttrValue(s=f"{reduction}:{size}".encode()))
    return out


def cross_replica_sum(x, replica_group_size=None, name=None):
    """The sum of `x` over the replicas (of each group of `replica_group_size`)."""
    return _all_reduce(x, "sum", replica_group_size, name)


def cross_replica_mean(x, replica_group_size=None, name=None):
    """The mean of `x` over the replicas (of each group of `replica_group_size`)."""
    return _all_reduce(x, "mean", replica_group_size, name)
