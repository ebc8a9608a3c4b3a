"""Runs a TensorFlow 1 listing as TensorFlow 1.15 ran it: graph mode, v1 behaviour.

`python run_listing.py LISTING.py [SEED]` disables the v2 behaviour (which the seeds'
TF1 listings assume, having been written for TensorFlow 1.15), fixes the graph and
numpy seeds when SEED is given, and runs the listing as `__main__`. Each listing runs
in its own process, so graph mode never leaks into the rest of the suite.
"""
import runpy
import sys

import numpy as np
import tensorflow as tf


def run(path, seed=None):
    tf.compat.v1.disable_v2_behavior()
    if seed is not None:
        np.random.seed(seed)
        tf.compat.v1.set_random_seed(seed)
    return runpy.run_path(path, run_name="__main__")


if __name__ == "__main__":
    run(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else None)
