"""`ipu.embedded_runtime`: run an executable file compiled by
`experimental_application_compile_op` on the simulated IPU, one call per batch.

`embedded_runtime_start(executable_file, inputs, name)` starts (or finds) the engine
named `name` with the start inputs; `embedded_runtime_call(inputs, context)` passes one
element to the program's infeed and returns the element it enqueues on its outfeed (one
iteration of its loop; the program restarts when its loop is done). The engine runs in a
background thread (`_src/runtime/embedded.py`). Calls work eagerly and inside a
`tf.function` (a host op). `timeout` (how long a pipelined program on hardware waits for
data before pushing a dummy batch) is accepted: the simulated engine never waits on I/O.
"""
import types

import numpy as np
import tensorflow as tf

from ipu_keras._src.runtime import embedded
from ipu_keras.errors import EmbeddedRuntimeDTypeError, EmbeddedRuntimeError


class RuntimeContext:
    """A started application runtime. Made by `embedded_runtime_start`, not by users."""

    def __init__(self, name, executable_file, runtime, start_output):
        self._name = name
        self._executable_file = executable_file
        self._runtime = runtime
        self._start_output = start_output

    def start_output(self):
        """The output of the start op (the engine's name, a string tensor)."""
        return self._start_output

    def name(self):
        """The name of the application runtime instance."""
        return self._name

    def signature(self):
        """The executable's signature: `inputs`, `streamed_inputs` and `streamed_outputs`,
        each a list of `(name, shape, dtype)` records."""
        signature = self._runtime.signature
        return types.SimpleNamespace(**{
            key: [types.SimpleNamespace(name=t["name"], shape=list(t["shape"]),
                                        dtype=tf.as_dtype(t["dtype"]))
                  for t in signature[key]]
            for key in ("inputs", "streamed_inputs", "streamed_outputs")})

    def output_types(self):
        """The dtypes of the executable's streamed outputs."""
        return [tf.as_dtype(t["dtype"]) for t in self._runtime.signature["streamed_outputs"]]


def embedded_runtime_start(executable_file, inputs, name, timeout=None):
    """Starts the application runtime `name` on the executable file.

    Args:
        executable_file: The path of a file written by
            `experimental_application_compile_op` (a string or a string tensor).
        inputs: The start inputs (the compiled function's arguments, then the variables
            unless they were frozen): a list or tuple in order, or a dict by name.
        name: The name of the runtime instance; starting a name again with the same file
            gives the running instance.
        timeout: Microseconds (a positive int) a pipelined program waits for data on
            hardware; accepted and unused on the simulator.

    Returns:
        A `RuntimeContext` for `embedded_runtime_call`.

    Raises:
        EmbeddedRuntimeError: for a file that is not an application compiled by
            ipu_keras, or start inputs of the wrong number, name or shape (dtype too).
    """
    if timeout is not None and (not isinstance(timeout, int) or isinstance(timeout, bool)
                                or timeout <= 0):
        raise EmbeddedRuntimeError(f"embedded_runtime_start expected timeout to be a "
                                   f"positive int (microseconds). Received: timeout={timeout!r}.")
    if not isinstance(name, str) or not name:
        raise EmbeddedRuntimeError(
            f"embedded_runtime_start expected a name for the engine. Received: name={name!r}.")
    path = _path(executable_file)
    specs = embedded.load_application(path).info[embedded.SIGNATURE]["inputs"]
    if isinstance(inputs, dict):
        missing = [s["name"] for s in specs if s["name"] not in inputs]
        if missing:
            raise EmbeddedRuntimeError(
                f"Failed to find input tensor with name '{missing[0]}' in input dictionary.")
        inputs = [inputs[s["name"]] for s in specs]
    if isinstance(inputs, tuple):
        inputs = list(inputs)
    if not isinstance(inputs, list):
        raise EmbeddedRuntimeError(
            f"Expected the inputs to be a list. Received: inputs={inputs!r:.80}.")
    runtime = embedded.start(path, _arrays(inputs, specs), name)
    return RuntimeContext(name, executable_file, runtime, tf.constant(name))


def embedded_runtime_call(inputs, context):
    """Runs one iteration of the application with one batch of inputs.

    Args:
        inputs: The streamed inputs (one infeed element, flattened), a list.
        context: The `RuntimeContext` of `embedded_runtime_start`.

    Returns:
        A list of tensors: the element the program enqueued on its outfeed, flattened.

    Raises:
        EmbeddedRuntimeError: for inputs of the wrong number or shape;
            `EmbeddedRuntimeDTypeError` (a TypeError) for the wrong dtype.
        tf.errors.InternalError: if the program failed.
    """
    if not isinstance(context, RuntimeContext):
        raise EmbeddedRuntimeError(f"embedded_runtime_call expected the RuntimeContext of "
                                   f"embedded_runtime_start. Received: context={context!r:.80}.")
    runtime = context._runtime  # noqa: SLF001 - the context is ours
    inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    out_types = context.output_types()
    if all(not tf.is_symbolic_tensor(x) for x in inputs) and tf.executing_eagerly():
        arrays = _arrays(inputs, runtime.signature["streamed_inputs"])
        return [tf.constant(r) for r in runtime.call(arrays)]
    specs = runtime.signature["streamed_inputs"]
    inputs = [tf.convert_to_tensor(x, dtype_hint=s["dtype"]) for x, s in zip(inputs, specs)] \
        if len(inputs) == len(specs) else [tf.convert_to_tensor(x) for x in inputs]
    embedded.check_inputs([_Spec(x) for x in inputs], specs, "Embedded application call",
                          EmbeddedRuntimeDTypeError)
    with tf.device("/device:CPU:0"):
        results = tf.numpy_function(lambda *a: runtime.call(list(a)), inputs, out_types,
                                    stateful=True, name=f"{context.name()}_call")
    results = list(results) if isinstance(results, (list, tuple)) else [results]
    for tensor, spec in zip(results, runtime.signature["streamed_outputs"]):
        tensor.set_shape(spec["shape"])
    return results


def embedded_runtime_start_and_call(executable_file, startup_inputs, call_inputs, name):
    """`embedded_runtime_start` then `embedded_runtime_call`: returns (results, context)."""
    context = embedded_runtime_start(executable_file, startup_inputs, name)
    return embedded_runtime_call(call_inputs, context), context


def embedded_runtime_stop(context):
    """Always raises NotImplementedError, as the SDK's."""
    del context
    raise NotImplementedError("Embedded runtime doesn't support stopping an engine.")


class _Spec:
    """The shape and numpy dtype of a graph tensor, for the input checks."""

    def __init__(self, tensor):
        self.shape = tuple(tensor.shape.as_list()) if tensor.shape.rank is not None else ()
        self.dtype = np.dtype(tensor.dtype.as_numpy_dtype)


def _arrays(values, specs):
    """`values` as arrays; Python numbers and lists take the dtype the executable expects
    (as TensorFlow would convert them), arrays and tensors keep theirs."""
    arrays = []
    for i, value in enumerate(values):
        if hasattr(value, "numpy"):
            arrays.append(value.numpy())
        elif isinstance(value, (int, float, list, tuple)) and i < len(specs):
            arrays.append(np.asarray(value, dtype=specs[i]["dtype"]))
        else:
            arrays.append(np.asarray(value))
    return arrays


def _path(executable_file):
    if isinstance(executable_file, (str, bytes)) or hasattr(executable_file, "__fspath__"):
        path = executable_file
    elif hasattr(executable_file, "numpy"):
        path = executable_file.numpy()
    elif isinstance(executable_file, tf.Tensor):   # a TF1 graph's tensor, as the SDK does
        with tf.compat.v1.Session(graph=executable_file.graph) as session:
            path = session.run(executable_file)
    else:
        raise EmbeddedRuntimeError(
            f"embedded_runtime_start expected the executable file's path (a string or a "
            f"string tensor). Received: executable_file={executable_file!r:.80}.")
    return path.decode() if isinstance(path, bytes) else str(path)


__all__ = ["RuntimeContext", "embedded_runtime_call", "embedded_runtime_start",
           "embedded_runtime_start_and_call", "embedded_runtime_stop"]
