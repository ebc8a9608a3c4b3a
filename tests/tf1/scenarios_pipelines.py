"""TensorFlow 1 pipelines (`pipelining_ops.pipeline` compiled with `ipu_compiler.compile`
in `ipu_scope`, run by a `Session`), each with its oracle: the same stage functions run
by TensorFlow on the CPU without IPU code. Run by `v1_driver.py` (v2 behaviour off)."""
import numpy as np
import tensorflow.compat.v1 as tf

import ipu_keras as ipu

GA, REPEAT, BATCH, STEPS, LR = 4, 2, 4, 2, 0.1
_rng = np.random.RandomState(0)
X = _rng.rand(GA * REPEAT * STEPS * BATCH, 4, 4).astype(np.float32)
Y = (np.arange(len(X)) % 3).astype(np.int32)
XI = _rng.rand(16, 4).astype(np.float32)
SCENARIOS = ("training", "training_cpu", "masked_outputs", "inference", "inference_cpu")


def _dense(name, x, units, seed):
    w = tf.get_variable(name + "_w", [x.shape[-1], units],     # a v1 Dimension
                        initializer=tf.glorot_uniform_initializer(seed=seed))
    b = tf.get_variable(name + "_b", [units], initializer=tf.constant_initializer(0.1))
    return tf.matmul(x, w) + b


def stage1(lr, images, labels):
    flat = tf.reshape(images, [images.shape[0], -1])           # as Graphcore's examples do
    return lr, tf.nn.relu(_dense("d1", flat, 8, 1)), labels


def stage2(lr, hidden, labels):
    logits = _dense("d2", hidden, 3, 2)
    return lr, tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits))


def optimizer_function(lr, loss):
    return ipu.pipelining_ops.OptimizerFunctionOutput(tf.train.GradientDescentOptimizer(lr),
                                                      loss)


def _configure(num_ipus=2):
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = num_ipus
    cfg.configure_ipu_system()


def _compile(model, inputs, infeed):
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        compiled = ipu.ipu_compiler.compile(model, inputs=inputs)
    ipu.utils.move_variable_initialization_to_cpu()
    _configure()
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    sess.run(infeed.initializer)
    return compiled, sess


def _trained(sess):
    return {v.op.name: sess.run(v) for v in tf.trainable_variables()}


def _train_feeds():
    dataset = tf.data.Dataset.from_tensor_slices((X, Y)).batch(BATCH, drop_remainder=True)
    return (ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.repeat()),
            ipu.ipu_outfeed_queue.IPUOutfeedQueue())


def training():
    """Graphcore's TF1 pipelining example, small: learning rate threaded through the
    stages, GradientDescentOptimizer, outfeed_loss, two runs of two pipeline runs."""
    infeed, outfeed = _train_feeds()

    def model(lr):
        with tf.variable_scope("FCModel", use_resource=True):
            return ipu.pipelining_ops.pipeline(
                computational_stages=[stage1, stage2], gradient_accumulation_count=GA,
                repeat_count=REPEAT, inputs=[lr], infeed_queue=infeed,
                outfeed_queue=outfeed, optimizer_function=optimizer_function,
                outfeed_loss=True, name="Pipeline")

    with tf.device("cpu"):
        lr = tf.placeholder(np.float32, [])
    compiled, sess = _compile(model, [lr], infeed)
    dequeue = outfeed.dequeue()
    losses = []
    for _ in range(STEPS):
        sess.run(compiled, {lr: LR})
        losses.append(sess.run(dequeue))
    report = ipu.profiling.last_report()      # the execution ran on the simulated IPUs
    return {"losses": losses, "weights": _trained(sess),
            "returned": type(compiled).__name__, "num_ipus": report.target["num_ipus"],
            "cycles": report.total_cycles}


def training_cpu():
    """The same model on the CPU: SUM-accumulated gradients, applied every GA batches."""
    x = tf.placeholder(tf.float32, [BATCH, 4, 4])
    y = tf.placeholder(tf.int32, [BATCH])
    lr = tf.placeholder(tf.float32, [])
    with tf.variable_scope("FCModel", use_resource=True):
        _, loss = stage2(*stage1(lr, x, y))
    opt = tf.train.GradientDescentOptimizer(lr)
    grads, variables = zip(*opt.compute_gradients(loss))
    sums = [tf.placeholder(tf.float32, v.shape) for v in variables]
    apply = opt.apply_gradients(zip(sums, variables))
    losses = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for k in range(STEPS * REPEAT):
            acc = [0.0] * len(grads)
            for m in range(GA):
                rows = slice((k * GA + m) * BATCH, (k * GA + m + 1) * BATCH)
                value, g = sess.run([loss, grads], {x: X[rows], y: Y[rows]})
                acc = [a + gi for a, gi in zip(acc, g)]
                losses.append(value)
            sess.run(apply, {lr: LR, **dict(zip(sums, acc))})
        return {"losses": np.reshape(losses, (STEPS, REPEAT * GA)), "weights": _trained(sess)}


def masked_outputs():
    """Training without outfeed_loss: the unmasked last-stage outputs leave as a list."""
    infeed, outfeed = _train_feeds()

    def model(lr):
        with tf.variable_scope("FCModel", use_resource=True):
            return ipu.pipelining_ops.pipeline(
                [stage1, stage2], gradient_accumulation_count=2, inputs=[lr],
                infeed_queue=infeed, outfeed_queue=outfeed,
                optimizer_function=optimizer_function, outfeed_mask=[True, False],
                pipeline_schedule=ipu.pipelining_ops.PipelineSchedule.Sequential)

    with tf.device("cpu"):
        lr = tf.placeholder(np.float32, [])
    compiled, sess = _compile(model, [lr], infeed)
    dequeue = outfeed.dequeue()
    sess.run(compiled, {lr: LR})
    got = sess.run(dequeue)
    return {"type": type(got).__name__, "losses": got}


def istage1(x):
    return tf.nn.relu(_dense("i1", x, 3, 3))


def istage2(h):
    logits = _dense("i2", h, 2, 4)
    return [logits, tf.nn.softmax(logits)]         # a list: enqueued as a list


def inference():
    """An inference pipeline whose last stage returns a list, and one returning a tensor."""
    dataset = tf.data.Dataset.from_tensor_slices(XI).batch(2, drop_remainder=True).repeat()
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    lists, single = ipu.ipu_outfeed_queue.IPUOutfeedQueue(), ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def model():
        with tf.variable_scope("Inference", use_resource=True):
            first = ipu.pipelining_ops.pipeline(
                [istage1, istage2], gradient_accumulation_count=4, repeat_count=2,
                infeed_queue=infeed, outfeed_queue=lists)
        with tf.variable_scope("Inference", use_resource=True, reuse=True):
            second = ipu.pipelining_ops.pipeline(
                [istage1, lambda h: istage2(h)[0]], gradient_accumulation_count=4,
                infeed_queue=infeed, outfeed_queue=single)
        return first, second

    compiled, sess = _compile(model, [], infeed)
    dequeue_lists, dequeue_single = lists.dequeue(), single.dequeue()
    sess.run(compiled)
    got_lists, got_single = sess.run([dequeue_lists, dequeue_single])
    return {"type": type(got_lists).__name__, "logits": got_lists[0],
            "softmax": got_lists[1], "single": got_single}


def inference_cpu():
    x = tf.placeholder(tf.float32, [len(XI), 4])
    with tf.variable_scope("Inference", use_resource=True):
        logits, softmax = istage2(istage1(x))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        logits, softmax = sess.run([logits, softmax], {x: XI})
    return {"logits": logits.reshape(8, 2, 2), "softmax": softmax.reshape(8, 2, 2)}
