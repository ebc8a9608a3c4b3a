"""Constants, variables and host streams: the ops that touch device state.

`const` holds its value in params. `read_var`/`write_var` name a variable of the
top-level graph by index; `infeed`/`outfeed` name a stream. All but `const` are run by
the engine itself (they move data between buffers, no codelet) and all but `const`
and `read_var` are effects that passes must keep in order.

`recomputation_checkpoint` is the identity `pipelining_ops.recomputation_checkpoint`
marks (an `Identity` with `CHECKPOINT_ATTR`): a view of its operand, whose value
recomputation keeps instead of recomputing (`compiler/passes/recompute.py`).
"""
import numpy as np

from ipu_keras._src.ir.types import TensorType, type_of
from ipu_keras._src.ops._common import no_cost
from ipu_keras._src.ops.collective import import_marked
from ipu_keras._src.ops.registry import Work, register_op, tf_import

WRITE_MODES = ("assign", "add", "sub")
CHECKPOINT_ATTR = "_ipu_recomputation_checkpoint"
"""The attribute `recomputation_checkpoint` sets on its `Identity` ops."""


def _const_shape(in_types, *, value):
    return [type_of(value)]


register_op("const", shape=_const_shape, kernel=lambda *, value: value, cost=no_cost,
            mapping="linear", role="constant", exchange="none")


def _read_shape(in_types, *, var, type):
    return [type]


register_op("read_var", shape=_read_shape, cost=no_cost, mapping="engine", engine=True,
            role="variable_read", exchange="none")


def _write_shape(in_types, *, var, mode):
    assert mode in WRITE_MODES, mode
    return []


def _write_cost(in_types, out_types, *, var, mode):
    return Work("vector" if mode != "assign" else "copy", in_types[0].size)


register_op("write_var", shape=_write_shape, cost=_write_cost, mapping="engine",
            effect=True, engine=True, role="variable_write", exchange="variable")


def _infeed_shape(in_types, *, infeed, types):
    return list(types)


def _feed_cost(in_types, out_types, **_):
    return Work("copy", sum(t.nbytes for t in list(in_types) + list(out_types)))


register_op("infeed", shape=_infeed_shape, cost=_feed_cost, mapping="engine",
            effect=True, engine=True, role="stream_in", exchange="none")


def _outfeed_shape(in_types, *, outfeed):
    return []


register_op("outfeed", shape=_outfeed_shape, cost=_feed_cost, mapping="engine",
            effect=True, engine=True, role="stream_out", exchange="none")


@tf_import("Const")
def _import_const(node, b):
    return b.const(node.attr("value"))


@tf_import("ReadVariableOp")
def _import_read(node, b):
    ref = node.inputs[0]
    return b.emit("read_var", [], var=node.variable_index(ref), type=node.out_types[0])


def _writer(mode):
    def importer(node, b):
        ref, value = node.inputs
        b.emit("write_var", [value], var=node.variable_index(ref), mode=mode)
        return []

    return importer


tf_import("AssignVariableOp")(_writer("assign"))
tf_import("AssignAddVariableOp")(_writer("add"))
tf_import("AssignSubVariableOp")(_writer("sub"))


@tf_import("VariableShape")
def _import_variable_shape(node, b):
    shape = node.variable_type(node.inputs[0]).shape
    return b.const(shape, dtype=node.attr("out_type", "int32"))


@tf_import("IteratorGetNext")
def _import_infeed(node, b):
    index = node.infeed_index(node.inputs[0], node.out_types)
    return b.emit("infeed", [], infeed=index, types=tuple(node.out_types))


def write_kernel(mode):
    """The numpy update a variable write applies: new value from (old, operand)."""
    if mode == "assign":
        return lambda old, x: np.asarray(x, dtype=old.dtype)
    if mode == "add":
        return lambda old, x: np.add(old, x, dtype=old.dtype)
    return lambda old, x: np.subtract(old, x, dtype=old.dtype)


__all__ = ["TensorType", "WRITE_MODES", "write_kernel"]


register_op("recomputation_checkpoint", shape=lambda in_types: [in_types[0]],
            kernel=lambda x: x, cost=no_cost, mapping="elementwise", rowwise=True,
            tile_rule="elementwise", recompute="checkpoint")


@tf_import("Identity", "IdentityN")
def _import_identity(node, b):
    """Pass values through; an IdentityN marked by `IPUOutfeedQueue.enqueue` is an outfeed,
    one marked by `cross_replica_ops` or `replication_ops` a collective (`collective.py`),
    an Identity marked by `recomputation_checkpoint` a `recomputation_checkpoint`."""
    collective = import_marked(node, b)
    if collective is not None:
        return collective
    if node.attr(CHECKPOINT_ATTR, False):
        return [b.emit("recomputation_checkpoint", [node.inputs[0]])]
    queue = node.attr("_ipu_outfeed", None)
    if queue is not None:
        values = list(node.inputs)
        b.emit("outfeed", values, outfeed=node.outfeed_index(queue, [v.type for v in values]))
    return list(node.inputs)


@tf_import("ResourceApplyGradientDescent")
def _import_apply_gradient_descent(node, b):
    """`var -= alpha * delta`: the update TF1's `GradientDescentOptimizer` makes."""
    ref, alpha, delta = node.inputs
    step = b.emit("mul", [alpha, delta])
    b.emit("write_var", [step], var=node.variable_index(ref), mode="sub")
    return []


def _read(node, b, ref):
    return b.emit("read_var", [], var=node.variable_index(ref), type=node.variable_type(ref))


@tf_import("ResourceApplyMomentum")
def _import_apply_momentum(node, b):
    """TF1's `MomentumOptimizer`: `accum = accum * momentum + grad`, then
    `var -= lr * accum` (Nesterov: `var -= lr * (grad + momentum * accum)`)."""
    ref, accum_ref, lr, grad, momentum = node.inputs
    accum = b.emit("add", [b.emit("mul", [_read(node, b, accum_ref), momentum]), grad])
    b.emit("write_var", [accum], var=node.variable_index(accum_ref), mode="assign")
    if node.attr("use_nesterov", False):
        step = b.emit("mul", [b.emit("add", [grad, b.emit("mul", [accum, momentum])]), lr])
    else:
        step = b.emit("mul", [lr, accum])
    b.emit("write_var", [step], var=node.variable_index(ref), mode="sub")
    return []


@tf_import("ResourceApplyAdam")
def _import_apply_adam(node, b):
    """TF1's `AdamOptimizer`, as TensorFlow's kernel: `m += (g - m)(1 - beta1)`,
    `v += (g^2 - v)(1 - beta2)`, `var -= m * lr_t / (sqrt(v) + epsilon)` with
    `lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)` (Nesterov: `m` replaced by
    `g (1 - beta1) + beta1 m`)."""
    ref, m_ref, v_ref, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad = node.inputs
    one = b.const(1, dtype=node.variable_type(ref).dtype)

    def minus(x):
        return b.emit("sub", [one, x])

    m = _read(node, b, m_ref)
    m = b.emit("add", [m, b.emit("mul", [b.emit("sub", [grad, m]), minus(beta1)])])
    v = _read(node, b, v_ref)
    v = b.emit("add", [v, b.emit("mul", [b.emit("sub", [b.emit("square", [grad]), v]),
                                         minus(beta2)])])
    b.emit("write_var", [m], var=node.variable_index(m_ref), mode="assign")
    b.emit("write_var", [v], var=node.variable_index(v_ref), mode="assign")
    alpha = b.emit("div", [b.emit("mul", [lr, b.emit("sqrt", [minus(beta2_power)])]),
                           minus(beta1_power)])
    if node.attr("use_nesterov", False):
        m = b.emit("add", [b.emit("mul", [grad, minus(beta1)]), b.emit("mul", [beta1, m])])
    denominator = b.emit("add", [b.emit("sqrt", [v]), epsilon])
    step = b.emit("div", [b.emit("mul", [m, alpha]), denominator])
    b.emit("write_var", [step], var=node.variable_index(ref), mode="sub")
    return []
