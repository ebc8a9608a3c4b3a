"""TensorFlow 1 corners (v2 behaviour off), each with its oracle run by TensorFlow on the
CPU without IPU code: a `tf.data` dataset made inside `ipu_scope`, and replication with
`CrossReplicaOptimizer` over variables made inside the compiled function. Run by
`v1_driver.py`."""
import numpy as np
import tensorflow.compat.v1 as tf

import ipu_keras as ipu

_rng = np.random.RandomState(0)
DATA = _rng.rand(8, 2).astype(np.float32)
REPLICAS, ITERATIONS, RUNS, BATCH, LR = 2, 2, 2, 2, 0.1
X = _rng.rand(REPLICAS * ITERATIONS * RUNS * BATCH, 3).astype(np.float32)
Y = _rng.rand(REPLICAS * ITERATIONS * RUNS * BATCH, 1).astype(np.float32)
XS = _rng.rand(3, 2, 4).astype(np.float32)                 # [time, batch, input]
C0, H0 = _rng.rand(2, 2, 5).astype(np.float32)
SCENARIOS = ("dataset_in_scope", "dataset_cpu", "replicated", "replicated_cpu",
             "v1_lstm", "v1_lstm_cpu")


def _dataset():
    return tf.data.Dataset.from_tensor_slices(DATA).map(lambda x: x + 1.0).batch(
        2, drop_remainder=True).repeat()


def dataset_in_scope():
    """Datasets built inside ipu_scope: one behind an infeed, one read by a one-shot
    iterator whose `get_next()` the compiled function captures (it runs on the host)."""
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_dataset())
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        looped = ipu.ipu_compiler.compile(lambda: ipu.loops.repeat(
            2, lambda x: outfeed.enqueue(x * 2.0), [], infeed), [])
        element = tf.data.make_one_shot_iterator(_dataset()).get_next()
        captured = ipu.ipu_compiler.compile(lambda: element * 2.0, [])
    dequeue = outfeed.dequeue()
    with tf.Session() as sess:
        sess.run(infeed.initializer)
        sess.run(looped)
        return {"outfeed": sess.run(dequeue),
                "captured": [sess.run(captured)[0] for _ in range(3)]}


def dataset_cpu():
    element = tf.data.make_one_shot_iterator(_dataset()).get_next() * 2.0
    with tf.Session() as sess:
        return {"batches": [sess.run(element) for _ in range(3)]}


def _model(x, y):
    w = tf.get_variable("w", [x.shape[1], 1], initializer=tf.constant_initializer(0.5))
    b = tf.get_variable("b", [1], initializer=tf.constant_initializer(0.1))
    return tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))


def replicated():
    """Graphcore's TF1 replication example, small: variables made in the loop body,
    `CrossReplicaOptimizer(GradientDescentOptimizer).minimize`, ops-only body."""
    dataset = tf.data.Dataset.from_tensor_slices((X, Y)).batch(BATCH, drop_remainder=True)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.repeat())
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def step(x, y):
        loss = _model(x, y)
        opt = ipu.optimizers.CrossReplicaOptimizer(tf.train.GradientDescentOptimizer(LR))
        return outfeed.enqueue(loss), opt.minimize(loss)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        run = ipu.ipu_compiler.compile(
            lambda: ipu.loops.repeat(ITERATIONS, step, infeed_queue=infeed))
    dequeue = outfeed.dequeue()
    init = tf.group([tf.global_variables_initializer(), infeed.initializer])
    ipu.utils.move_variable_initialization_to_cpu()
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = REPLICAS
    cfg.configure_ipu_system()
    with tf.Session() as sess:
        sess.run(init)
        losses = []
        for _ in range(RUNS):
            sess.run(run)
            losses.append(sess.run(dequeue))
        return {"losses": losses,
                "weights": {v.op.name: sess.run(v) for v in tf.trainable_variables()}}


def replicated_cpu():
    """Each iteration: replica r takes the next element after replica r - 1; the mean of
    their gradients is applied."""
    x = tf.placeholder(tf.float32, [BATCH, 3])
    y = tf.placeholder(tf.float32, [BATCH, 1])
    loss = _model(x, y)
    opt = tf.train.GradientDescentOptimizer(LR)
    grads, variables = zip(*opt.compute_gradients(loss))
    means = [tf.placeholder(tf.float32, v.shape) for v in variables]
    apply = opt.apply_gradients(zip(means, variables))
    losses = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for i in range(RUNS * ITERATIONS):
            per_replica = []
            for r in range(REPLICAS):
                rows = slice((i * REPLICAS + r) * BATCH, (i * REPLICAS + r + 1) * BATCH)
                per_replica.append(sess.run([loss, grads], {x: X[rows], y: Y[rows]}))
            losses.append([value for value, _ in per_replica])
            mean = [np.mean(g, axis=0) for g in zip(*[g for _, g in per_replica])]
            sess.run(apply, dict(zip(means, mean)))
        return {"losses": np.reshape(losses, (RUNS, ITERATIONS, REPLICAS)),
                "weights": {v.op.name: sess.run(v) for v in tf.trainable_variables()}}


def _lstm_step(outputs, variables):
    loss = tf.reduce_sum(outputs[-1] * np.arange(5, dtype=np.float32))
    return tf.train.GradientDescentOptimizer(LR).minimize(loss, var_list=variables)


def v1_lstm():
    """`ipu_tensorflow_addons.v1.layers.PopnnLSTM` at its new address, one SGD step."""
    from ipu_keras_addons.v1 import layers  # noqa: PLC0415 - the path under test

    made = []

    def model(x, c, h):
        lstm = layers.PopnnLSTM(5, seed=1)
        outputs, state = lstm(x, initial_state=layers.LSTMStateTuple(c, h))
        made.append(lstm)
        return outputs, state.c, state.h, _lstm_step(outputs, lstm.trainable_variables)

    with tf.device("cpu"):
        feeds = [tf.placeholder(tf.float32, a.shape) for a in (XS, C0, H0)]
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        run = ipu.ipu_compiler.compile(model, feeds)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        outputs, c, h = sess.run(run, dict(zip(feeds, (XS, C0, H0))))
        kernel = sess.run(made[0].kernel)
    return {"outputs": outputs, "c": c, "h": h, "kernel": kernel,
            "names": sorted(v.op.name for v in tf.trainable_variables())}


def v1_lstm_cpu():
    """Keras' own LSTM on the CPU from the same initial weights (the original's seeded
    Glorot initialiser), batch-major, biases zero."""
    import keras  # noqa: PLC0415 - only this oracle needs it

    init = tf.glorot_uniform_initializer(1)
    with tf.Session() as sess:
        kernel, recurrent = sess.run([init([4, 20]), init([5, 20])])
    lstm = keras.layers.LSTM(5, return_sequences=True, return_state=True,
                             unit_forget_bias=False,
                             kernel_initializer=keras.initializers.Constant(kernel),
                             recurrent_initializer=keras.initializers.Constant(recurrent))
    x = tf.constant(np.transpose(XS, [1, 0, 2]))
    outputs, h, c = lstm(x, initial_state=[tf.constant(H0), tf.constant(C0)])
    outputs = tf.transpose(outputs, [1, 0, 2])
    step = _lstm_step(outputs, None)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        outputs, c, h, _ = sess.run([outputs, c, h, step])
        return {"outputs": outputs, "c": c, "h": h, "kernel": sess.run(lstm.cell.kernel.value)}
