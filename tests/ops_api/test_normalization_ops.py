"""`ipu.normalization_ops` (issue 31, item 7): group, layer and instance norm on the
simulated IPU against TensorFlow on the CPU, forward and gradients, TF2 and TF1.

The oracles: Keras' `GroupNormalization` (contiguous groups) and `LayerNormalization`
over every non-batch axis, and, for the IPU's strided grouping, the same function run by
TensorFlow on the CPU after checking it against a float64 numpy reference.
"""
import keras
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T
from ipu_keras.errors import OpArgumentError
from ipu_keras.ops import normalization_ops as N

v1 = tf.compat.v1
RNG = np.random.default_rng(31)
X = RNG.normal(1.0, 2.0, (2, 3, 4, 6)).astype(np.float32)
EPS = 1e-3


def _reference(x, groups, strided, eps=EPS):
    """Group norm in float64 over channels-last `x`, without gamma and beta."""
    n, c = x.shape[0], x.shape[-1]
    group_of = np.arange(c) % groups if strided else np.arange(c) // (c // groups)
    x64 = x.reshape(n, -1, c).astype(np.float64)
    out = np.empty_like(x64)
    for g in range(groups):
        part = x64[:, :, group_of == g]
        mean = part.mean(axis=(1, 2), keepdims=True)
        var = part.var(axis=(1, 2), keepdims=True)
        out[:, :, group_of == g] = (part - mean) / np.sqrt(var + eps)
    return out.reshape(x.shape)


def _on_ipu(fn, *args):
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        return tf.nest.map_structure(lambda t: t.numpy(), strategy.run(tf.function(fn),
                                                                       args=args))


def _with_gradient(norm):
    """The normalised x and d(sum(y * w))/dx, with a fixed upstream weight w."""
    w = np.linspace(-1.0, 2.0, X.size, dtype=np.float32).reshape(X.shape)

    def fn(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = norm(x)
            loss = tf.reduce_sum(y * w)
        return y, tape.gradient(loss, x)

    return fn


NORMS = {
    "group_strided": (lambda x: N.group_norm(x, groups=3, epsilon=EPS, center=False,
                                             scale=False), None),
    "group_contiguous": (lambda x: N.group_norm(x, groups=3, epsilon=EPS, center=False,
                                                scale=False, strided_channel_grouping=False),
                         keras.layers.GroupNormalization(3, epsilon=EPS, center=False,
                                                         scale=False)),
    "layer": (lambda x: N.layer_norm(x, epsilon=EPS, center=False, scale=False),
              keras.layers.LayerNormalization(axis=[1, 2, 3], epsilon=EPS, center=False,
                                               scale=False)),
    "instance": (lambda x: N.instance_norm(x, epsilon=EPS, center=False, scale=False),
                 keras.layers.GroupNormalization(6, epsilon=EPS, center=False, scale=False)),
}


@pytest.mark.parametrize("name", sorted(NORMS))
def test_forward_and_gradient_match_tensorflow_on_the_cpu(name, executions):
    norm, oracle = NORMS[name]
    y, dx = _on_ipu(_with_gradient(norm), X)
    assert len(executions) == 1
    # No Keras layer groups channels with a stride: the oracle is the function on the CPU.
    want_y, want_dx = (t.numpy() for t in _with_gradient(oracle or norm)(tf.constant(X)))
    T.FLOAT32.assert_close(y, want_y)
    T.FLOAT32.assert_close(dx, want_dx)
    if name == "group_strided":   # the oracle above is our own function: pin it to numpy
        T.FLOAT32.assert_close(want_y, _reference(X, 3, True))


def test_channels_first_normalises_the_same_channels():
    nchw = np.transpose(X, [0, 3, 1, 2])
    y = _on_ipu(lambda x: N.group_norm(x, groups=2, channels_axis=1, epsilon=EPS,
                                       center=False, scale=False), nchw)
    T.FLOAT32.assert_close(np.transpose(y, [0, 2, 3, 1]), _reference(X, 2, True))


def test_layer_norm_of_features_and_training_false_computes_the_same():
    x = X.reshape(2, -1)
    train = _on_ipu(lambda x: N.layer_norm(x, epsilon=EPS, center=False, scale=False), x)
    infer = _on_ipu(lambda x: N.layer_norm(x, epsilon=EPS, center=False, scale=False,
                                           training=False), x)
    np.testing.assert_array_equal(train, infer)
    want = keras.layers.LayerNormalization(epsilon=EPS, center=False, scale=False)(x)
    T.FLOAT32.assert_close(train, want.numpy())


# -- TensorFlow 1: the variables, and a training step ------------------------------------

def _train_step(x):
    y = N.group_norm(x, groups=3, epsilon=EPS,
                     param_initializers={"gamma": v1.constant_initializer(1.5),
                                         "beta": v1.constant_initializer(0.25)})
    loss = tf.reduce_sum(tf.square(y - 0.5) * tf.range(6, dtype=tf.float32))
    train = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    with tf.control_dependencies([train]):
        return tf.identity(loss)


def _run_tf1(on_ipu, steps=2):
    with tf.Graph().as_default(), v1.Session() as sess:
        x = v1.placeholder(np.float32, X.shape)
        if on_ipu:
            with ipu.scopes.ipu_scope("/device:IPU:0"):
                (loss,) = ipu.ipu_compiler.compile(_train_step, [x])
        else:
            with v1.variable_scope("", use_resource=True):
                loss = _train_step(x)
        sess.run(v1.global_variables_initializer())
        losses = [sess.run(loss, {x: X}) for _ in range(steps)]
        names = [v.op.name for v in v1.global_variables()]
        return losses, names, sess.run(v1.trainable_variables())


def test_tf1_training_step_updates_beta_and_gamma_as_on_the_cpu(executions):
    losses, names, weights = _run_tf1(on_ipu=True)
    assert len(executions) == 2
    cpu_losses, cpu_names, cpu_weights = _run_tf1(on_ipu=False)
    assert names[:2] == cpu_names[:2] == ["GroupNorm/beta", "GroupNorm/gamma"]
    T.FLOAT32.assert_close(losses, cpu_losses)
    for got, want in zip(weights, cpu_weights):
        T.FLOAT32.assert_close(got, want)
    assert not np.allclose(weights[0], 0.25)   # the step moved beta


def test_tf1_scopes_reuse_and_collections():
    with tf.Graph().as_default():
        x = v1.placeholder(np.float32, [2, 4])
        N.layer_norm(x, scope="ln", variables_collections={"beta": ["betas"]})
        N.layer_norm(x, scope="ln", reuse=True)
        N.instance_norm(x)
        N.group_norm(x, center=False, scale=False)
        N.group_norm(x, groups=4, trainable=False)
        names = [v.op.name for v in v1.global_variables()]
        # As in TensorFlow 1, given collections replace the default (global) one.
        assert names == ["ln/gamma", "InstanceNorm/beta", "InstanceNorm/gamma",
                         "GroupNorm_1/beta", "GroupNorm_1/gamma"]
        assert [v.op.name for v in v1.get_collection("betas")] == ["ln/beta"]
        assert len(v1.trainable_variables()) == 4   # not GroupNorm_1 (trainable=False)


@pytest.mark.parametrize("call, match", [
    (lambda x: N.group_norm(x, groups=5), "groups to divide the 6 channels.*groups=5"),
    (lambda x: N.group_norm(x, groups=8), r"groups in \[1, 6\].*groups=8"),
    (lambda x: N.group_norm(x, channels_axis=2), "axis 1 .* or -1.*channels_axis=2"),
    (lambda x: N.layer_norm(x, channels_axis=7), "within the rank 4.*channels_axis=7"),
    (lambda x: N.group_norm(x, param_initializers=[1]), "param_initializers=\\[1\\]"),
])
def test_bad_arguments_are_named(call, match):
    with pytest.raises(OpArgumentError, match=match):
        call(tf.constant(X))


def test_unknown_rank_and_a_small_epsilon():
    with tf.Graph().as_default():
        with pytest.raises(OpArgumentError, match="known rank"):
            N.group_norm(v1.placeholder(np.float32, None))
    with pytest.warns(UserWarning, match="epsilon value of group_norm is too low.*1e-06"):
        N.group_norm(tf.constant(X), epsilon=1e-6, center=False, scale=False)
