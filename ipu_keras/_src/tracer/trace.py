"""The tracer's entry point: a Python or `tf.function` and its arguments -> IR.

Arguments that are tensors or numpy arrays become graph inputs. Everything else
(Python numbers, iterators, queues, models, variables) is closed over, exactly as
`tf.function` treats non-tensor arguments, so resources reach the graph as captures
that `graph.captures` and `graph.variables` name.
"""
import contextlib
import dataclasses

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import ops as tf_ops

from ipu_keras._src.gc_pause import collection_paused
from ipu_keras.errors import IPUError
from ipu_keras._src.ir.graph import Graph, Value
from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops.builder import Builder
from ipu_keras._src.tracer.importer import GraphImporter
from ipu_keras._src.tracer.layers import LayerScopes, attribute_updates
from ipu_keras._src.tracer.node import numpy_dtype
from ipu_keras._src.tracer.state import StateRef, StateTable


@dataclasses.dataclass
class Traced:
    """A traced function: its IR and the Python objects its state refers to."""

    graph: Graph
    variables: list      # tf.Variable per graph.variables entry
    infeeds: list        # eager iterator resource handle per graph.infeeds entry
    outfeeds: list       # IPUOutfeedQueue per graph.outfeeds entry
    output_structure: object
    concrete: object


def is_dense(leaf):
    return isinstance(leaf, (np.ndarray, tf.Tensor)) and not isinstance(leaf, tf.Variable)


def split_arguments(args, kwargs):
    """Flatten (args, kwargs): the dense leaves, and a function rebuilding the structure."""
    structure = (tuple(args), dict(kwargs or {}))
    leaves = tf.nest.flatten(structure)
    positions = [i for i, leaf in enumerate(leaves) if is_dense(leaf)]

    def rebuild(dense):
        merged = list(leaves)
        for i, value in zip(positions, dense):
            merged[i] = value
        return tf.nest.pack_sequence_as(structure, merged)

    return [leaves[i] for i in positions], rebuild, [leaves[i] for i in range(len(leaves))
                                                     if i not in positions]


def python_function(fn):
    """The Python function behind a `tf.function`, so that we own the tracing."""
    return getattr(fn, "python_function", fn)


def make_tf_function(fn, args, kwargs):
    dense, rebuild, _ = split_arguments(args, kwargs)
    body = python_function(fn)

    def step(*dense_values):
        a, k = rebuild(list(dense_values))
        return _without_operations(body(*a, **k))

    specs = [tf.TensorSpec(np.shape(x), tf.as_dtype(np.asarray(x).dtype if isinstance(
        x, np.ndarray) else x.dtype)) for x in dense]
    return tf.function(step, autograph=True), specs, dense


def _without_operations(outputs):
    """Outputs with `tf.Operation`s (a pipeline, a grouped update) as None: they are
    effects, which the graph keeps anyway, not values a tf.function can return."""
    return tf.nest.map_structure(
        lambda x: None if isinstance(x, tf.Operation) else x, outputs)


def _raise_designed_cause(error):
    """AutoGraph re-raises an error from user code as a `StagingError` unless its type
    takes only a message; a designed `IPUError` (e.g. a pipelining rule) is raised as
    itself, so users and tests see the documented class."""
    cause = error.__context__
    if not isinstance(error, IPUError) and isinstance(cause, IPUError):
        raise cause.with_traceback(None) from None


@collection_paused()
def trace(fn, args=(), kwargs=None, outfeed_queues=None, on_progress=None):
    """Trace `fn(*args, **kwargs)` into IR. See the module docstring.

    `on_progress(phase, done, total, note)`, if given, follows the work: phase
    "tensorflow" after each Keras layer call while TensorFlow traces (`done` calls so far,
    `total` None, `note` the layer's name), then "import" as each op of the graph is
    turned into IR (`done` of `total` ops, `note` the op's name)."""
    tf_fn, specs, _ = make_tf_function(fn, args, kwargs)
    layers = LayerScopes()
    with layers.recording(_layer_calls(on_progress)), _custom_gradients_released():
        try:
            concrete = tf_fn.get_concrete_function(*specs)
        except Exception as e:  # noqa: BLE001 - re-raised, or its designed cause instead
            _raise_designed_cause(e)
            raise
    return import_concrete(concrete, len(specs), layers, outfeed_queues, on_progress)


def _layer_calls(on_progress):
    """`LayerScopes.recording`'s `on_call` reporting the layer calls to `on_progress`."""
    if on_progress is None:
        return None
    calls = [0]

    def on_call(layer_name):
        calls[0] += 1
        on_progress("tensorflow", calls[0], None, layer_name)

    return on_call


@contextlib.contextmanager
def _custom_gradients_released():
    """Unregisters the gradient functions `tf.custom_gradient` registers while tracing.

    In graph mode each call registers a new global gradient function (`CustomGradient-N`)
    whose closure holds the traced graph, forever: tracing a Keras train step (its
    `all_reduce`) leaked one FuncGraph per model. Gradients are already part of the
    traced graph (Keras differentiates inside the step), so nothing looks them up after.
    """
    registry = getattr(getattr(tf_ops, "_gradient_registry", None), "_registry", None)
    before = set(registry) if isinstance(registry, dict) else None
    try:
        yield
    finally:
        if before is not None:
            for name in [n for n in registry if n not in before]:
                if name.startswith("CustomGradient-"):
                    registry.pop(name, None)


def import_concrete(concrete, num_args, layers=None, outfeed_queues=None, on_progress=None):
    graph = concrete.graph
    state = StateTable()
    importer = GraphImporter(state, layers, outfeed_queues)
    inputs, env = [], {}
    for placeholder in graph.inputs[:num_args]:
        value = Value(TensorType(tuple(placeholder.shape), numpy_dtype(placeholder.dtype)),
                      placeholder.op.name)
        inputs.append(value)
        env[placeholder.ref()] = value
    captured_consts = Builder()
    variables = {id(var.handle): (var.handle, var) for var in graph.variables}
    for external, internal in graph.captures:
        env[internal.ref()] = _bind_capture(external, variables, captured_consts)
    outputs = [t for t in graph.outputs if t.dtype != tf.resource]
    on_op = None if on_progress is None else (
        lambda done, total, name: on_progress("import", done, total, name))
    body = importer.import_graph(graph, inputs, env, outputs, on_op)
    ir = Graph(inputs, body.outputs, captured_consts.equations + body.equations,
               variables=state.variables, infeeds=state.infeeds, outfeeds=state.outfeeds)
    if layers is not None:
        attribute_updates(ir, layers.variable_layers(state.variable_objects))
    return Traced(ir, state.variable_objects, state.infeed_objects, state.outfeed_objects,
                  concrete.structured_outputs, concrete)


def _bind_capture(external, variables, builder):
    """A captured tensor as IR: a variable (`variables`: the graph's `(handle, variable)`
    by `id` of the handle), another resource (an iterator), or a constant."""
    if external.dtype == tf.resource:
        handle, var = variables.get(id(external), (None, None))
        if handle is external:
            return StateRef("variable", var)
        return StateRef("iterator", external)
    return builder.const(external.numpy())
