# %% [markdown]
# # 3. Keras on the IPU: porting a CNN, `steps_per_execution`, replication, pipelining
#
# This chapter follows Graphcore's Keras tutorial: an MNIST convolutional network trained
# on the CPU, then moved to the IPU by building it inside an `IPUStrategy` scope, made
# efficient with `steps_per_execution`, replicated over two IPUs, and finally split over
# two IPUs as a pipeline with gradient accumulation.

# %%
import keras
import numpy as np

import ipu_keras as ipu

batch_size = 64
num_classes = 10

# %% [markdown]
# ## Data
#
# The tutorial uses MNIST; offline (as in the project's CI), a synthetic stand-in of the
# same shapes takes its place: the digits 0-9 drawn as seven-segment glyphs of random
# size, position and stroke width, which the network can learn (a test checks that it
# reaches well above chance). Labels are one-hot, as in the tutorial. Shapes are static
# on the IPU, so the data is trimmed to a whole number of batches (the tutorial's
# `make_divisible`).

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


def load_data(train=2048, test=512):
    try:
        (x_train, y_train), (x_test, y_test) = keras.datasets.mnist.load_data()
        source = "MNIST"
    except Exception:
        (x_train, y_train), (x_test, y_test) = segment_digits(train), segment_digits(test, 1)
        source = "seven-segment digits, a synthetic stand-in for MNIST"
    x_train, x_test = x_train[:train, ..., None] / 255.0, x_test[:test, ..., None] / 255.0
    y_train = keras.utils.to_categorical(y_train[:train], num_classes)
    y_test = keras.utils.to_categorical(y_test[:test], num_classes)
    return (x_train.astype("float32"), y_train), (x_test.astype("float32"), y_test), source


learning_rate = 0.1


def sgd():
    return keras.optimizers.SGD(learning_rate)


def make_divisible(number, divisor):
    return number - number % divisor


(x_train, y_train), (x_test, y_test), source = load_data()
train_len = make_divisible(len(x_train), batch_size)
test_len = make_divisible(len(x_test), batch_size)
x_train, y_train = x_train[:train_len], y_train[:train_len]
x_test, y_test = x_test[:test_len], y_test[:test_len]
print(f"{train_len} training and {test_len} test images ({source})")


def model_fn():
    return keras.Sequential([
        keras.Input(shape=(28, 28, 1)),
        keras.layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
        keras.layers.MaxPooling2D(pool_size=(2, 2)),
        keras.layers.Conv2D(64, kernel_size=(3, 3), activation="relu"),
        keras.layers.MaxPooling2D(pool_size=(2, 2)),
        keras.layers.Flatten(),
        keras.layers.Dropout(0.5),
        keras.layers.Dense(num_classes, activation="softmax"),
    ])

# %% [markdown]
# ## On the CPU
#
# Plain Keras first, as the baseline. (The tutorial uses `"sgd"`, whose learning rate is
# 0.01; we take 0.1 so that two epochs of this small dataset show learning.)

# %%
keras.utils.set_random_seed(1)
cpu_model = model_fn()
cpu_model.compile(loss="categorical_crossentropy", optimizer=sgd(), metrics=["accuracy"])
cpu_history = cpu_model.fit(x_train, y_train, batch_size=batch_size, epochs=2, verbose=0)
print("CPU:", {k: [round(v, 4) for v in vs] for k, vs in cpu_history.history.items()})

# %% [markdown]
# ## On the IPU
#
# Configure one IPU, create an `IPUStrategy`, and build, compile and fit the same model
# inside its scope: a Keras model made in the scope is an IPU model. Each device
# execution runs `steps_per_execution` steps, fed by an infeed; here that is the whole
# epoch, so the host is involved once per epoch.

# %%
cfg = ipu.config.IPUConfig()
cfg.auto_select_ipus = 1
cfg.configure_ipu_system()

strategy = ipu.ipu_strategy.IPUStrategy()
with strategy.scope():
    keras.utils.set_random_seed(1)
    model = model_fn()
    steps_per_execution = train_len // batch_size
    model.compile(loss="categorical_crossentropy", optimizer=sgd(), metrics=["accuracy"],
                  steps_per_execution=steps_per_execution)
    history = model.fit(x_train, y_train, batch_size=batch_size, epochs=2, verbose=0)
    train_report = model.ipu_report()
    model.compile(loss="categorical_crossentropy", optimizer=model.optimizer,
                  metrics=["accuracy"], steps_per_execution=test_len // batch_size)
    loss, accuracy = model.evaluate(x_test, y_test, batch_size=batch_size, verbose=0)
print("IPU:", {k: [round(v, 4) for v in vs] for k, vs in history.history.items()})
print(f"test loss {loss:.4f}, test accuracy {accuracy:.3f}")
assert history.history["loss"][1] < history.history["loss"][0]
assert accuracy > 0.5, "ten classes: chance is 0.1"

# %% [markdown]
# The IPU model computes what Keras on the CPU computes: from the same initial weights
# and the same batches the losses agree closely (float32 sums in another order).

# %%
np.testing.assert_allclose(history.history["loss"], cpu_history.history["loss"], rtol=1e-3)

# %% [markdown]
# And the simulator says what one step would take on the IPU:

# %%
print(f"{train_report['device_seconds_per_step'] * 1e6:.1f} us per training step on "
      f"{train_report['target']}, {train_report['steps']} steps per execution")

# %% [markdown]
# ## Replication: the same model on two IPUs, each with its own batches
#
# When the model fits on one IPU, more IPUs run *replicas* of it: two IPUs, two
# replicas. Each step takes one batch per replica (so `steps_per_execution` counts steps
# per replica, and an epoch has half as many steps), and the replicas' gradients are
# summed before every update. Summed, not averaged: each is the gradient of its own
# batch's mean loss, so we halve the learning rate to train as one device would on
# batches of 128. `set_replication_options` says how the replicas' logs are combined;
# `MEAN` reports their average.

# %%
cfg = ipu.config.IPUConfig()
cfg.auto_select_ipus = 2
cfg.configure_ipu_system()
replicas = 2

strategy = ipu.ipu_strategy.IPUStrategy()
with strategy.scope():
    keras.utils.set_random_seed(1)
    model = model_fn()
    model.compile(loss="categorical_crossentropy",
                  optimizer=keras.optimizers.SGD(learning_rate / replicas), metrics=["accuracy"],
                  steps_per_execution=train_len // (batch_size * replicas))
    model.set_replication_options(replicated_metric_reduction_method="MEAN")
    history = model.fit(x_train, y_train, batch_size=batch_size, epochs=2, verbose=0)
    replicated_report = model.ipu_report()
print("2 replicas:", {k: [round(v, 4) for v in vs] for k, vs in history.history.items()})
assert history.history["loss"][1] < history.history["loss"][0]

# %% [markdown]
# Each step now processes two batches at once, one per IPU, for the price of one step plus
# the all-reduce of the gradients over the IPU-Links: the simulated throughput almost
# doubles.

# %%
one = batch_size / train_report["device_seconds_per_step"]
two = replicas * batch_size / replicated_report["device_seconds_per_step"]
print(f"one IPU:    {one:10,.0f} samples/s ({train_report['steps']} steps per execution)")
print(f"2 replicas: {two:10,.0f} samples/s ({replicated_report['steps']} steps per execution)")
assert replicated_report["steps"] == train_report["steps"] // replicas
assert 1.5 * one < two < 2 * one

# %% [markdown]
# ## Pipelining over two IPUs with gradient accumulation
#
# A model too big for one IPU can be split into *stages* on several IPUs. With
# pipelining, the stages work on different micro-batches at once. The micro-batches of
# one weight update (the gradient accumulation count, here 8) fill the pipeline, so the
# effective batch size is 64 x 8. The layers are assigned to stages with
# `set_pipeline_stage_assignment` (a functional model would use
# `with ipu.PipelineStage(k):` around its layers).
#
# The tutorial's split: the first convolution block on IPU 0, the rest on IPU 1.
# `steps_per_execution` must be a multiple of the accumulation count.

# %%
cfg = ipu.config.IPUConfig()
cfg.auto_select_ipus = 2
cfg.configure_ipu_system()

strategy = ipu.ipu_strategy.IPUStrategy()
with strategy.scope():
    keras.utils.set_random_seed(1)
    model = model_fn()
    model.set_pipeline_stage_assignment([0, 0, 1, 1, 1, 1, 1])
    model.set_pipelining_options(gradient_accumulation_steps_per_replica=8)
    model.compile(loss="categorical_crossentropy", optimizer=sgd(), metrics=["accuracy"],
                  steps_per_execution=make_divisible(train_len // batch_size, 8))
    model.print_pipeline_stage_assignment_summary()
    history = model.fit(x_train, y_train, batch_size=batch_size, epochs=3, verbose=0)
print("pipelined:", {k: [round(v, 4) for v in vs] for k, vs in history.history.items()})
assert history.history["loss"][-1] < history.history["loss"][0]

# %% [markdown]
# ## What the pipeline costs and saves
#
# The report of the training program has a section per pipeline: each stage's forward
# and backward cycles per micro-batch, the schedule's *makespan* (the time of one run of
# 8 micro-batches through both stages, ramp-up and ramp-down included) against the serial
# sum, and how busy each IPU is. The timeline draws it: a row per IPU, a box per stage,
# micro-batch and pass.

# %%
import tempfile

from IPython.display import Image, display

from ipu_keras._src.reports import summary

folder = tempfile.mkdtemp(prefix="pipeline_report_")
ipu.profiling.enable_reports(folder)
with strategy.scope():
    keras.utils.set_random_seed(1)
    model = model_fn()
    model.set_pipeline_stage_assignment([0, 0, 1, 1, 1, 1, 1])
    model.set_pipelining_options(gradient_accumulation_steps_per_replica=8)
    model.compile(loss="categorical_crossentropy", optimizer=sgd(),
                  steps_per_execution=make_divisible(train_len // batch_size, 8))
    model.fit(x_train, y_train, batch_size=batch_size, epochs=1, verbose=0)
ipu.profiling.write_report()
ipu.profiling.disable_reports()
(path,) = summary.find_reports(folder)
report = summary.load(path)
(pipeline,) = report["ipus"]["pipelines"]
print("\n".join(line for line in summary.summarise(report).splitlines()
                if "pipeline" in line or "stage" in line or "IPU" in line))
assert pipeline["makespan_cycles"] < pipeline["serial_cycles"]
display(Image(filename=path.replace("report.json", "timeline.png")))

# %% [markdown]
# The second stage does about three quarters of the work, so IPU 0 idles much of the
# time: a balanced split (by the stage cycles above) is what makes a pipeline pay. The
# activations crossing from IPU 0 to IPU 1, and their gradients coming back, are
# inter-IPU copies; the report lists them among the ops.
#
# ## What we saw
#
# - A Keras model built in an `IPUStrategy` scope trains on the IPU, equal to Keras on
#   the CPU.
# - `steps_per_execution` sets how many steps one device execution runs.
# - Replication runs a copy of the model per IPU, each on its own batches.
# - Pipelining splits a model over IPUs; gradient accumulation fills the pipeline, and
#   the report shows what the split costs and saves.
