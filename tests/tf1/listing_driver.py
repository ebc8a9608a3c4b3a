"""Runs the seeds' TF1 listings in this process and prints what they give, as JSON.

`python listing_driver.py tutorials` runs the three tutorial listings one after the
other, each in a fresh default graph, and prints for each the value it printed and the
same graph function run by TensorFlow on the CPU (a session with no IPU code).
`python listing_driver.py resnext` runs the ResNeXt listing with fixed seeds and prints
its first outfed logits, the logits TensorFlow on the CPU gives in float32 with the same
variable values and input, and facts of the compiled executable.
"""
import contextlib
import io
import json
import os
import sys

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import rewriter_config_pb2

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


def _float32_twin(scope):
    """The listing's model run by TensorFlow on the CPU in float32, from the same float16
    variable values and input (TensorFlow's float16 kernels differ by instruction set)."""
    v1 = tf.compat.v1
    features_fn = scope["resnext_features"]
    # The listing's session is closed: a new one initialises the variables to the same
    # values (the graph seed fixes every initialiser); the twin copies them up to float32.
    with v1.get_default_graph().as_default():
        element = v1.data.make_one_shot_iterator(scope["dataset"]).get_next()
        features_fn.__globals__["DTYPE"] = tf.float32
        try:
            with v1.variable_scope("Float32Twin"):
                logits = features_fn(tf.cast(element["features"], tf.float32))
        finally:
            features_fn.__globals__["DTYPE"] = tf.float16
        originals = {v.name.split("/", 1)[1]: v for v in v1.global_variables()
                     if v.name.startswith("VanillaResNeXt/")}
        copies = [v.assign(tf.cast(originals[v.name.split("/", 1)[1]], v.dtype))
                  for v in v1.global_variables() if v.name.startswith("Float32Twin/")]
        # Grappler's remapper would fuse the float32 group convolutions with their batch
        # norms into a kernel that rejects groups; the graph runs as written.
        config = v1.ConfigProto()
        config.graph_options.rewrite_options.remapping = rewriter_config_pb2.RewriterConfig.OFF
        with v1.Session(config=config) as sess:
            sess.run(v1.global_variables_initializer())
            sess.run(copies)
            return sess.run(logits)


def resnext():
    import ipu_keras  # noqa: PLC0415 - after the listing configured it

    scope, printed = _run_quietly("resnext_inference.py", seed=1)
    cpu = _float32_twin(scope)
    report = ipu_keras.profiling.last_report()
    return {"printed": printed, "outfed": np.asarray(scope["outfed"], float).tolist(),
            "cpu_float32": cpu.astype(float).tolist(),
            "conv_options": ipu_keras.config.get_active_config().convolutions.poplar_options,
            "max_tile_memory": report["max_tile_memory"] if report else None,
            "steps": report["steps"] if report else None}


if __name__ == "__main__":
    print("RESULT " + json.dumps({"tutorials": tutorials, "resnext": resnext}[sys.argv[1]]()))
