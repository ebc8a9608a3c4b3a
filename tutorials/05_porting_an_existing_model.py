# %% [markdown]
# # 5. Porting an existing model
#
# Graphcore's porting guide suggests three steps: a *preliminary analysis* (will the model
# fit, which parallelism, are its operations supported), *planning* (start small, keep the
# tests), then *porting, profiling and scaling*. We follow them with an existing Keras
# model: a small classifier of signals that computes a spectrum in a custom layer.

# %%
import keras
import numpy as np
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras.errors import UnsupportedOpError

# %% [markdown]
# ## The existing model
#
# Signals of 512 samples, four classes told apart by their dominant frequency. The model
# takes the magnitude spectrum in a custom layer, then two dense layers.

# %%
rng = np.random.default_rng(0)
samples, length, classes = 2048, 512, 4
labels = rng.integers(0, classes, samples)
t = np.arange(length) / length
frequencies = np.array([8, 21, 34, 55])[labels]
signals = (np.sin(2 * np.pi * frequencies[:, None] * t + rng.random((samples, 1)) * 6.28)
           + 0.5 * rng.standard_normal((samples, length))).astype("float32")


class Spectrum(keras.layers.Layer):
    """The magnitude of the real FFT of each signal."""

    def call(self, x):
        return tf.abs(tf.signal.rfft(x))


def existing_model(spectrum=True):
    """The model; without its `Spectrum` layer it takes the spectra (length / 2 + 1)."""
    layers = ([keras.Input((length,)), Spectrum(name="spectrum")] if spectrum
              else [keras.Input((length // 2 + 1,))])
    return keras.Sequential(layers + [keras.layers.Dense(256, activation="relu"),
                                      keras.layers.Dense(256, activation="relu"),
                                      keras.layers.Dense(classes)])

# %% [markdown]
# ## Preliminary analysis: will it fit?
#
# A Mk2 IPU has about 900 MB of on-chip memory (In-Processor Memory), spread over its
# 1,472 tiles. Training needs the weights, their gradients and the optimizer's slots (two
# for Adam), plus the activations of a batch and the program's code. A first estimate:

# %%
model = existing_model()
params = model.count_params()
state_bytes = params * 4 * (1 + 1 + 2)          # float32 weights, gradients, Adam's m and v
print(f"{params:,} parameters: about {state_bytes / 2**20:.1f} MiB of training state")
print(f"an IPU has {1472 * 638976 / 2**20:.0f} MiB: one IPU is plenty")
assert state_bytes < 1472 * 638976

# %% [markdown]
# ## Are its operations supported?
#
# Compiling for the IPU answers that precisely: an operation the IPU cannot run stops the
# compilation with an error that names the TensorFlow op, the node and the Keras layer
# that made it. (`ipu_keras.supported_ops()` lists what can be compiled.)

# %%
cfg = ipu.config.IPUConfig()
cfg.auto_select_ipus = 1
cfg.configure_ipu_system()
strategy = ipu.ipu_strategy.IPUStrategy()

with strategy.scope():
    model = existing_model()
    model.compile(keras.optimizers.Adam(1e-3),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], steps_per_execution=16)
    try:
        model.fit(signals, labels, batch_size=32, epochs=1, verbose=0)
        raise AssertionError("expected the FFT to be refused")
    except UnsupportedOpError as error:
        message = str(error)
print(message)
assert "RFFT" in message and "'spectrum'" in message
print(f"{len(ipu.supported_ops())} TensorFlow op types are supported; RFFT is not one:",
      "RFFT" not in ipu.supported_ops())

# %% [markdown]
# The guide's remedy: run that part on the CPU. The spectrum does not depend on the
# weights, so it moves into the input pipeline (`tf.data` runs on the host), and the
# model on the IPU starts at the dense layers.

# %%
spectra = tf.data.Dataset.from_tensor_slices((signals, labels)).batch(32, drop_remainder=True)
spectra = spectra.map(lambda x, y: (tf.abs(tf.signal.rfft(x)), y)).cache()

with strategy.scope():
    keras.utils.set_random_seed(1)
    model = existing_model(spectrum=False)
    model.compile(keras.optimizers.Adam(1e-3),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], steps_per_execution=16)
    history = model.fit(spectra, epochs=3, verbose=0)
print({k: [round(v, 3) for v in vs] for k, vs in history.history.items()})
assert history.history["loss"][-1] < history.history["loss"][0]
assert history.history["accuracy"][-1] > 0.5

# %% [markdown]
# ## Profiling
#
# The report of the training program shows memory and time. Here the numbers answer the
# first question for real: the memory used on the device, and the busiest tile against
# its 624 KiB.

# %%
report = model.ipu_report()
memory = ipu.profiling.last_report()
print(f"device memory {memory.memory['total_bytes'] / 2**20:.1f} MiB, busiest tile "
      f"{memory.max_tile_memory:,} of 638,976 bytes")
print(f"{report['device_seconds_per_step'] * 1e6:.1f} us per step on the IPU, split "
      f"{ {k: round(v / report['total_cycles'], 3) for k, v in report['cycles'].items()} }")

# %% [markdown]
# ## Scaling
#
# The model fits one IPU easily, so the guide's advice is to scale the batch (and, with
# more IPUs, to replicate). A larger batch takes more device time per step but less per
# sample, until the tiles are busy:

# %%
per_sample = {}
for batch in (16, 64):
    data = tf.data.Dataset.from_tensor_slices((signals, labels)).batch(batch, drop_remainder=True)
    data = data.map(lambda x, y: (tf.abs(tf.signal.rfft(x)), y)).cache()
    with strategy.scope():
        keras.utils.set_random_seed(1)
        scaled = existing_model(spectrum=False)
        scaled.compile(keras.optimizers.Adam(1e-3),
                       keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                       steps_per_execution=8)
        scaled.fit(data, epochs=1, verbose=0)
    seconds = scaled.ipu_report()["device_seconds_per_step"]
    per_sample[batch] = seconds / batch
    print(f"batch {batch:3d}: {seconds * 1e6:7.1f} us per step, "
          f"{seconds / batch * 1e9:7.1f} ns per sample")
assert per_sample[64] < per_sample[16]

# %% [markdown]
# A model too large for one IPU is split over several instead: sharding or pipelining
# (chapters 1 and 3), after which the report lists the memory of each IPU.
#
# ## What we saw
#
# - A quick estimate of the training state says whether one IPU can hold the model.
# - An unsupported operation is named, with its layer, at compile time; moving it to the
#   host's input pipeline is often enough.
# - The report answers the memory question for real, and shows what scaling the batch buys.
