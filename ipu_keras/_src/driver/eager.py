"""Eager ops placed on the IPU: `with tf.device('/device:IPU:0'): c = tf.matmul(a, b)`.

Graphcore's SDK compiled each such op for the IPU on its own (the XLA device's
compile-on-demand path). TensorFlow has no public hook that runs an eager op somewhere
else by its device string (its op callbacks see an eager op only after it ran, and
ignore what they return), so `install()` wraps the two functions every eager op goes
through, as TensorFlow's own op callbacks do with `execute.execute`:

* the generated op functions' fast path, `pywrap_tfe.TFE_Py_FastPathExecute`, which
  declines (raises `_FallbackException`, as it does itself for ops it cannot take)
  when the current device scope names an IPU, so that the op takes the slow path;
* the slow path, `execute.quick_execute` (and `execute.execute` while it is that),
  which hands an op on an IPU to `run_on_ipu`.

`run_on_ipu` runs the op as a one-op function traced, compiled and run by the same road
as `ipu_compiler.compile` (`executor.CompiledFunction`), so each execution is recorded
for `ipu_keras.profiling.last_report()`. The executables are cached by op type,
attributes, input shapes and dtypes, and the active `IPUConfig`: a repeated op does not
recompile. Outside an IPU scope an eager op pays one look at the device name (about
1 microsecond, against tens for the op itself).

An op that the simulated IPU cannot run this way runs on the host, and a warning says so
once per op type: a `tf.function` called eagerly (use `IPUStrategy.run` or
`ipu_compiler.compile`), an op on variables, datasets or other resources (eager
variables live on the host), an op the tracer cannot import, and an op whose
attributes hold functions. Anything traced (`tf.function`, a Keras step, TF1 graphs) is
untouched: graph ops do not come through here. So is ipu_keras's own eager work inside
`placement.host_work()` (a session's run, `ipu_compiler.compile`, `IPUStrategy.run`),
which stays on the host under the user's device scope. Keras' eager host work (its data
adapter, under a `model.fit` called inside `tf.device('/device:IPU:0')`) is not marked
so: its small ops run here one by one, and its dataset ops say they stay on the host.
"""
import os
import sys
import warnings

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2
from tensorflow.python import pywrap_tfe
from tensorflow.python.eager import backprop
from tensorflow.python.eager import core
from tensorflow.python.eager import execute
from tensorflow.python.framework import op_def_registry
from tensorflow.python.framework import tensor_shape

from ipu_keras._src.device import config as ipu_config
from ipu_keras._src.placement import host_work, in_host_work
from ipu_keras.errors import IPUError, StaticShapeRequiredError

_IPU_DEVICE = "/device:IPU:"
_HANDLE_DTYPES = (tf.resource, tf.variant)
_RESOURCES = "it works on variables, datasets or other resources"
_LIBRARY_DIRS = (os.path.dirname(tf.__file__), os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
_ORIGINAL = {}
_CACHE = {}
"""(op type, attributes, input signature, config) -> _Entry, least recently used first;
an entry keeps its config alive, so that its id stays its own."""
MAX_CACHED_OPS = 1024
"""How many op signatures keep their executables (each holds a session and its buffers)."""
_WARNED = set()
_COMPILE_ERRORS = (IPUError, ValueError, TypeError, tf.errors.OpError)
"""What tracing or compiling a one-op function may raise: the op then runs on the host."""


def install():
    """Routes eager ops under an IPU device scope to the simulated IPU (idempotent)."""
    if _ORIGINAL:
        return
    _ORIGINAL["fast"] = pywrap_tfe.TFE_Py_FastPathExecute
    _ORIGINAL["quick"] = execute.quick_execute
    pywrap_tfe.TFE_Py_FastPathExecute = _fast_path
    execute.quick_execute = _quick_execute
    if execute.execute is _ORIGINAL["quick"]:
        execute.execute = _quick_execute


def uninstall():
    """Puts TensorFlow's functions back (for tests)."""
    if not _ORIGINAL:
        return
    pywrap_tfe.TFE_Py_FastPathExecute = _ORIGINAL["fast"]
    if execute.execute is _quick_execute:
        execute.execute = _ORIGINAL["quick"]
    execute.quick_execute = _ORIGINAL.pop("quick")
    _ORIGINAL.pop("fast")


def installed():
    return bool(_ORIGINAL)


def _on_ipu(ctx):
    name = ctx._thread_local_data.device_name  # noqa: SLF001 - `device_name`, on every op
    return bool(name) and _IPU_DEVICE in name and not in_host_work()


def _fast_path(ctx, op_name, *args):
    if _on_ipu(ctx):
        raise core._FallbackException(  # noqa: SLF001 - the fast path's own way to decline
            f"{op_name} is placed on an IPU: it runs on the simulated IPU.")
    return _ORIGINAL["fast"](ctx, op_name, *args)


def _quick_execute(op_name, num_outputs, inputs, attrs, ctx, name=None):
    if _on_ipu(ctx):
        return run_on_ipu(op_name, num_outputs, inputs, attrs, ctx, name)
    return _ORIGINAL["quick"](op_name, num_outputs, inputs, attrs, ctx, name)


def run_on_ipu(op_name, num_outputs, inputs, attrs, ctx, name=None):
    """Runs one eager op on the simulated IPU; on the host with a warning if it cannot."""
    op_type = op_name.decode() if isinstance(op_name, bytes) else op_name
    with host_work():  # the one-op function's own eager work stays on the host
        outputs = _run(op_type, inputs, attrs or (), ctx.device_name)
    if outputs is not None:
        return outputs
    return _ORIGINAL["quick"](op_name, num_outputs, inputs, attrs, ctx, name)


def _run(op_type, inputs, attrs, device):
    """The op's outputs from the simulated IPU, or None to run it on the host.

    The executable of a signature is cached. When the op needs some inputs at compile
    time (an axis, a shape, a permutation), its small integer inputs are compiled in as
    constants, and their values join the key, as XLA's compile-time constants did.
    """
    cfg = ipu_config.get_active_config()
    # A configured config is a snapshot, the same object until configured again; without
    # one, each call gives a new default config, which are all alike.
    cfg_key = id(cfg) if ipu_config.is_configured() else None
    signature = tuple((tuple(x.shape.as_list()), x.dtype.name) for x in inputs)
    key = (op_type, _frozen(attrs), signature, cfg_key)
    entry = _CACHE.pop(key, None)
    if entry is None:
        entry = _Entry(op_type, inputs, attrs, cfg, device)
        while len(_CACHE) >= MAX_CACHED_OPS:
            del _CACHE[next(iter(_CACHE))]  # the least recently used signature
    _CACHE[key] = entry  # last: the most recently used
    return entry.run(inputs)


class _Entry:
    """The executables of one op signature: one, or one per value of its constants."""

    def __init__(self, op_type, inputs, attrs, cfg, device):
        self.op_type, self.attrs, self.cfg, self.device = op_type, attrs, cfg, device
        self.constants = None  # indices of the inputs compiled in, once known
        self.compiled = {}
        reason = _refusal(op_type, inputs, attrs)
        if reason is not None:
            _warn(op_type, device, reason)
            self.host = True
            return
        self.host = False
        try:
            self.compiled[()] = _OneOp(op_type, inputs, attrs, cfg, ())
            self.constants = ()
        except StaticShapeRequiredError as e:
            self.constants = tuple(i for i, x in enumerate(inputs) if _small_integer(x))
            if not self.constants:
                self._refuse(e)
        except _COMPILE_ERRORS as e:
            self._refuse(e)

    def _refuse(self, error):
        _warn(self.op_type, self.device,
              f"the simulated IPU cannot run it ({type(error).__name__}: {error})")
        self.host = True

    def run(self, inputs):
        if self.host:
            return None
        values = tuple(inputs[i].numpy().tobytes() for i in self.constants)
        one_op = self.compiled.get(values)
        if one_op is None:
            try:
                one_op = _OneOp(self.op_type, inputs, self.attrs, self.cfg, self.constants)
            except _COMPILE_ERRORS as e:
                self._refuse(e)
                return None
            self.compiled[values] = one_op
        return one_op(inputs)


def _small_integer(x):
    return x.dtype.is_integer and x.shape.rank is not None and x.shape.num_elements() <= 64


def _refusal(op_type, inputs, attrs):
    """Why the op runs on the host, or None when it can run on the simulated IPU."""
    from ipu_keras._src.ops import supported_tf_ops  # noqa: PLC0415 - after TensorFlow

    op_def = op_def_registry.get(op_type)
    if op_def is None:
        return ("it is a function called eagerly; compile it with IPUStrategy.run or "
                "ipu_compiler.compile to run it on the simulated IPU")
    if any(x.dtype in _HANDLE_DTYPES for x in inputs) or any(
            a.type in (tf.resource.as_datatype_enum, tf.variant.as_datatype_enum)
            for a in op_def.output_arg):
        return (_RESOURCES + ", which live on the "
                "host in eager mode; their values travel to the IPU as inputs of the ops "
                "that use them")
    if op_type not in supported_tf_ops():
        return "the simulated IPU has no kernel for it"
    if any(_attr_type(op_type, k) == int(pywrap_tfe.TF_ATTR_FUNC)
           for k in attrs[::2]):
        return "its attributes hold functions"
    return None


def _warn(op_type, device, reason):
    """Says once per op type (once in all for resource ops) that an op runs on the CPU."""
    once = "resources" if reason.startswith(_RESOURCES) else op_type
    if once in _WARNED:
        return
    _WARNED.add(once)
    other, said = ((" (and other ops on resources)", "once for all ops on resources")
                   if once == "resources" else ("", "once per op type"))
    warnings.warn(
        f"The eager op '{op_type}'{other} placed on '{device}' runs on the CPU, not on the "
        f"simulated IPU: {reason}. (Said {said}.)",
        RuntimeWarning, stacklevel=_user_stacklevel())


def _user_stacklevel():
    """The `stacklevel` of the first caller outside TensorFlow, Keras and ipu_keras."""
    keras = sys.modules.get("keras")
    libraries = _LIBRARY_DIRS + ((os.path.dirname(keras.__file__),) if keras else ())
    frame, level = sys._getframe(1), 1  # noqa: SLF001 - where the user's op was called
    while frame is not None and frame.f_code.co_filename.startswith(libraries):
        frame, level = frame.f_back, level + 1
    return level


def _frozen(value):
    """An attribute value as part of a key: lists as tuples, anything unhashable by repr."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


def _attr_type(op_type, attr):
    return backprop.op_attr_type(op_type, attr)


def _attr_value(op_type, attr, value):
    """The `AttrValue` of an eager op's attribute (given as the eager path holds it)."""
    kind = _attr_type(op_type, attr)
    if isinstance(kind, list):
        return attr_value_pb2.AttrValue(list=_list_value(kind[0], value))
    if kind == int(pywrap_tfe.TF_ATTR_TYPE):
        return attr_value_pb2.AttrValue(type=tf.as_dtype(value).as_datatype_enum)
    if kind == int(pywrap_tfe.TF_ATTR_SHAPE):
        return attr_value_pb2.AttrValue(shape=tensor_shape.as_shape(value).as_proto())
    if kind == int(pywrap_tfe.TF_ATTR_INT):
        return attr_value_pb2.AttrValue(i=value)
    if kind == int(pywrap_tfe.TF_ATTR_FLOAT):
        return attr_value_pb2.AttrValue(f=value)
    if kind == int(pywrap_tfe.TF_ATTR_BOOL):
        return attr_value_pb2.AttrValue(b=value)
    if kind == int(pywrap_tfe.TF_ATTR_STRING):
        return attr_value_pb2.AttrValue(s=tf.compat.as_bytes(value))
    if kind == int(pywrap_tfe.TF_ATTR_TENSOR):
        return attr_value_pb2.AttrValue(tensor=tf.make_tensor_proto(value))
    raise IPUError(f"attribute '{attr}' of kind {kind} is not supported. Received: {value!r}")


def _list_value(kind, values):
    values = list(values)
    if kind == int(pywrap_tfe.TF_ATTR_TYPE):
        return attr_value_pb2.AttrValue.ListValue(
            type=[tf.as_dtype(v).as_datatype_enum for v in values])
    if kind == int(pywrap_tfe.TF_ATTR_SHAPE):
        return attr_value_pb2.AttrValue.ListValue(
            shape=[tensor_shape.as_shape(v).as_proto() for v in values])
    if kind == int(pywrap_tfe.TF_ATTR_INT):
        return attr_value_pb2.AttrValue.ListValue(i=values)
    if kind == int(pywrap_tfe.TF_ATTR_FLOAT):
        return attr_value_pb2.AttrValue.ListValue(f=values)
    if kind == int(pywrap_tfe.TF_ATTR_BOOL):
        return attr_value_pb2.AttrValue.ListValue(b=values)
    if kind == int(pywrap_tfe.TF_ATTR_STRING):
        return attr_value_pb2.AttrValue.ListValue(s=[tf.compat.as_bytes(v) for v in values])
    raise IPUError(f"list attribute of kind {kind} is not supported. Received: {values!r}")


class _OneOp:
    """One eager op traced as a one-op function and compiled for the simulated IPU.

    The inputs at the indices `constants` are compiled in as constants; the others are
    the function's arguments.
    """

    def __init__(self, op_type, inputs, attrs, cfg, constants):
        from ipu_keras._src.driver import executor  # noqa: PLC0415 - TensorFlow-heavy

        attr_values = {k: _attr_value(op_type, k, v) for k, v in zip(attrs[::2], attrs[1::2])}
        fixed = {i: inputs[i].numpy() for i in constants}
        self.arguments = [i for i in range(len(inputs)) if i not in fixed]
        self.dtypes = []

        def one_op(*args):
            flat, args = [], list(args)
            for i, x in enumerate(inputs):
                flat.append(tf.constant(fixed[i], x.dtype) if i in fixed else args.pop(0))
            op = tf.compat.v1.get_default_graph().create_op(
                op_type, flat, attrs=attr_values, name=op_type)
            self.dtypes = [t.dtype for t in op.outputs]
            return list(op.outputs)

        one_op.__name__ = op_type
        arrays = [np.zeros(inputs[i].shape, inputs[i].dtype.as_numpy_dtype)
                  for i in self.arguments]
        with tf.device("/device:CPU:0"):
            self.function = executor.CompiledFunction(one_op, tuple(arrays), {}, cfg)

    def __call__(self, inputs):
        outputs = self.function.session.run([inputs[i].numpy() for i in self.arguments])
        with tf.device("/device:CPU:0"):
            return [tf.constant(np.asarray(value, dtype.as_numpy_dtype), dtype)
                    for value, dtype in zip(outputs, self.dtypes)]


__all__ = ["install", "installed", "run_on_ipu", "uninstall"]
