"""Hand-built IR graphs shared by the TensorFlow-free tests of ir, compiler and simulator."""
import numpy as np

from ipu_keras._src.ir import FeedSpec, Graph, TensorType, VariableSpec
from ipu_keras._src.ops.builder import Builder, new_input
from ipu_keras._src.simulator import get_target


def small_target(tiles=16, version="ipu2"):
    return get_target(version, tiles_per_ipu=tiles)


def dense_step():
    """x[4,3] -> relu(x @ w + b); writes w -= 0.1 * x^T y; returns (y, sum(y))."""
    b = Builder()
    x = new_input((4, 3), "float32", "x")
    w = b.emit("read_var", [], var=0, type=TensorType((3, 2), "float32"))
    bias = b.const(np.array([0.5, -0.5], np.float32))
    y = b.emit("relu", [b.emit("add", [b.emit("matmul", [x, w]), bias])])
    grad = b.emit("matmul", [x, y], transpose_a=True)
    b.emit("write_var", [b.emit("mul", [grad, b.const(np.float32(0.1))])], var=0, mode="sub")
    total = b.emit("reduce_sum", [y], axes=(0, 1), keep_dims=False)
    return b.graph([x], [y, total], variables=[VariableSpec("w", TensorType((3, 2), "float32"))])


def dense_step_reference(x, w):
    y = np.maximum(x @ w + np.array([0.5, -0.5], np.float32), 0)
    return y, y.sum(), w - np.float32(0.1) * (x.T @ y)


def counting_loop(limit=5):
    """while i < limit: acc = acc * 2 + infeed(); outfeed(acc); i += 1. Returns (i, acc)."""
    i_type, acc_type = TensorType((), "int32"), TensorType((2,), "float32")
    cb = Builder()
    ci, cacc = new_input((), "int32"), new_input((2,), "float32")
    cond = cb.graph([ci, cacc], [cb.emit("less", [ci, cb.const(np.int32(limit))])])
    bb = Builder()
    bi, bacc = new_input((), "int32"), new_input((2,), "float32")
    element = bb.emit("infeed", [], infeed=0, types=(acc_type,))
    acc = bb.emit("add", [bb.emit("mul", [bacc, bb.const(np.float32(2))]), element])
    bb.emit("outfeed", [acc], outfeed=0)
    body = bb.graph([bi, bacc], [bb.emit("add", [bi, bb.const(np.int32(1))]), acc])
    b = Builder()
    start = new_input((2,), "float32", "start")
    i, out = b.emit("while", [b.const(np.int32(0)), start], cond=cond, body=body)
    return Graph([start], [i, out], b.equations, infeeds=[FeedSpec("in", (acc_type,))],
                 outfeeds=[FeedSpec("out", (acc_type,))]), i_type


class ListStreams:
    """Host streams for the engine: infeed 0 from a list, outfeed 0 into a list."""

    def __init__(self, elements):
        self.elements = list(elements)
        self.out = []

    def pull(self, feed):
        return [self.elements.pop(0)]

    def push(self, feed, arrays):
        self.out.append(arrays[0])


def row_ops(b, logits, labels, sparse):
    """Emit the ops that work row by row (softmaxes and cross-entropies); yields outputs."""
    yield b.emit("softmax", [logits])
    yield b.emit("log_softmax", [logits])
    yield from b.emit("softmax_xent", [logits, labels])
    yield from b.emit("sparse_softmax_xent", [logits, sparse])
