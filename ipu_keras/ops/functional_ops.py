"""`ipu.ops.functional_ops.outlined_function` (also `ipu.outlined_function`): a function
compiled once and called many times.

Each call of a decorated function runs its body as one TensorFlow function call (on the
CPU, TensorFlow runs it as is). The function's TensorFlow name carries the outlined
function's name between markers (`ops/control.py`), as do the forward and backward
functions TensorFlow derives from it for gradients; the tracer keeps such calls as calls,
and the compiler gives all calls of the same body (same IPU, same specialised graph) one
body program that each call site runs, with its arguments copied in and its results
copied out (`compiler/passes/outline.py`, the executable's `Call` steps). The report lists
each body once with its call sites and, after a run, its number of calls; its code is
counted once in tile memory and its cycles once per call.

Arguments are the function's positional tensors (runtime values); other values reach the
body through closures, as in the SDK. Variables the body uses are the same variables on
every call, including those it gets with TF1's `get_variable` (reused, as in the SDK's
examples). A stateful body (one that assigns a variable, such as a random seed Keras
updates, or uses a feed) cannot be reused and is inlined at each call, as in the SDK.
"""
import functools
import re

import tensorflow as tf

from ipu_keras._src.ops.control import OUTLINED_END, OUTLINED_MARK
from ipu_keras.errors import OutlinedFunctionError

_DEFAULT_NAME = "function"


def outlined_function(func=None, unique_sharding=False, keep_input_layouts=None, name=None):
    """Makes `func` an outlined function: compiled once, reused by each call.

    Use it as `@outlined_function` or `@outlined_function(name=...)`.

    Args:
        func: A Python function of positional `tf.Tensor`-like arguments returning at
            least one tensor (or a structure of them). None to get a decorator.
        unique_sharding: Copy every input to one IPU before the call. On the simulator
            the whole body already runs on the IPU of its call, so this changes nothing.
        keep_input_layouts: Keep the callers' tile layouts of the inputs (True), let the
            body choose them (False) or decide automatically (None). Accepted; the
            simulator always copies the arguments into the body's own layout.
        name: The function's name in reports (default "function").

    Returns:
        The decorated function (or, with `func` None, a decorator). Calling it returns
        `func`'s outputs.

    Raises:
        OutlinedFunctionError: if `func` is not callable, `unique_sharding` is not a bool or
            `keep_input_layouts` is neither None nor a bool.
    """
    if not isinstance(unique_sharding, bool):
        raise OutlinedFunctionError(
            f"outlined_function expected unique_sharding to be a bool. Received: "
            f"unique_sharding={unique_sharding!r}.")
    if keep_input_layouts is not None and not isinstance(keep_input_layouts, bool):
        raise OutlinedFunctionError(
            f"outlined_function expected keep_input_layouts to be None or a bool. "
            f"Received: keep_input_layouts={keep_input_layouts!r}.")
    if name is not None and not isinstance(name, str):
        raise OutlinedFunctionError(
            f"outlined_function expected name to be a string. Received: name={name!r}.")

    def decorate(inner):
        if not callable(inner):
            raise OutlinedFunctionError(
                f"outlined_function expected a callable. Received: func={inner!r}.")
        return _outlined(inner, name or _DEFAULT_NAME)

    return decorate if func is None else decorate(func)


def _outlined(func, name):
    """`func` run through one `tf.function` whose name marks it as outlined."""
    def body(*args):
        # TF1's get_variable in the body gives the same variable on every call (and on
        # TensorFlow's second trace of a body that creates variables).
        v1 = tf.compat.v1
        with v1.variable_scope(v1.get_variable_scope(), reuse=v1.AUTO_REUSE):
            outputs = func(*args)
        if not tf.nest.flatten(outputs):
            raise OutlinedFunctionError(
                f"The outlined function '{name}' must return at least one tensor. "
                f"Received: {outputs!r}.")
        return outputs

    body.__name__ = OUTLINED_MARK + _identifier(name) + OUTLINED_END
    traced = tf.function(body, autograph=False)

    @functools.wraps(func)
    @tf.autograph.experimental.do_not_convert   # the body is traced as written, as the SDK's
    def call(*args, **kwargs):
        if kwargs:
            raise OutlinedFunctionError(
                f"The outlined function '{name}' takes positional arguments only. "
                f"Received: keyword arguments {sorted(kwargs)}.")
        args = [_tensor(a, name, i) for i, a in enumerate(args)]
        return traced(*args)

    return call


def _tensor(value, name, index):
    if isinstance(value, (tf.Tensor, tf.Variable)):
        return value
    try:
        return tf.convert_to_tensor(value)
    except (TypeError, ValueError):
        raise OutlinedFunctionError(
            f"The outlined function '{name}' expected tf.Tensor-like arguments. "
            f"Received: argument {index} = {value!r:.80}. Pass other values through a "
            "closure.") from None


def _identifier(name):
    """`name` as a TensorFlow function name may hold it."""
    return re.sub(r"\W", "_", name).strip("_") or _DEFAULT_NAME


__all__ = ["outlined_function"]
