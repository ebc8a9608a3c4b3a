"""`experimental_application_compile_op` in a TensorFlow 1 graph: a host op that compiles.

As in the SDK, the op is built into the graph and compiles when a `Session` runs it: the
function's ops are cut out as a cluster (`cluster.py`), and the op, a `py_function` on
the CPU, binds the cluster's infeeds to stand-ins of their element types (the embedded
runtime's calls feed the program, so the queues need no initialiser), reads its
variables (their values when the op runs: what `freeze_variables` embeds), compiles it
and writes the application file (`driver/application.py`), returning its path.
"""
import tensorflow as tf

from ipu_keras._src.driver.application import write_application
from ipu_keras._src.tf1 import cluster as clusters


def compile_op_in_graph(func, inputs, output_path, freeze_variables, name):
    """The string tensor whose evaluation compiles `func(*inputs)` to `output_path`."""
    graph = tf.compat.v1.get_default_graph()
    first = len(graph.get_operations())
    initializers = {v.initializer.name for v in tf.compat.v1.global_variables()}
    with clusters._control_flow_v2():  # noqa: SLF001 - the cluster module's own switch
        result = func(*inputs)
    new_ops = graph.get_operations()[first:]
    initializers |= {v.initializer.name for v in tf.compat.v1.global_variables()}
    flat = [r for r in tf.nest.flatten(result) if r is not None]
    outputs = [t for t in flat if isinstance(t, tf.Tensor)]
    cluster = clusters.Cluster(graph, outputs, new_ops, initializers, name)
    placeholders = [op.outputs[0] for op in cluster.placeholders]
    names = [op.name for op in cluster.placeholders]

    def compile_now(*arrays):
        standins = [_element_types(queue) for _, queue in cluster.iterators]
        cluster.bound = [it._iterator_resource for it in standins]  # noqa: SLF001
        compiled = cluster._compile()  # noqa: SLF001 - the cluster's compile, not its run
        for variable, value in zip(cluster.standins, arrays[len(placeholders):]):
            variable.assign(value)
        return write_application(compiled.traced, compiled.executable, names, output_path,
                                 freeze_variables, name)

    with tf.device("/device:CPU:0"):
        reads = [tf.raw_ops.ReadVariableOp(resource=op.outputs[0], dtype=op.get_attr("dtype"))
                 for op in cluster.variables]
        return tf.py_function(compile_now, placeholders + reads, tf.string, name=name)


def _element_types(queue):
    """An iterator of zeros shaped as `queue`'s elements: compiling needs only their types,
    so the queue need not be initialised (the runtime's calls feed the program)."""
    zeros = tuple(tf.zeros(s.shape, s.dtype) for s in queue.flat_specs)
    return iter(tf.data.Dataset.from_tensors(zeros).repeat())


__all__ = ["compile_op_in_graph"]
