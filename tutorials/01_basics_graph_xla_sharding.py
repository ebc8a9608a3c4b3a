# %% [markdown]
# # 1. A first graph on the simulated IPU: XLA compilation and sharding
#
# Graphcore's first TensorFlow tutorial builds a tiny graph three ways: placed on the IPU,
# compiled as one XLA cluster with `ipu_compiler.compile`, and sharded over four IPUs.
# `ipu_keras` keeps the IPU API, so the code below is that tutorial's with the imports
# changed (`import ipu_keras as ipu` where it had `from tensorflow.python import ipu`).
# The IPU is simulated: every result comes out of a numpy tile simulator, and each run
# also says what it would cost on the hardware.
#
# We first use TensorFlow 2 (eager code and `tf.function`), then the same graph as the
# TensorFlow 1 session code of the original tutorial.

# %%
import numpy as np
import tensorflow as tf

import ipu_keras as ipu

# %% [markdown]
# ## Configure the IPU system
#
# An `IPUConfig` describes the device. `auto_select_ipus = 1` attaches one IPU (a Mk2
# GC200 by default: 1,472 tiles with 624 KiB each).

# %%
cfg = ipu.config.IPUConfig()
cfg.auto_select_ipus = 1
cfg.configure_ipu_system()

# %% [markdown]
# ## The basic graph, compiled for the IPU
#
# `o1 = a + b`, `o2 = a + c`, `out = o1 + o2`. `ipu_compiler.compile` traces the function,
# compiles it into one IPU program and runs it; it returns a list of results.

# %%
a = np.array([1.0, 1.0], np.float32)
b = np.array([0.0, 1.0], np.float32)
c = np.array([1.0, 5.0], np.float32)


def basic_graph(pa, pb, pc):
    o1 = pa + pb
    o2 = pa + pc
    return o1 + o2


result = ipu.ipu_compiler.compile(basic_graph, [a, b, c])
print(result)
assert np.array_equal(result[0].numpy(), [3.0, 8.0])

# %% [markdown]
# The same function through `IPUStrategy`, the TensorFlow 2 way: `strategy.run` of a
# `tf.function` with `jit_compile=True` compiles the whole function for the IPU.

# %%
strategy = ipu.ipu_strategy.IPUStrategy()
with strategy.scope():
    out = strategy.run(tf.function(basic_graph, jit_compile=True), args=(a, b, c))
print(out)
assert np.array_equal(out.numpy(), [3.0, 8.0])

# %% [markdown]
# Every execution leaves a profile: the simulated device time and where it went.

# %%
report = ipu.profiling.last_report()
print(f"{report.total_cycles} cycles = {report.seconds * 1e6:.2f} us on {report.target['name']}")
print(report.cycles)

# %% [markdown]
# ## Sharding over four IPUs
#
# A model too large for one IPU is split over several. `ipu.scopes.ipu_shard(i)` places
# the ops created inside it on IPU `i`; a value used on another IPU is copied over the
# IPU-Links. We attach four IPUs and put each addition on its own.

# %%
cfg = ipu.config.IPUConfig()
cfg.auto_select_ipus = 4
cfg.configure_ipu_system()


def sharded_graph(pa, pb, pc):
    with ipu.scopes.ipu_shard(0):
        o1 = pa + pb
    with ipu.scopes.ipu_shard(1):
        o2 = pa + pc
    with ipu.scopes.ipu_shard(2):
        o3 = pb + pc
    with ipu.scopes.ipu_shard(3):
        return o1 + o2 + o3


result = ipu.ipu_compiler.compile(sharded_graph, [a, b, c])
print(result)
assert np.array_equal(result[0].numpy(), [4.0, 14.0])

# %% [markdown]
# The profile shows the four IPUs. Sharded execution is serial: one IPU works while the
# others wait, so sharding buys memory, not speed (pipelining, in chapter 3, buys both).

# %%
report = ipu.profiling.last_report()
print(report.target)
assert report.target["num_ipus"] == 4

# %% [markdown]
# ## The same graph in TensorFlow 1
#
# The original tutorial is TensorFlow 1 code: placeholders on the CPU, the compiled
# cluster placed with `ipu_scope`, and `Session.run` with a `feed_dict`. It runs as it
# is in a graph (`tf.Graph().as_default()`, or after
# `tf.compat.v1.disable_v2_behavior()` in a script).

# %%
graph = tf.Graph()
with graph.as_default():
    with tf.device("cpu"):
        pa = tf.compat.v1.placeholder(np.float32, [2], name="a")
        pb = tf.compat.v1.placeholder(np.float32, [2], name="b")
        pc = tf.compat.v1.placeholder(np.float32, [2], name="c")
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        sharded = ipu.ipu_compiler.compile(sharded_graph, [pa, pb, pc])
    with tf.compat.v1.Session(graph=graph) as sess:
        result = sess.run(sharded, feed_dict={pa: [1.0, 1.0], pb: [0.0, 1.0], pc: [1.0, 5.0]})
print(result)
assert np.array_equal(result[0], [4.0, 14.0])

# %% [markdown]
# ## What we saw
#
# - `ipu_compiler.compile` and `IPUStrategy.run` compile a function into one IPU program.
# - `ipu_shard` spreads a graph over IPUs; values crossing IPUs become explicit copies.
# - TensorFlow 1 session code runs with only its imports changed.
#
# Next: feeding data to the IPU efficiently with infeeds and outfeeds.
