"""TF1 optimizers' fused updates (`ResourceApplyMomentum`, `ResourceApplyAdam`, and
`ResourceApplyGradientDescent`) inside a compiled `loops.repeat`, step by step against
the same optimizer run by TensorFlow on the CPU: what TF1 pipelines and replication
examples train with (`optimizer_function`, `CrossReplicaOptimizer(opt).minimize`)."""
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T

v1 = tf.compat.v1
STEPS, BATCH = 4, 2
_rng = np.random.RandomState(3)
X = _rng.rand(STEPS * BATCH, 3).astype(np.float32)
Y = _rng.rand(STEPS * BATCH, 1).astype(np.float32)
OPTIMIZERS = {
    "sgd": lambda: v1.train.GradientDescentOptimizer(0.1),
    "momentum": lambda: v1.train.MomentumOptimizer(0.1, 0.9),
    "nesterov": lambda: v1.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
    "adam": lambda: v1.train.AdamOptimizer(0.05),
}


def _loss(x, y):
    with v1.variable_scope("m", use_resource=True, reuse=v1.AUTO_REUSE):
        w = v1.get_variable("w", [3, 1], initializer=v1.constant_initializer(0.5))
        b = v1.get_variable("b", [1], initializer=v1.constant_initializer(0.1))
    return tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))


def _on_the_ipu(make):
    with tf.Graph().as_default(), v1.Session() as sess:
        dataset = tf.data.Dataset.from_tensor_slices((X, Y)).batch(BATCH, drop_remainder=True)
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        def body(x, y):
            loss = _loss(x, y)
            return make().minimize(loss), outfeed.enqueue(loss)

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            run = ipu.ipu_compiler.compile(lambda: ipu.loops.repeat(STEPS, body,
                                                                    infeed_queue=infeed))
        dequeue = outfeed.dequeue()
        sess.run([v1.global_variables_initializer(), infeed.initializer])
        sess.run(run)
        return sess.run(dequeue), sess.run(v1.trainable_variables())


def _on_the_cpu(make):
    with tf.Graph().as_default(), v1.Session() as sess:
        x, y = v1.placeholder(tf.float32, [BATCH, 3]), v1.placeholder(tf.float32, [BATCH, 1])
        loss = _loss(x, y)
        train = make().minimize(loss)
        sess.run(v1.global_variables_initializer())
        losses = [sess.run([loss, train], {x: X[i * BATCH:(i + 1) * BATCH],
                                           y: Y[i * BATCH:(i + 1) * BATCH]})[0]
                  for i in range(STEPS)]
        return np.array(losses), sess.run(v1.trainable_variables())


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_tf1_optimizer_steps_match_the_cpu(name):
    losses, weights = _on_the_ipu(OPTIMIZERS[name])
    expected_losses, expected_weights = _on_the_cpu(OPTIMIZERS[name])
    T.FLOAT32.assert_close(losses, expected_losses)
    for got, expected in zip(weights, expected_weights):
        T.FLOAT32.assert_close(got, expected)
