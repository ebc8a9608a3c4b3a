# %% [markdown]
# # 6. IPU TensorFlow Addons: layers and optimizers in your model
#
# Graphcore's IPU TensorFlow Addons add Keras layers and optimizers made for the IPU:
# a dense layer that serializes its matrix product to save memory, group and layer
# normalisation, RNN cells, CTC, and Adam/LAMB/SGD with low-precision optimizer state.
# Here they are `ipu_keras_addons`: a script ports by changing `ipu_tensorflow_addons`
# to `ipu_keras_addons` in its imports. They are ordinary Keras layers, so they go into
# any model.

# %%
import os
import tempfile

import keras
import numpy as np

import ipu_keras as ipu
from ipu_keras_addons.keras import layers as ipu_layers
from ipu_keras_addons.keras import optimizers as ipu_optimizers

cfg = ipu.config.IPUConfig()
cfg.auto_select_ipus = 1
cfg.configure_ipu_system()

# %% [markdown]
# ## `SerialDense`: the same product, in pieces
#
# `SerialDense(units, serialization_factor, serialization_dimension)` computes what
# `keras.layers.Dense` computes, splitting the product into `serialization_factor`
# smaller ones along the input columns, the input rows and kernel columns, or the kernel
# rows. With the same kernel they agree:

# %%
x = np.random.default_rng(0).standard_normal((64, 256)).astype("float32")
dense = keras.layers.Dense(512)
serial = ipu_layers.SerialDense(512, serialization_factor=4,
                                serialization_dimension="kernel_rows")
dense.build((None, 256))
serial.build((None, 256))
serial.set_weights(dense.get_weights())
difference = np.abs(np.asarray(serial(x)) - np.asarray(dense(x))).max()
print(f"largest difference from keras.layers.Dense: {difference:.2e}")
assert difference < 1e-4

# %% [markdown]
# ## A user model with addons layers and an addons optimizer
#
# A sequence classifier: the label says whether a sequence of tokens holds more 1s than
# 2s, which needs the whole sequence. An `Embedding` with a serialized table, a
# `PopnnLSTM` (the IPU's fused LSTM, with Keras' weight layout), `LayerNorm`, and
# `AdamIpuOptimizer` keeping its first moment `m` in float16.

# %%
rng = np.random.default_rng(1)
tokens = rng.integers(0, 4, (1024, 12)).astype("int32")
labels = ((tokens == 1).sum(axis=1) > (tokens == 2).sum(axis=1)).astype("int32")

keras.utils.set_random_seed(2)
model = ipu.Sequential([
    keras.Input((12,), dtype="int32"),
    ipu_layers.Embedding(4, 16, serialization_factor=2),
    ipu_layers.PopnnLSTM(32),
    ipu_layers.LayerNorm(),
    ipu_layers.SerialDense(2, serialization_factor=2,
                           serialization_dimension="input_columns"),
])
model.compile(ipu_optimizers.AdamIpuOptimizer(0.01, m_dtype="float16"),
              keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"], steps_per_execution=8)
history = model.fit(tokens, labels, batch_size=32, epochs=12, verbose=0)
print({k: [round(v, 3) for v in vs[::3]] for k, vs in history.history.items()})
assert history.history["loss"][-1] < 0.8 * history.history["loss"][0]

# %% [markdown]
# The float16 moment is really float16: it takes half the bytes of a float32 one.

# %%
print(sorted({str(v.dtype) for v in model.optimizer.variables if len(v.shape)}))
assert any(str(v.dtype) == "float16" for v in model.optimizer.variables)

# %% [markdown]
# ## Saving and loading
#
# The layers and optimizers are registered with Keras, so the model saves to a `.keras`
# file and loads back with its weights.

# %%
path = os.path.join(tempfile.mkdtemp(), "addons.keras")
model.save(path)
loaded = keras.models.load_model(path)
same = np.allclose(np.asarray(loaded.predict(tokens[:64], verbose=0)),
                   np.asarray(model.predict(tokens[:64], verbose=0)), atol=1e-6)
print("loaded model predicts the same:", same)
assert same

# %% [markdown]
# ## What we saw
#
# - Addons layers are Keras layers: drop them into a model, train it on the IPU, save it.
# - `SerialDense` equals `Dense`; its point is the memory of the product, which the
#   project's docs (`docs/addons.md`) measure for each serialization factor.
# - Optimizer state can be kept in float16 to halve its memory.
