"""`ipu.application_compile_op.experimental_application_compile_op`: compile a function
into an executable file for the embedded runtime (`ipu.embedded_runtime`).

The file is the simulator's own executable format (a checksummed zip of JSON and numpy
arrays, never a pickle) with the application's interface (`_src/driver/application.py`);
it keeps the SDK's default name and suffix (`application_compile*.poplar_exec`) but is no
Poplar file. Executed eagerly the op compiles at once and returns the path; inside a
`tf.function`, or built into a TensorFlow 1 graph, it compiles when the function or the
`Session` runs it (`_src/tf1/application.py`).
"""
import os
import tempfile

import tensorflow as tf

from ipu_keras._src.driver.application import compile_application
from ipu_keras._src.tf1 import in_graph_mode
from ipu_keras._src.tf1.application import compile_op_in_graph

_DEFAULT_NAME = "application_compile"


def experimental_application_compile_op(func, inputs=None, output_path=None,
                                        freeze_variables=False, name=None):
    """Compiles `func(*inputs)` for the configured IPU into an executable file.

    Args:
        func: The Python function to compile (typically a `loops.repeat` over an infeed,
            enqueuing its results on an outfeed). An Operation it returns is dropped.
        inputs: The arguments of `func` (tensors), given again to
            `embedded_runtime_start`.
        output_path: Where to write the executable; None for a new temporary file named
            after `name` with the suffix `.poplar_exec`.
        freeze_variables: True: the variables `func` uses are embedded with their values
            at compile time; False: they become start inputs of the runtime.
        name: The op's name (default "application_compile").

    Returns:
        A string `Tensor`: the path of the executable file.

    Raises:
        TypeError: if `func` is not callable.
    """
    if not callable(func):
        raise TypeError(f"experimental_application_compile_op expected a callable func. "
                        f"Received: func={func!r}.")
    inputs = _as_list(inputs)
    name = name or _DEFAULT_NAME
    if output_path is None:
        handle, output_path = tempfile.mkstemp(prefix=name, suffix=".poplar_exec")
        os.close(handle)
    output_path = os.fspath(output_path)
    freeze = bool(freeze_variables)
    if in_graph_mode():
        return compile_op_in_graph(func, inputs, output_path, freeze, name)

    def compile_now(*values):
        return compile_application(func, list(values), output_path, freeze, name)

    if tf.executing_eagerly():
        return tf.constant(compile_now(*inputs))
    with tf.device("/device:CPU:0"):
        return tf.py_function(lambda *values: compile_now(*[v.numpy() for v in values]),
                              inputs, tf.string, name=name)


def _as_list(inputs):
    if inputs is None:
        return []
    if isinstance(inputs, (list, tuple)):
        return list(inputs)
    return [inputs]


__all__ = ["experimental_application_compile_op"]
