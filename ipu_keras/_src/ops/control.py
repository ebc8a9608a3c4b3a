"""Control flow: `while`, `if` and `call`, whose bodies are sub-graphs in params.

* `while(*carry)`, params `cond` (carry -> bool scalar) and `body` (carry -> carry);
* `if(pred, *operands)`, params `then` and `else` (operands -> results);
* `call(*args)`, param `fn`; the compiler's inline pass replaces it by its body.

A call marked as one IPU op (`_ipu_op`, see `tracer/marked.py`) is not a `call`: it is
imported by the importer registered for the op's type name, with its params.

Resource operands (variables, iterators) are not carried: the tracer binds them
inside the bodies, so only dense values cross a sub-graph boundary. The engine runs
these ops itself. Their cost is the cost of what their bodies run.
"""
import json

from ipu_keras.errors import StaticShapeRequiredError, UnsupportedOpError
from ipu_keras._src.ops._common import no_cost
from ipu_keras._src.ops.registry import get_importer, register_op, tf_import


def _while_shape(in_types, *, cond, body):
    carry = [v.type for v in body.outputs]
    if carry != list(in_types) or [v.type for v in body.inputs] != list(in_types):
        raise StaticShapeRequiredError(
            "A while loop must keep the shape and dtype of every loop variable, expected "
            f"{[str(t) for t in in_types]}. Received: body outputs "
            f"{[str(t) for t in carry]}. Give the loop variables a fixed shape."
        )
    return list(in_types)


def _if_shape(in_types, **branches):
    then, other = branches["then"], branches["else"]
    outs = [v.type for v in then.outputs]
    if outs != [v.type for v in other.outputs]:
        raise StaticShapeRequiredError(
            "Both branches of a conditional must return the same shapes and dtypes, "
            f"expected {[str(t) for t in outs]}. Received: "
            f"else_branch={[str(v.type) for v in other.outputs]}."
        )
    return outs


def _call_shape(in_types, *, fn):
    return [v.type for v in fn.outputs]


register_op("while", shape=_while_shape, cost=no_cost, mapping="engine", effect=True,
            engine=True, role="loop", exchange="none")
register_op("if", shape=_if_shape, cost=no_cost, mapping="engine", effect=True, engine=True,
            role="branch", exchange="none")
register_op("call", shape=_call_shape, cost=no_cost, mapping="engine", effect=True,
            engine=True, role="subgraph_call", exchange="none")


def _dense(values):
    return [v for v in values if not node_is_ref(v)]


def node_is_ref(value):
    return not hasattr(value, "type")


def _restore_refs(inputs, dense_outputs):
    """Resource outputs of a TF control-flow op are its resource inputs, passed through."""
    dense = iter(dense_outputs if isinstance(dense_outputs, tuple) else [dense_outputs])
    return [v if node_is_ref(v) else next(dense) for v in inputs]


@tf_import("While", "StatelessWhile")
def _import_while(node, b):
    cond, body = node.loop("cond", "body", node.inputs)
    carry = _dense(node.inputs)
    if not carry:
        return list(node.inputs)
    return _restore_refs(node.inputs, b.emit("while", carry, cond=cond, body=body))


@tf_import("If", "StatelessIf")
def _import_if(node, b):
    pred, operands = node.inputs[0], node.inputs[1:]
    then = node.function("then_branch", operands)
    other = node.function("else_branch", operands)
    outs = b.emit("if", [pred] + _dense(operands), then=then, **{"else": other})
    return list(outs) if isinstance(outs, tuple) else ([outs] if then.outputs else [])


MARKED_OP_ATTR = "_ipu_op"
MARKED_PARAMS_ATTR = "_ipu_op_params"
"""A function call marked as one IPU op (`tracer/marked.py`): the op's type name and its
params (JSON). It is imported by the importer registered for that type name."""


@tf_import("PartitionedCall", "StatefulPartitionedCall")
def _import_call(node, b):
    marked = node.attr(MARKED_OP_ATTR, None)
    if marked is not None:
        return _import_marked(node, b, marked)
    fn = node.function("f", node.inputs)
    if not fn.outputs and not fn.equations:
        return []
    outs = b.emit("call", _dense(node.inputs), fn=fn)
    return list(outs) if isinstance(outs, tuple) else ([outs] if fn.outputs else [])


def _import_marked(node, b, op_type):
    importer = get_importer(op_type)
    if importer is None:
        raise UnsupportedOpError(op_type, node.name, node.layer,
                                 hint="a marked IPU op with no importer")
    results = importer(node, b, **json.loads(node.attr(MARKED_PARAMS_ATTR, "{}")))
    return list(results) if isinstance(results, (tuple, list)) else [results]
