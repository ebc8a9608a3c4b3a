# The seed's ResNeXt inference listing (000) at a small cardinality and depth.
# The listing's lines run as written with the import lines changed; its "..." parts are
# filled in here (layer wrappers, model body, settings, summary). Three lines differ from
# the listing: `filters_in.value // groups` (TF >= 2 rejects the float dimension `/`
# gives; TF 1.15 accepted it), `ipu.loops.repeat` (TF 2's `tf` has no `tf.python`), and
# `outfed = sess.run(outfeed)` (the listing rebinds `outfeed` to the fetched array and
# then fetches it again, which fails everywhere; Graphcore's full example names it so).
import tensorflow.compat.v1 as tf
import os
import time

import numpy as np

# Import IPU API
import ipu_keras as ipu

# Create a dataset for in-feed interface into session call
def create_input_data(batch_size=1, height=224, width=224, channels=4):
    # Synthetic input data follows NHWC format
    input_data = np.random.random((batch_size, height, width, channels))
    input_data = tf.cast(input_data, DTYPE)

    ds = tf.data.Dataset \
        .range(1) \
        .map(lambda k: {"features": input_data}) \
        .repeat() \
        .prefetch(BATCHES_PER_STEP).cache()
    return ds

# Layer wrappers required by the model definition
def conv(x, ksize, stride, filters_out, name):
    with tf.variable_scope(name, use_resource=True):
        W = tf.get_variable("kernel", shape=[ksize, ksize, x.get_shape()[-1].value,
                                             filters_out], dtype=DTYPE,
                            initializer=tf.variance_scaling_initializer())
        return tf.nn.conv2d(x, filters=W, strides=[1, stride, stride, 1], padding='SAME')


def norm(x, name):
    # Batch normalisation in inference mode: moving statistics, no update.
    with tf.variable_scope(name, use_resource=True):
        shape = [x.get_shape()[-1].value]
        gamma = tf.get_variable("gamma", shape, initializer=tf.random_uniform_initializer(0.5, 1.5))
        beta = tf.get_variable("beta", shape, initializer=tf.random_uniform_initializer(-0.1, 0.1))
        mean = tf.get_variable("moving_mean", shape,
                               initializer=tf.random_uniform_initializer(-0.1, 0.1))
        var = tf.get_variable("moving_variance", shape,
                              initializer=tf.random_uniform_initializer(0.5, 1.5))
        y, _, _ = tf.nn.fused_batch_norm(x, gamma, beta, mean=mean, variance=var,
                                         epsilon=1e-5, is_training=False)
        return y


def max_pool(x):
    return tf.nn.max_pool(x, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding='SAME')


def fc(x, num_units_out):
    with tf.variable_scope("fc", use_resource=True):
        W = tf.get_variable("weights", shape=[x.get_shape()[-1].value, num_units_out],
                            dtype=DTYPE, initializer=tf.glorot_uniform_initializer())
        b = tf.get_variable("biases", shape=[num_units_out], dtype=DTYPE,
                            initializer=tf.zeros_initializer())
        return tf.nn.xw_plus_b(x, W, b)

# Group convolution definition
def group_conv(x, ksize, stride, filters_in, filters_out, index=0, groups=1,
               dtype=tf.float16, name='conv'):
    with tf.variable_scope(name, use_resource=True):
        # Define a weight variable
        W = tf.get_variable("conv2d/kernel" + str(index),
                            shape=[ksize, ksize,
                                   filters_in.value // groups,
                                   filters_out], dtype=dtype,
                                   trainable=True,
                                   initializer=tf.variance_scaling_initializer())
        # Implicit group convolution since channels of W are fraction of x
        return tf.nn.conv2d(x, filters=W, strides=[1, stride, stride, 1],
                             padding='SAME')

def group_conv_block(x, first_stride, filters, count, name='', cardinality=4):
    # Bottleneck blocks: 1x1 conv, 3x3 group conv, 1x1 conv, plus the shortcut
    for i in range(count):
        prefix = name + str(i)
        stride = first_stride if i == 0 else 1
        shortcut = x
        x = tf.nn.relu(norm(conv(x, 1, stride, filters[0], prefix + "_1"), prefix + "_bn1"))
        x = group_conv(x, 3, 1, x.get_shape()[-1], filters[0], index=1, groups=cardinality,
                       dtype=DTYPE, name=prefix + "_2")
        x = tf.nn.relu(norm(x, prefix + "_bn2"))
        x = norm(conv(x, 1, 1, filters[1], prefix + "_3"), prefix + "_bn3")
        if i == 0:
            shortcut = norm(conv(shortcut, 1, stride, filters[1], prefix + "_skip"),
                            prefix + "_bnskip")
        x = tf.nn.relu(shortcut + x)
    return x

# Define the ResNext model
def resnext_features(features):
    x = tf.nn.relu(norm(conv(features, 7, 2, STEM_FILTERS, "conv1"), "bn1"))
    x = max_pool(x)
    for stage, (stride, filters) in enumerate(STAGES):
        x = group_conv_block(x, stride, filters, count=BLOCKS_PER_STAGE,
                             name="res%d_" % (stage + 2), cardinality=CARDINALITY)
    x = tf.reduce_mean(x, axis=[1, 2])
    return fc(x, num_units_out=1000)

def resnext101_model():
    def body(features):
        with tf.variable_scope("VanillaResNeXt"):
            output = resnext_features(features)
            outfeed = outfeed_queue.enqueue(output)
            return outfeed
    return ipu.loops.repeat(n=BATCHES_PER_STEP, body=body,
                                     infeed_queue=infeed_queue)

if __name__ == '__main__':
    # no simulation
    IPU_MODEL = False

    # A small setting of the model: cardinality 4, two stages of one block each
    NUM_ITERATIONS = 2
    BATCHES_PER_STEP = 2
    BATCH_SIZE = 1
    CARDINALITY = 4
    STEM_FILTERS = 16
    STAGES = [(1, [32, 64]), (2, [64, 128])]
    BLOCKS_PER_STAGE = 1
    DTYPE = tf.float16

    # Create input data using randomized numpy arrays
    dataset = create_input_data(batch_size=BATCH_SIZE, height=224, width=224, channels=4)

    if IPU_MODEL:
        os.environ['TF_POPLAR_FLAGS'] = "--use_ipu_model"

    # Setup infeed queue
    with tf.device('cpu'):
        infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset,
                                             feed_name="inference_infeed")

    # Setup outfeed
    outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue(feed_name="outfeed")

    # Compiles graph and targets IPU(s)
    with ipu.scopes.ipu_scope('/device:IPU:0'):
        res = ipu.ipu_compiler.compile(resnext101_model, inputs=[])

    # Setup IPU configuration and build session
    cfg = ipu.config.IPUConfig()
    cfg.convolutions.poplar_options["availableMemoryProportion"] = "0.3"
    cfg.auto_select_ipus = 1
    cfg.configure_ipu_system()
    ipu.utils.move_variable_initialization_to_cpu()
    outfeed = outfeed_queue.dequeue()

    # Create a session initiation and run the model
    with tf.Session() as sess:
        fps = []
        latency = []
        sess.run(infeed_queue.initializer)
        sess.run(tf.global_variables_initializer())
        # Warm up
        print("Compiling and Warmup...")
        start = time.time()
        sess.run(res)
        outfed = sess.run(outfeed)
        for iter_count in range(NUM_ITERATIONS):
            print("Running iteration for benchmarking: ", iter_count)
            start = time.time()
            sess.run(res)
            sess.run(outfeed)
            fps.append(BATCHES_PER_STEP * BATCH_SIZE / (time.time() - start))
            latency.append(1000 * (time.time() - start) / BATCHES_PER_STEP)
        print("Throughput: %.1f imgs/s, latency: %.1f ms" % (np.mean(fps), np.mean(latency)))
