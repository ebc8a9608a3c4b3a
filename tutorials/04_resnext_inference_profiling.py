# %% [markdown]
# # 4. ResNeXt inference and profiling: `availableMemoryProportion`
#
# Graphcore's ResNeXt inference example shows the pieces of an IPU inference program in
# TensorFlow 1: a dataset fed through an `IPUInfeedQueue`, the model run `BATCHES_PER_STEP`
# times per execution in `ipu.loops.repeat`, results through an `IPUOutfeedQueue`, and a
# convolution option, `availableMemoryProportion`, that bounds the temporary memory the
# convolution planner may use on each tile. We run it at a small cardinality and depth on
# 224x224x4 float16 images, then sweep that option and look at the report.
#
# The example is TensorFlow 1 code, so this notebook turns TensorFlow 2 behaviour off
# first (as a TF1 script running on TensorFlow 2 does).

# %%
import os
import tempfile
import time

import matplotlib.pyplot as plt
import numpy as np
import tensorflow.compat.v1 as tf

import ipu_keras as ipu

tf.disable_v2_behavior()

# %% [markdown]
# ## The model
#
# The example's layer wrappers, its group convolution (a convolution whose kernel has
# `filters_in // groups` input channels: the channels split into `cardinality` groups) and
# its bottleneck blocks. Variables are resource variables (`use_resource=True`), which the
# IPU requires.

# %%
def create_input_data(batch_size=1, height=224, width=224, channels=4):
    input_data = np.random.random((batch_size, height, width, channels))
    input_data = tf.cast(input_data, DTYPE)
    ds = tf.data.Dataset.range(1).map(lambda k: {"features": input_data}).repeat()
    return ds.prefetch(BATCHES_PER_STEP).cache()


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
        gamma = tf.get_variable("gamma", shape,
                                initializer=tf.random_uniform_initializer(0.5, 1.5))
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


def resnext_model():
    def body(features):
        with tf.variable_scope("VanillaResNeXt"):
            output = resnext_features(features)
            return outfeed_queue.enqueue(output)
    return ipu.loops.repeat(n=BATCHES_PER_STEP, body=body, infeed_queue=infeed_queue)


BATCHES_PER_STEP = 2
BATCH_SIZE = 1
CARDINALITY = 4
STEM_FILTERS = 16
STAGES = [(1, [32, 64]), (2, [64, 128])]
BLOCKS_PER_STAGE = 1
DTYPE = tf.float16

# %% [markdown]
# ## Build, compile and run
#
# `run_inference` builds the graph, configures the IPU with the given convolution
# options, runs one execution to compile and warm up, then `iterations` timed ones.
# It returns the outputs and the profile of the last execution.

# %%
def run_inference(available_memory_proportion, tiles_per_ipu=None, iterations=2,
                  report_dir=None):
    global infeed_queue, outfeed_queue
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(0)
        np.random.seed(0)
        dataset = create_input_data(batch_size=BATCH_SIZE)
        with tf.device("cpu"):
            infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
        outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            res = ipu.ipu_compiler.compile(resnext_model, inputs=[])
        cfg = ipu.config.IPUConfig()
        cfg.convolutions.poplar_options["availableMemoryProportion"] = \
            str(available_memory_proportion)
        if tiles_per_ipu:
            cfg.ipu_model.tiles_per_ipu = tiles_per_ipu
        cfg.auto_select_ipus = 1
        cfg.configure_ipu_system()
        ipu.utils.move_variable_initialization_to_cpu()
        outfeed = outfeed_queue.dequeue()
        if report_dir:
            ipu.profiling.enable_reports(report_dir)
        with tf.Session(graph=graph) as sess:
            sess.run(infeed_queue.initializer)
            sess.run(tf.global_variables_initializer())
            sess.run(res)
            logits = sess.run(outfeed)
            start = time.time()
            for _ in range(iterations):
                sess.run(res)
                logits = sess.run(outfeed)
            seconds = time.time() - start
        if report_dir:
            ipu.profiling.write_report()
            ipu.profiling.disable_reports()
    return logits, ipu.profiling.last_report(), seconds


report_dir = tempfile.mkdtemp(prefix="resnext_")
logits, report, seconds = run_inference(0.3, report_dir=report_dir)
images = 2 * BATCHES_PER_STEP * BATCH_SIZE
print(f"logits {logits.shape} {logits.dtype}")
print(f"host: {images / seconds:.1f} images/s on this machine")
print(f"simulated IPU: {report.seconds * 1e3:.3f} ms per execution of {BATCHES_PER_STEP} "
      f"images, {BATCHES_PER_STEP / report.seconds:.0f} images/s")
assert logits.shape == (BATCHES_PER_STEP, BATCH_SIZE, 1000) and np.isfinite(logits).all()

# %% [markdown]
# ## The report
#
# The report of the program says where the memory and the time go: the busiest tiles and
# what fills them (always-live code and variables, and the not-always-live temporaries
# whose peak the planner bounds), the largest tensors with the layers that made them, and
# the cycles per kind (compute, exchange between tiles, synchronisation, host I/O) and
# per op. `ipu-keras report DIR` prints the same text.

# %%
from ipu_keras._src.reports import summary

(path,) = summary.find_reports(report_dir)
print(summary.summarise(summary.load(path)))

# %% [markdown]
# ## Sweeping `availableMemoryProportion`
#
# On a full Mk2 IPU (1,472 tiles) this small model's convolution temporaries fit any
# budget, so the option changes nothing. On a small IPU Model (16 tiles, which
# `IPUConfig.ipu_model.tiles_per_ipu` selects) the budget binds: the planner then picks
# convolution plans that use less temporary memory per tile, which take more cycles.

# %%
proportions = [0.6, 0.2, 0.1, 0.08, 0.06, 0.04, 0.02]
memory, cycles = [], []
for proportion in proportions:
    _, swept, _ = run_inference(proportion, tiles_per_ipu=16, iterations=0)
    memory.append(swept.max_tile_memory)
    cycles.append(swept.total_cycles)
    print(f"availableMemoryProportion {proportion:<5}: busiest tile {swept.max_tile_memory:>8,} "
          f"bytes, {swept.total_cycles:>8,} cycles")

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.5))
left.plot(proportions, memory, "o-")
left.set_xlabel("availableMemoryProportion")
left.set_ylabel("bytes on the busiest tile")
right.plot(proportions, cycles, "o-", color="tab:orange")
right.set_xlabel("availableMemoryProportion")
right.set_ylabel("cycles per execution")
fig.suptitle("ResNeXt on a 16-tile IPU Model")
fig.tight_layout()
plt.show()

# As the proportion falls to 0.06, the cycles rise (never fall) and memory falls. Below
# that, some convolutions have no plan within the budget: the planner warns, as Poplar
# does, and, as poplin does, doubles the bound until a plan fits and takes the fastest
# plan within it. Those convolutions get plans of a larger budget, so memory rises again
# and the cycles fall: a budget too small is not the least memory.
fitting = proportions.index(0.06) + 1
assert all(a >= b for a, b in zip(memory[:fitting], memory[1:fitting]))
assert all(a <= b for a, b in zip(cycles[:fitting], cycles[1:fitting]))
assert memory[fitting - 1] < memory[0] and cycles[fitting - 1] > cycles[0]
assert min(memory[fitting:]) > memory[fitting - 1]
assert max(cycles[fitting:]) < cycles[fitting - 1]

# %% [markdown]
# ## What we saw
#
# - The TensorFlow 1 inference example runs as written: infeed, `loops.repeat`, outfeed,
#   `Session.run`.
# - `availableMemoryProportion` trades temporary memory for cycles when memory is tight;
#   the reports show both sides. Set too small, it gives back neither: the planner falls
#   back to plans of a larger budget.
