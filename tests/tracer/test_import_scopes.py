"""Layer names of traced equations, and functions the tracer must follow to import."""
import numpy as np
import keras
import tensorflow as tf

from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.tracer import trace


def _layers_by_op(graph, ops):
    found = {}
    for eqn in graph.walk():
        if eqn.op in ops:
            found.setdefault((eqn.op, eqn.outputs[0].type.shape), eqn.source.layer)
    return found


def test_layers_whose_scopes_collide_are_told_apart():
    # Inside the trace layer `conv2d` runs under scope `conv2d_1`, the other layer's name.
    model = keras.Sequential([
        keras.Input((12, 12, 1)), keras.layers.Conv2D(4, 3, activation="relu"),
        keras.layers.MaxPooling2D(), keras.layers.Conv2D(6, 3), keras.layers.Flatten(),
        keras.layers.Dense(3),
    ])
    model.compile("sgd", "mse")
    data = (np.zeros((2, 12, 12, 1), np.float32), np.zeros((2, 3), np.float32))
    found = _layers_by_op(trace(model.train_step, (data,)).graph,
                          {"conv", "bias_add_grad", "conv_filter_grad", "max_pool_grad"})
    first, second = model.layers[0].name, model.layers[2].name
    assert found[("conv", (2, 10, 10, 4))] == first
    assert found[("conv", (2, 3, 3, 6))] == second
    assert found[("bias_add_grad", (4,))] == first  # a gradient op, created outside the call
    assert found[("conv_filter_grad", (3, 3, 4, 6))] == second
    assert found[("max_pool_grad", (2, 10, 10, 4))] == model.layers[1].name


def test_plain_tensorflow_ops_belong_to_no_layer():
    graph = trace(lambda x: tf.nn.relu(x) * 2.0, (np.ones(3, np.float32),)).graph
    assert all(eqn.source.layer == "" for eqn in graph.walk())


def test_legacy_defun_loop_bodies_and_their_calls_are_followed():
    """TensorFlow's dense CTC loss runs a functional_ops.While over Defun functions."""
    import ipu_keras

    y_pred = np.random.default_rng(0).random((2, 6, 5)).astype(np.float32)
    y_true = np.array([[1, 2, 0], [3, 3, 1]], np.int32)

    def loss(p, t):
        return keras.losses.CTC()(t, p)

    expected = loss(tf.constant(y_pred), tf.constant(y_true)).numpy()
    (got,) = ipu_keras.ipu_compiler.compile(loss, [y_pred, y_true])
    T.FLOAT32.assert_close(got, expected)
