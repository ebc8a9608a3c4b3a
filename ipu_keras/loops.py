"""`loops.repeat`: an on-device loop, written as a `tf.while_loop` the tracer imports."""
import tensorflow as tf

from ipu_keras._src.keras.gradient_accumulation import repeat_loop


def repeat(n, body, inputs=None, infeed_queue=None, use_while_v1=False):
    """Runs `body` `n` times on the device.

    Args:
        n: Number of iterations (a Python int or a scalar tensor).
        body: `body(*inputs)` returning the new loop values; with an `infeed_queue`,
            the dequeued element follows the inputs (`body(*inputs, *element)`, or
            `body(*inputs, **element)` when the dataset yields dicts).
        inputs: The initial loop values (a list of tensors), or None.
        infeed_queue: An `IPUInfeedQueue` (or dataset iterator) read once per iteration.
        use_while_v1: Ignored; kept for compatibility.

    Returns:
        The final loop values as a list (empty when there are no inputs).
    """
    del use_while_v1
    inputs = [tf.convert_to_tensor(x) for x in (inputs or [])]

    def loop_body(i, *values):
        with repeat_loop(n):
            return [i + 1] + _run_body(values)

    def _run_body(values):
        if infeed_queue is None:
            results = body(*values)
        else:
            element = next(infeed_queue)
            if isinstance(element, dict):
                results = body(*values, **element)
            else:
                element = element if isinstance(element, (tuple, list)) else (element,)
                results = body(*values, *element)
        if results is None or isinstance(results, tf.Operation):
            results = []
        elif not isinstance(results, (list, tuple)):
            results = [results]
        if len(results) != len(values):
            raise ValueError(
                f"loops.repeat expected the body to return {len(values)} loop values, one per "
                f"input. Received: {len(results)} values."
            )
        return list(results)

    outputs = tf.while_loop(lambda i, *_: i < n, loop_body, [tf.constant(0)] + inputs)
    return list(outputs[1:])
