"""Control flow: `while`, `if` and `call`, whose bodies are sub-graphs in params.

* `while(*carry)`, params `cond` (carry -> bool scalar) and `body` (carry -> carry);
* `if(pred, *operands)`, params `then` and `else` (operands -> results);
* `call(*args)`, param `fn`; the compiler's inline pass replaces it by its body, unless
  the call has param `outlined` (the name given to `functional_ops.outlined_function`):
  such a call stays a call, and every call of the same body shares one body program.

An outlined function reaches the tracer as a call of a TensorFlow function whose name
holds `OUTLINED_MARK`, the function's name and `OUTLINED_END` (`outlined_name`);
TensorFlow names the forward and backward functions it derives for gradients after it,
so the backward pass is outlined too.

A call marked as one IPU op (`_ipu_op`, see `tracer/marked.py`) is not a `call`: it is
imported by the importer registered for the op's type name, with its params.

Resource operands (variables, iterators) are not carried: the tracer binds them
inside the bodies, so only dense values cross a sub-graph boundary. The engine runs
these ops itself. Their cost is the cost of what their bodies run.
"""
import json
import re

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


def _call_shape(in_types, *, fn, outlined=None):
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


OUTLINED_MARK = "ipu_outlined__"
"""In a TensorFlow function's name: the function is an outlined function's body."""
OUTLINED_END = "__"
"""Ends the outlined function's name in the TensorFlow function's name (TensorFlow then
appends `_<number>`s)."""
_OUTLINED = re.compile(r"(__backward_)?" + OUTLINED_MARK + r"(\w*?)" + OUTLINED_END
                       + r"_\d")   # TensorFlow's numbers (and the TF1 path's suffix) follow


def outlined_name(fn_name):
    """The outlined function's name (with " (backward)" for the gradient TensorFlow
    derives from it) if the TensorFlow function `fn_name` is an outlined body, else None."""
    found = _OUTLINED.search(fn_name)
    if found is None:
        return None
    return found.group(2) + (" (backward)" if found.group(1) else "")


@tf_import("PartitionedCall", "StatefulPartitionedCall")
def _import_call(node, b):
    marked = node.attr(MARKED_OP_ATTR, None)
    if marked is not None:
        return _import_marked(node, b, marked)
    fn = node.function("f", node.inputs)
    if not fn.outputs and not fn.equations:
        return []
    name = outlined_name(node.function_name("f"))
    params = {"fn": fn} if name is None else {"fn": fn, "outlined": name}
    outs = b.emit("call", _dense(node.inputs), **params)
    return list(outs) if isinstance(outs, tuple) else ([outs] if fn.outputs else [])


def _import_marked(node, b, op_type):
    importer = get_importer(op_type)
    if importer is None:
        raise UnsupportedOpError(op_type, node.name, node.layer,
                                 hint="a marked IPU op with no importer")
    results = importer(node, b, **json.loads(node.attr(MARKED_PARAMS_ATTR, "{}")))
    return list(results) if isinstance(results, (tuple, list)) else [results]
