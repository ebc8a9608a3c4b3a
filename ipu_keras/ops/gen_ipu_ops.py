"""`gen_ipu_ops.ipu_event_trace()`: the event trace op of TensorFlow 1 IPU code.

The original returned the serialized IPU events (compilation and execution reports)
gathered since its last run. Here the events are the `profiling` report of the most
recent execution, as one JSON string; the op returns an empty vector if nothing has
run. It runs on the host, so it works in a TF1 graph (a `sess.run`-able op) and eagerly.
"""
import json

import numpy as np
import tensorflow as tf

from ipu_keras._src import compat
from ipu_keras import profiling


def _events():
    report = profiling.last_report()
    if report is None:
        return np.array([], dtype=object)
    return np.array([json.dumps(report.to_dict(), default=float)], dtype=object)


def ipu_event_trace(name=None):
    """A string vector holding the report of the last execution as JSON (empty if none).

    Args:
        name: A name for the operation.

    Returns:
        A `tf.string` tensor of shape `[n]`, `n` being 0 or 1.
    """
    with tf.device("cpu"):
        events = tf.py_function(lambda: tf.constant(_events(), tf.string), [], tf.string,
                                name=name or "ipu_event_trace")
    events.set_shape([None])
    return events


compat.declare("gen_ipu_ops.ipu_event_trace", compat.SUPPORTED,
               "a host op returning the last execution's report as JSON", "2.1")
