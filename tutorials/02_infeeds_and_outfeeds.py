# %% [markdown]
# # 2. Infeeds and outfeeds: keeping the IPU busy
#
# Compiling a training step into one IPU program removes the per-op overhead, but if
# Python calls that program once per batch, control still returns to the host after every
# step. Graphcore's tutorial "Using infeed and outfeed queues in TensorFlow 2" puts the
# step inside a loop on the device: an *infeed* streams batches in from a `tf.data`
# dataset, an *outfeed* streams results out, and one execution runs many steps.
#
# We train the tutorial's MNIST network both ways and compare the host time, the
# simulated device time and the execution traces.

# %%
import time

import keras
import numpy as np
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras import ipu_outfeed_queue, ipu_strategy

step_count = 300
steps_per_execution = 10

# %% [markdown]
# ## The dataset
#
# The tutorial loads MNIST with `keras.datasets.mnist.load_data()`. Where it cannot be
# downloaded (this notebook also runs offline, in the project's CI), a synthetic stand-in
# of the same shapes is made: the digits 0-9 drawn as seven-segment glyphs of random
# size, position and stroke width, which the network can learn.

# %%
SEGMENTS = {0: "abcdef", 1: "bc", 2: "abdeg", 3: "abcdg", 4: "bcfg", 5: "acdfg",
            6: "acdefg", 7: "abc", 8: "abcdefg", 9: "abcdfg"}


def segment_digits(n, seed=0):
    """`n` 28x28 images in [0, 255] of the digits 0-9 drawn as seven-segment glyphs of
    random size, place and stroke width over faint noise, and their labels."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n)
    images = rng.random((n, 28, 28)) * 0.1
    for image, label in zip(images, labels):
        h, w, t = rng.integers(17, 21), rng.integers(10, 13), rng.integers(2, 4)
        top, left = (28 - h) // 2 + rng.integers(-2, 3), (28 - w) // 2 + rng.integers(-2, 3)
        mid, bottom, right = top + (h - t) // 2, top + h - t, left + w - t
        boxes = {"a": (top, left, t, w), "g": (mid, left, t, w), "d": (bottom, left, t, w),
                 "f": (top, left, mid - top + t, t), "b": (top, right, mid - top + t, t),
                 "e": (mid, left, bottom - mid + t, t), "c": (mid, right, bottom - mid + t, t)}
        for segment in SEGMENTS[int(label)]:
            y, x, dy, dx = boxes[segment]
            image[y:y + dy, x:x + dx] = 0.7 + 0.3 * rng.random()
    return np.clip(images, 0, 1) * 255, labels


def load_mnist(samples=8192):
    try:
        (x_train, y_train), _ = keras.datasets.mnist.load_data()
        return x_train[:samples] / 255.0, y_train[:samples], "MNIST"
    except Exception:
        x_train, y_train = segment_digits(samples)
        return x_train / 255.0, y_train, "seven-segment digits, a synthetic stand-in for MNIST"


x_train, y_train, source = load_mnist()
print(f"{len(x_train)} training images ({source})")


def create_dataset():
    train_ds = tf.data.Dataset.from_tensor_slices((x_train, y_train))
    train_ds = train_ds.cache()
    train_ds = train_ds.shuffle(len(x_train), seed=1).batch(32, drop_remainder=True)
    train_ds = train_ds.map(lambda d, l: (tf.cast(d, tf.float32), tf.cast(l, tf.int32)))
    train_ds = train_ds.prefetch(tf.data.experimental.AUTOTUNE)
    return train_ds.repeat()


def create_model():
    return keras.Sequential([
        keras.layers.Flatten(),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ])

# %% [markdown]
# ## Configure the IPU and write a report for each program
#
# `ipu.profiling.enable_reports(directory)` is this project's switch for what Graphcore's
# `POPLAR_ENGINE_OPTIONS='{"autoReport.all": "true", "autoReport.directory": ...}'` does
# (that environment variable works too): every program compiled afterwards gets a
# `report.json`, PNG plots and an HTML page.

# %%
cfg = ipu.config.IPUConfig()
cfg.auto_select_ipus = 1
cfg.configure_ipu_system()
strategy = ipu_strategy.IPUStrategy()

# %% [markdown]
# ## Without feeds: one execution per step
#
# The step takes a batch as arguments: every call copies the batch to the device, runs
# one step and returns the loss to the host.

# %%
ipu.profiling.enable_reports("without_feeds")


@tf.function(jit_compile=True)
def training_step(features, labels, model, optimizer):
    with tf.GradientTape() as tape:
        predictions = model(features, training=True)
        loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(labels, predictions))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


with strategy.scope():
    keras.utils.set_random_seed(1)
    opt = keras.optimizers.SGD(0.01)
    model = create_model()
    batches = iter(create_dataset())
    features, labels = next(batches)
    strategy.run(training_step, args=[features, labels, model, opt])   # compiles
    start_time = time.time()
    losses_without = []
    for _ in range(step_count):
        features, labels = next(batches)
        losses_without.append(float(strategy.run(training_step,
                                                 args=[features, labels, model, opt])))
    seconds_without = time.time() - start_time
ipu.profiling.write_report()
ipu.profiling.disable_reports()
report_without = ipu.profiling.last_report()
print(f"Time taken without infeed/outfeed: {seconds_without:.2f} seconds")

# %% [markdown]
# ## With feeds: `steps_per_execution` steps per execution
#
# The loop runs on the device. `next(iterator)` inside the loop reads the infeed
# (`iter` of a dataset inside an `IPUStrategy` makes one), and `outfeed_queue.enqueue`
# sends each step's loss out; the host dequeues them all at the end.

# %%
ipu.profiling.enable_reports("with_feeds")


@tf.function(jit_compile=True)
def training_loop(iterator, outfeed_queue, model, optimizer, num_iterations):
    for _ in tf.range(num_iterations):
        features, labels = next(iterator)
        with tf.GradientTape() as tape:
            predictions = model(features, training=True)
            prediction_loss = keras.losses.sparse_categorical_crossentropy(labels, predictions)
            loss = tf.reduce_mean(prediction_loss)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        outfeed_queue.enqueue(loss)


with strategy.scope():
    keras.utils.set_random_seed(1)
    opt = keras.optimizers.SGD(0.01)
    model = create_model()
    iterator = iter(create_dataset())
    outfeed_queue = ipu_outfeed_queue.IPUOutfeedQueue()
    strategy.run(training_loop, args=[iterator, outfeed_queue, model, opt,
                                      steps_per_execution])   # compiles
    outfeed_queue.dequeue()
    start_time = time.time()
    for _ in range(0, step_count, steps_per_execution):
        strategy.run(training_loop,
                     args=[iterator, outfeed_queue, model, opt, steps_per_execution])
    losses_with = outfeed_queue.dequeue().numpy()
    seconds_with = time.time() - start_time
ipu.profiling.write_report()
ipu.profiling.disable_reports()
report_with = ipu.profiling.last_report()
print(f"Time taken using infeed/outfeed queues: {seconds_with:.2f} seconds")

# %% [markdown]
# Both trained: the loss falls from its first steps to its last.

# %%
for name, losses in [("without feeds", losses_without), ("with feeds", losses_with)]:
    first, last = np.mean(losses[:20]), np.mean(losses[-20:])
    print(f"{name}: mean loss of the first 20 steps {first:.3f}, of the last 20 {last:.3f}")
    assert last < first
assert len(losses_with) == step_count

# %% [markdown]
# ## What the device does
#
# The host times above depend on this machine. The simulated device time does not: it is
# what the IPU would spend computing and streaming, from the cost model. With feeds it
# includes the stream copy of every batch out of the infeed and of every loss into the
# outfeed; without feeds, the batch arrives as the program's argument and the loss leaves
# as its result, host transfers too, each with a sync with the host. The larger saving of
# feeds is in the host's part: one return to Python every ten steps instead of every
# step, as the execution counts and the host times show.

# %%
per_step_without = report_without.seconds / report_without.steps
per_step_with = report_with.seconds / report_with.steps
print(f"device time per step without feeds: {per_step_without * 1e6:.2f} us "
      f"({report_without.steps} step per execution)")
print(f"device time per step with feeds:    {per_step_with * 1e6:.2f} us "
      f"({report_with.steps} steps per execution)")
print(f"host time per step: {seconds_without / step_count * 1e3:.2f} ms without feeds, "
      f"{seconds_with / step_count * 1e3:.2f} ms with")
assert report_with.steps == steps_per_execution and report_without.steps == 1

# %% [markdown]
# ## The execution traces
#
# Each report folder holds `trace.png`, the execution trace of the last run (in the
# manner of the PopVision Graph Analyser's): one execution of one step without feeds,
# one execution of ten steps with them. `ipu-keras report with_feeds` prints the same
# report as text.

# %%
import glob

from IPython.display import Image, display

for folder in ("without_feeds", "with_feeds"):
    traces = sorted(glob.glob(f"{folder}/*/trace.png"))
    assert traces, folder
    print(folder)
    display(Image(filename=traces[-1]))

# %% [markdown]
# ## What we saw
#
# - An infeed and an outfeed let one execution run many steps: the host is involved once
#   per `steps_per_execution` steps.
# - Keras' `fit` on `ipu_keras` models (next chapter) does exactly this for you.
