"""`loops.repeat`: an on-device loop, written as a `tf.while_loop` the tracer imports.

The body's results follow the original's rule: zero or more tensors (the new loop
values, of the inputs' dtypes) followed by zero or more operations. The operations
run every iteration, as control dependencies of the carried values; they are not
carried. A loop with no inputs carries a dummy counter and returns the loop's
operation; one input returns a tensor; several, a list.
"""
import tensorflow as tf

from ipu_keras._src.keras.gradient_accumulation import repeat_loop


def repeat(n, body, inputs=None, infeed_queue=None, use_while_v1=True):
    """Runs `body` `n` times on the device.

    Args:
        n: Number of iterations (a Python int or a scalar tensor).
        body: `body(*inputs)` returning the new loop values, then any operations to run
            every iteration (e.g. `return lr, train_op, outfeed.enqueue(loss)`); with an
            `infeed_queue`, the dequeued element follows the inputs
            (`body(*inputs, *element)`, or `body(*inputs, **element)` when the dataset
            yields dicts).
        inputs: The initial loop values (a tensor or a list of tensors), or None.
        infeed_queue: An `IPUInfeedQueue` (or dataset iterator) read once per iteration.
        use_while_v1: Accepted for compatibility (the simulator has one kind of loop).

    Returns:
        The final loop value (one input), a list of them (several), or the loop's
        `tf.Operation` (no inputs).

    Raises:
        ValueError: when the body returns an operation before a tensor.
        TypeError: when the body's tensors do not have the inputs' dtypes.
    """
    del use_while_v1
    inputs = [tf.convert_to_tensor(x) for x in _as_list(inputs)]
    types = [x.dtype for x in inputs]

    def loop_body(i, *values):
        values = list(values) if inputs else []   # drop the dummy carried value
        with repeat_loop(n):
            tensors, operations = _split(_call(body, values, infeed_queue))
        if [t.dtype for t in tensors] != types:
            raise TypeError(
                "Mismatch between input types and output types for loop body: "
                f"{types} vs {[t.dtype for t in tensors]}. Received: a body returning "
                f"{len(tensors)} tensors for {len(inputs)} inputs.")
        carried = tensors or [tf.constant(0)]
        if operations:
            carried = tf.tuple(carried, control_inputs=operations)
        return [i + 1] + list(carried)

    start = inputs or [tf.constant(0)]
    outputs = tf.while_loop(lambda i, *_: i < n, loop_body, [tf.constant(0)] + start)
    outputs = tf.nest.flatten(outputs)[1:]
    if not inputs:
        return outputs[0].op
    return outputs[0] if len(outputs) == 1 else outputs


def _as_list(values):
    if values is None:
        return []
    return list(values) if isinstance(values, (list, tuple)) else [values]


def _call(body, values, infeed_queue):
    if infeed_queue is None:
        return body(*values)
    element = next(infeed_queue)
    if isinstance(element, dict):
        return body(*values, **element)
    element = element if isinstance(element, (tuple, list)) else (element,)
    return body(*values, *element)


def _split(results):
    """The body's tensors and operations, in the original's order: tensors first."""
    results = _as_list(results)
    results = [r if isinstance(r, tf.Operation) else tf.convert_to_tensor(r) for r in results]
    operations = [r for r in results if isinstance(r, tf.Operation)]
    tensors = [r for r in results if not isinstance(r, tf.Operation)]
    if any(a is not b for a, b in zip(results, tensors + operations)):
        raise ValueError(
            "IPU loop body must return zero or more Tensor values followed by zero or more "
            f"Operations. Received: {[type(r).__name__ for r in results]}.")
    return tensors, operations
