"""Runs the seeds' TF1 listings in this process and prints what they give, as JSON.

`python listing_driver.py tutorials` runs the three tutorial listings one after the
other, each in a fresh default graph, and prints for each the value it printed and the
same graph function run by TensorFlow on the CPU (a session with no IPU code).
`python listing_driver.py resnext` runs the ResNeXt listing with fixed seeds and prints
its first outfed logits, the logits TensorFlow on the CPU gives with the same variable
values and input, and facts of the compiled executable.
"""
import contextlib
import io
import json
import os
import sys

import numpy as np
import tensorflow as tf

from run_listing import run

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "listings")
FEEDS = ([1., 1.], [0., 1.], [1., 5.])


def _run_quietly(name, seed=None):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        scope = run(os.path.join(HERE, name), seed)
    return scope, out.getvalue()


def _cpu(fn, *args):
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
        return sess.run(fn(*[tf.constant(a, tf.float32) for a in args]))


def tutorials():
    results = {}
    for name, fn in (("tutorial_basic.py", "basic_graph"),
                     ("tutorial_xla_compile.py", "basic_graph"),
                     ("tutorial_sharding.py", "sharded_graph")):
        tf.compat.v1.reset_default_graph()
        scope, printed = _run_quietly(name)
        results[name] = {"printed": printed.strip(),
                         "result": np.asarray(scope["result"], dtype=float).tolist(),
                         "cpu": _cpu(scope[fn], *FEEDS).tolist()}
    return results


def resnext():
    import ipu_keras  # noqa: PLC0415 - after the listing configured it

    scope, printed = _run_quietly("resnext_inference.py", seed=1)
    graph = tf.compat.v1.get_default_graph()
    # The listing's session is closed: a new one initialises the variables to the same
    # values (the graph seed fixes every initialiser), and the CPU runs the model on them.
    with graph.as_default():
        element = tf.compat.v1.data.make_one_shot_iterator(scope["dataset"]).get_next()
        with tf.compat.v1.variable_scope("VanillaResNeXt", reuse=True):
            logits = scope["resnext_features"](element["features"])
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            cpu = sess.run(logits)
    report = ipu_keras.profiling.last_report()
    return {"printed": printed, "outfed": np.asarray(scope["outfed"], float).tolist(),
            "cpu": cpu.astype(float).tolist(),
            "conv_options": ipu_keras.config.get_active_config().convolutions.poplar_options,
            "max_tile_memory": report["max_tile_memory"] if report else None,
            "steps": report["steps"] if report else None}


if __name__ == "__main__":
    print("RESULT " + json.dumps({"tutorials": tutorials, "resnext": resnext}[sys.argv[1]]()))
