"""`loops.repeat` bodies that return operations, in TensorFlow 1 graphs (v2 behaviour
off), each with its oracle: the same step run by TensorFlow on the CPU, one `Session.run`
per iteration. Run by `v1_driver.py`."""
import numpy as np
import tensorflow.compat.v1 as tf

import ipu_keras as ipu

ITERATIONS, RUNS, BATCH, LR = 4, 2, 2, 0.1
_rng = np.random.RandomState(0)
X = _rng.rand(ITERATIONS * RUNS * BATCH, 3).astype(np.float32)
Y = _rng.rand(ITERATIONS * RUNS * BATCH, 1).astype(np.float32)
SCENARIOS = ("ops_beside_values", "ops_only", "cpu")


def _step(lr, x, y):
    """One SGD step of a linear model: (loss, train_op)."""
    with tf.variable_scope("linear", use_resource=True, reuse=tf.AUTO_REUSE):
        w = tf.get_variable("w", [x.shape[1], 1], initializer=tf.constant_initializer(0.5))
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
    return loss, tf.train.GradientDescentOptimizer(lr).minimize(loss)


def _feeds():
    dataset = tf.data.Dataset.from_tensor_slices((X, Y)).batch(BATCH, drop_remainder=True)
    return (ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.repeat()),
            ipu.ipu_outfeed_queue.IPUOutfeedQueue())


def _run(program, inputs, infeed, outfeed, feed=None):
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        compiled = ipu.ipu_compiler.compile(program, inputs)
    dequeue = outfeed.dequeue()
    ipu.utils.move_variable_initialization_to_cpu()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(infeed.initializer)
        results, losses = [], []
        for _ in range(RUNS):
            results.append(sess.run(compiled, feed))
            losses.append(sess.run(dequeue))
        weights = sess.run(tf.trainable_variables()[0])
    return compiled, results, losses, weights


def ops_beside_values():
    """`return lr, train_op, outfeed.enqueue(loss)`: lr carried, the ops run each time."""
    infeed, outfeed = _feeds()

    def body(lr, x, y):
        loss, train = _step(lr, x, y)
        return lr, train, outfeed.enqueue(loss)

    with tf.device("cpu"):
        lr = tf.placeholder(np.float32, [])
    compiled, results, losses, weights = _run(
        lambda rate: ipu.loops.repeat(ITERATIONS, body, [rate], infeed), [lr], infeed,
        outfeed, {lr: LR})
    return {"returned": [tf.is_tensor(t) for t in compiled],
            "lr": [r[0] for r in results], "losses": losses, "weights": weights}


def ops_only():
    """A body returning only operations: the loop (and the compiled function) is an op."""
    infeed, outfeed = _feeds()
    kinds = []

    def body(x, y):
        loss, train = _step(LR, x, y)
        return train, outfeed.enqueue(loss)

    def program():
        loop = ipu.loops.repeat(ITERATIONS, body, infeed_queue=infeed)
        kinds.append(type(loop).__name__)
        return loop

    compiled, results, losses, weights = _run(program, [], infeed, outfeed)
    return {"loop": kinds[0], "returned": type(compiled).__name__,
            "results": results, "losses": losses, "weights": weights}


def cpu():
    x = tf.placeholder(tf.float32, [BATCH, 3])
    y = tf.placeholder(tf.float32, [BATCH, 1])
    loss, train = _step(LR, x, y)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        losses = [sess.run([loss, train], {x: X[i * BATCH:(i + 1) * BATCH],
                                           y: Y[i * BATCH:(i + 1) * BATCH]})[0]
                  for i in range(ITERATIONS * RUNS)]
        return {"losses": np.reshape(losses, (RUNS, ITERATIONS)),
                "weights": sess.run(tf.trainable_variables()[0])}
