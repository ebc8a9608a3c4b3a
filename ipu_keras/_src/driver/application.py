"""Compiling a function into an application file that the embedded runtime runs.

`compile_application(func, inputs, output_path, freeze_variables, name)` traces
`func(*inputs)` as `ipu_compiler.compile` does, compiles it for the active IPU
configuration and saves the `Executable` (the project's own format: a checksummed zip
of JSON and `.npz`, never a pickle) at `output_path`, with its interface in
`info["application"]` (`SIGNATURE`):

* `inputs`: what `embedded_runtime_start` takes once: the function's arguments (named
  after its parameters), then, unless frozen, the variables the program uses (named as
  the variables; their current values are not kept);
* `streamed_inputs` / `streamed_outputs`: the flat tensors of one infeed element and of
  one outfeed element, what each `embedded_runtime_call` passes in and gets back;
* `frozen`: with `freeze_variables`, the variables' values when the function is
  compiled, which the program then starts from on every run.

The runtime side is `runtime/embedded.py`.
"""
import inspect
import os

import numpy as np

from ipu_keras._src.driver.compile import compile_for_ipu
from ipu_keras._src.runtime import outfeeds
from ipu_keras._src.runtime.embedded import SIGNATURE, SIGNATURE_VERSION
from ipu_keras._src.tracer import trace


def compile_application(func, inputs, output_path, freeze_variables, name):
    """Compiles `func(*inputs)` and writes the application file; returns its path."""
    traced = trace(func, tuple(inputs), outfeed_queues=outfeeds.registry())
    executable = compile_for_ipu(traced.graph, None, name)
    names = _parameter_names(func, len(traced.graph.inputs))
    return write_application(traced, executable, names, output_path, freeze_variables, name)


def write_application(traced, executable, names, output_path, freeze_variables, name):
    """Writes the compiled `executable` of `traced` with its interface (module
    docstring); `names` are those of its arguments. Returns `output_path`."""
    graph = traced.graph
    args = [_tensor(n, value.type) for n, value in zip(names, graph.inputs)]
    variables = [_tensor(_variable_name(v, spec.name), spec.type)
                 for v, spec in zip(traced.variables, graph.variables)]
    executable.info[SIGNATURE] = {
        "version": SIGNATURE_VERSION,
        "name": name,
        "num_args": len(args),
        "inputs": args + ([] if freeze_variables else variables),
        "streamed_inputs": _stream(graph.infeeds, "infeed"),
        "streamed_outputs": _stream(graph.outfeeds, "outfeed"),
        "frozen": ([np.array(v.numpy()) for v in traced.variables] if freeze_variables
                   else None),
    }
    directory = os.path.dirname(os.path.abspath(output_path))
    os.makedirs(directory, exist_ok=True)
    executable.save(output_path)
    return output_path


def _parameter_names(func, count):
    """The names of `func`'s first `count` positional parameters, else `input_<i>`."""
    try:
        params = [p.name for p in inspect.signature(func).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    if len(params) < count:
        return [f"input_{i}" for i in range(count)]
    return params[:count]


def _tensor(name, type_):
    return {"name": name, "shape": [int(d) for d in type_.shape], "dtype": type_.dtype}


def _variable_name(variable, fallback):
    name = getattr(variable, "name", "") or fallback
    return name[:-2] if name.endswith(":0") else name


def _stream(feeds, kind):
    return [_tensor(f"{feed.name or kind}_{i}", t)
            for feed in feeds for i, t in enumerate(feed.types)]


__all__ = ["SIGNATURE", "compile_application", "write_application"]
