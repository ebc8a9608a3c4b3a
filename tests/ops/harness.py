"""Table-driven checks of single TensorFlow ops against TensorFlow on the CPU.

A `Case` names the TensorFlow op type it exercises, a function of tensors that
produces it (under `tf.GradientTape` for gradient ops) and its inputs. `check_case`
runs the function eagerly in TensorFlow and compiled on the simulated IPU through
`ipu_keras.ipu_compiler.compile`, and compares: exactly for integer and bool
results, within the case's tolerance for floats (a row of
`ipu_keras._src.conformance.tolerances`, FLOAT32 unless the case names another). It also
proves the traced graph really contains the named op, so a record cannot silently test
something else. The input makers (`f32`, `positive`, `i32`, `boolean`) draw from a generator
per test module, seeded by its name: a module's data does not depend on which modules
were collected before it.
"""
import dataclasses
import sys
import zlib

import numpy as np
import tensorflow as tf

import ipu_keras
from ipu_keras._src.conformance import tolerances


@dataclasses.dataclass
class Case:
    tf_op: str
    fn: object
    inputs: tuple
    tolerance: tolerances.Tolerance = tolerances.FLOAT32
    label: str = ""

    @property
    def id(self):
        return f"{self.tf_op}-{self.label}" if self.label else self.tf_op


def case(tf_op, fn, *inputs, tolerance=tolerances.FLOAT32, label=""):
    return Case(tf_op, fn, tuple(inputs), tolerance, label)


_rngs = {}


def _rng():
    """The random generator of the test module calling the input maker: one per module,
    seeded by the module's name, so that one module's cases do not change another's data."""
    module = sys._getframe(2).f_globals.get("__name__", "")
    if module not in _rngs:
        _rngs[module] = np.random.default_rng(zlib.crc32(module.encode()))
    return _rngs[module]


def f32(*shape, low=-2.0, high=2.0):
    return _rng().uniform(low, high, shape).astype(np.float32)


def positive(*shape):
    return _rng().uniform(0.1, 3.0, shape).astype(np.float32)


def i32(*shape, low=-5, high=5):
    return _rng().integers(low, high, shape).astype(np.int32)


def boolean(*shape):
    return _rng().integers(0, 2, shape).astype(bool)


def grad(fn, *argnums):
    """A function returning d(sum(fn(*xs) * w))/d(xs[i]) with a fixed upstream weight w."""

    def wrapped(*xs):
        with tf.GradientTape() as tape:
            for i in argnums or range(len(xs)):
                tape.watch(xs[i])
            y = fn(*xs)
            w = tf.cast(tf.reshape(tf.range(tf.size(y)), tf.shape(y)) % 3 + 1, y.dtype)
            loss = tf.reduce_sum(y * w)
        got = tape.gradient(loss, [xs[i] for i in (argnums or range(len(xs)))])
        return tuple(got)

    return wrapped


def op_types(graph):
    found = set()
    for op in graph.get_operations():
        found.add(op.type)
        if "_ipu_op" in op.node_def.attr:   # a call marked as one IPU op (tracer/marked.py)
            found.add(op.node_def.attr["_ipu_op"].s.decode())
        for attr in ("f", "body", "cond", "then_branch", "else_branch"):
            if attr in op.node_def.attr:
                fn = graph._functions.get(op.node_def.attr[attr].func.name)
                if hasattr(fn, "graph"):  # not a legacy Defun, which has no graph
                    found |= op_types(fn.graph)
    return found


def check_case(c):
    fn = tf.function(c.fn)
    specs = [tf.TensorSpec(x.shape, x.dtype) for x in c.inputs]
    traced = op_types(fn.get_concrete_function(*specs).graph)
    assert c.tf_op in traced, f"{c.id}: the function never emits {c.tf_op}; it has {traced}"
    expected = tf.nest.flatten(c.fn(*[tf.constant(x) for x in c.inputs]))
    got = ipu_keras.ipu_compiler.compile(c.fn, list(c.inputs))
    assert len(got) == len(expected), (len(got), len(expected))
    for g, e in zip(got, expected):
        e = np.asarray(e)
        g = np.asarray(g)
        assert g.shape == e.shape, f"{c.id}: shape {g.shape} != {e.shape}"
        assert g.dtype == e.dtype, f"{c.id}: dtype {g.dtype} != {e.dtype}"
        if e.dtype.kind in "biu":
            np.testing.assert_array_equal(g, e, err_msg=c.id)
        else:
            c.tolerance.assert_close(g, e, err_msg=c.id)
