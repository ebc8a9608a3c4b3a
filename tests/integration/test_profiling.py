"""profiling.last_report() after compiled functions run on the simulated IPU."""
import numpy as np
import tensorflow as tf

import ipu_keras as ipu


def test_last_report_after_ipu_compiler_compile():
    def fn(x, w):
        return tf.nn.relu(tf.matmul(x, w))

    x = np.ones((8, 16), np.float32)
    w = np.ones((16, 4), np.float32)
    ipu.ipu_compiler.compile(fn, [x, w])
    report = ipu.profiling.last_report()
    assert report.steps == 1
    assert report.target["name"] == "ipu2" and report.target["tiles_per_ipu"] == 1472
    assert report.total_cycles == sum(report.cycles.values()) > 0
    assert report.cycles["compute"] > 0 and report.cycles["exchange"] > 0
    assert len(report.tile_memory) == 1472 and report.max_tile_memory > 0
    assert report.plans[0]["op"] == "matmul"


def test_steps_are_the_iterations_of_the_outermost_loop():
    def program(x):
        return ipu.loops.repeat(5, lambda acc: acc * 2.0, [x])

    ipu.ipu_compiler.compile(program, [np.ones(4, np.float32)])
    assert ipu.profiling.last_report().steps == 5
