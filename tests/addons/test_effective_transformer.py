"""EffectiveTransformer against a plain float64 formulation (one sequence at a time, padding
stripped and put back by hand), its padding, dropout, training under ipu_keras' fit,
serialization and designed errors."""
import numpy as np
import pytest
import keras
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T
from ipu_keras.errors import AddonsArgumentError
from ipu_keras_addons.keras import layers as ipu_layers

FROM_LENS = np.array([[8], [3], [5], [7], [3]], np.int32)  # the original test's lengths
TO_LENS = np.array([[2], [8], [11], [3], [9]], np.int32)
ACTIVATIONS = {"linear": lambda x: x, "tanh": tf.tanh, "relu": tf.nn.relu}

# (kwargs, q_mask): the original test's three cases, then activations, one head of size 1,
# a partial q_mask, attention in chunks of 2 sequences, no layer norm.
CASES = [
    (dict(num_attention_heads=4, attention_head_size=16, sequences_per_iter=2), None),
    (dict(num_attention_heads=4, attention_head_size=16, sequences_per_iter=2,
          use_scale=True), np.ones((5, 4), bool)),
    (dict(num_attention_heads=2, attention_head_size=3, sequences_per_iter=1, use_scale=True,
          qkv_activation="tanh", output_activation="relu"),
     np.array([[1, 0], [0, 1], [1, 1], [0, 0], [1, 0]], bool)),
    (dict(num_attention_heads=2, attention_head_size=3, max_batch_size=2, use_scale=True),
     np.array([[1, 1], [0, 1], [1, 1], [1, 0], [1, 1]], bool)),
    (dict(layer_norm_output=False, sequences_per_iter=5), None),
]


def _sequences(lengths, width, rng, padding=0.0):
    """Rows of uniform values in [0.5, 1.5) up to each length, `padding` after it."""
    values = rng.uniform(0.5, 1.5, (len(lengths), width)).astype(np.float32)
    return np.where(np.arange(width)[None] < lengths, values, np.float32(padding))


def _inputs(q_mask=None, padding=0.0, seed=0):
    rng = np.random.default_rng(seed)
    inputs = [_sequences(FROM_LENS, 8, rng, padding), FROM_LENS,
              _sequences(TO_LENS, 11, rng, padding), TO_LENS]
    return inputs + ([] if q_mask is None else [q_mask])


def _layer(seed=0, max_batch_size=10, **kwargs):
    """A built layer with random weights, biases and layer norm parameters included."""
    layer = ipu_layers.EffectiveTransformer(12, max_batch_size, **kwargs)
    layer(_inputs())
    rng = np.random.default_rng(seed)
    layer.set_weights([w + rng.uniform(-0.3, 0.3, w.shape).astype(np.float32)
                       for w in layer.get_weights()])
    return layer


def _embed(x, length, width, kernel, bias, activation):
    """One sequence's embedding: the real elements only, zero rows where padding was."""
    real = activation(x[:length, None] * kernel + bias)
    return tf.pad(real, [[0, width - length], [0, 0]])


def _reference_of(w, config, inputs):
    """(output, context) in float64 from the weights `w` (by path within the layer): per
    sequence, per head, as plain matrix products."""
    heads, size = config["num_attention_heads"], config["attention_head_size"]
    act = ACTIVATIONS[config["qkv_activation"]]
    from_seq, from_len, to_seq, to_len = (np.asarray(x) for x in inputs[:4])
    q_mask = np.ones((len(from_seq), heads)) if len(inputs) == 4 else inputs[4]
    contexts = []
    for i in range(len(from_seq)):
        n, m = int(from_len[i, 0]), int(to_len[i, 0])
        x, y = tf.constant(from_seq[i], tf.float64), tf.constant(to_seq[i], tf.float64)
        q = _embed(x, n, from_seq.shape[1], w["query_layer/kernel"], w["query_layer/bias"], act)
        k = _embed(y, m, to_seq.shape[1], w["key_layer/kernel"], w["key_layer/bias"], act)
        v = _embed(y, m, to_seq.shape[1], w["value_layer/kernel"], w["value_layer/bias"], act)
        per_head = []
        for h in range(heads):
            cols = slice(h * size, (h + 1) * size)
            scores = tf.matmul(q[:, cols], k[:, cols], transpose_b=True)
            if config["use_scale"]:
                scores = scores * w["scale"][0]
            per_head.append(tf.matmul(tf.nn.softmax(scores), v[:, cols]) * float(q_mask[i, h]))
        contexts.append(tf.stack(per_head, 1))
    context = tf.stack(contexts)
    out = tf.reshape(context, [len(from_seq), -1]) @ w["output_layer/kernel"]
    out = ACTIVATIONS[config["output_activation"]](out + w["output_layer/bias"])
    if config["layer_norm_output"]:
        mean, var = tf.nn.moments(out, [1], keepdims=True)
        out = ((out - mean) / tf.sqrt(var + 1e-3) * w["output_layer_norm/gamma"]
               + w["output_layer_norm/beta"])
    return out, context


def _loss_and_grads(compute, variables):
    with tf.GradientTape() as tape:
        output, context = compute()
        weights = tf.cast(tf.range(1, output.shape[1] + 1), output.dtype)
        loss = tf.reduce_sum(output * weights) + tf.reduce_sum(context)
    return [output, context], tape.gradient(loss, variables)


@pytest.mark.parametrize("kwargs, q_mask", CASES)
def test_outputs_and_weight_gradients_equal_plain_attention(kwargs, q_mask):
    layer = _layer(**kwargs)
    inputs = _inputs(q_mask)
    got, got_grads = _loss_and_grads(lambda: layer(inputs), layer.trainable_weights)
    weights = {w.path.split("/", 1)[1]: tf.Variable(w.numpy().astype(np.float64))
               for w in layer.trainable_weights}
    want, want_grads = _loss_and_grads(
        lambda: _reference_of(weights, layer.get_config(), inputs), list(weights.values()))
    for g, w, name in zip(got, want, ["output", "context"]):
        T.FLOAT32.assert_close(g.numpy(), w.numpy(), name)
    for g, w, var in zip(got_grads, want_grads, layer.trainable_weights):
        T.FLOAT32_EFFECTIVE_TRANSFORMER_440.assert_close(g.numpy(), w.numpy(),
                                                         f"gradient of {var.path}")


def test_padding_contents_do_not_change_anything():
    layer = _layer(num_attention_heads=2, attention_head_size=4, use_scale=True)
    clean = layer(_inputs())
    noisy = layer(_inputs(padding=37.5))
    for got, want in zip(noisy, clean):
        T.EXACT.assert_close(got.numpy(), want.numpy())


def test_each_sequence_is_computed_alone():
    """The original's chunks pack sequences together; no sequence sees another (the last
    one included, which the original's chunk bound leaves at zero)."""
    layer = _layer(num_attention_heads=2, attention_head_size=4, layer_norm_output=False)
    inputs = _inputs()
    _, context = layer(inputs)
    for i in range(len(FROM_LENS)):
        _, alone = layer([x[i:i + 1] for x in inputs])
        T.FLOAT32.assert_close(alone.numpy()[0], context.numpy()[i], f"sequence {i}")
    assert np.abs(context.numpy()[-1]).max() > 0.1


def _dropped(reference, got, rate):
    """Asserts every element is 0 or reference / (1 - rate); returns the dropped fraction."""
    kept = got != 0
    T.FLOAT32.assert_close(got[kept], reference[kept] / (1 - rate), "kept elements")
    return 1 - kept.mean()


def test_dropout_is_seeded_and_inverted():
    """Training drops context (attention) or output elements at the rate and scales the rest
    by 1 / (1 - rate); the global Keras seed set before building repeats the masks."""
    kwargs = dict(num_attention_heads=2, attention_head_size=4, layer_norm_output=False)
    plain = _layer(**kwargs)
    inputs = _inputs()
    want_out, want_ctx = (x.numpy() for x in plain(inputs))

    def seeded(**rates):
        keras.utils.set_random_seed(5)
        layer = _layer(**kwargs, **rates)
        for mine, theirs in zip(layer.trainable_weights, plain.trainable_weights):
            mine.assign(theirs)
        for got, want in zip(layer(inputs, training=False), (want_out, want_ctx)):
            T.EXACT.assert_close(got.numpy(), want)
        return [x.numpy() for x in layer(inputs, training=True)]

    first = seeded(attention_dropout_prob=0.4)
    for got, want in zip(seeded(attention_dropout_prob=0.4), first):
        T.EXACT.assert_close(got, want)
    assert 0.25 < _dropped(want_ctx, first[1], 0.4) < 0.55
    got_out, got_ctx = seeded(output_dropout_prob=0.3)
    T.EXACT.assert_close(got_ctx, want_ctx)
    assert 0.1 < _dropped(want_out, got_out, 0.3) < 0.5


def test_config_round_trips():
    layer = ipu_layers.EffectiveTransformer(
        6, 4, use_scale=True, num_attention_heads=3, attention_head_size=2,
        sequences_per_iter=4, qkv_activation="tanh", attention_dropout_prob=0.1,
        output_activation="relu", output_dropout_prob=0.2, layer_norm_output=False,
        embedding_initializer="ones", output_bias_initializer="ones")
    config = layer.get_config()
    again = ipu_layers.EffectiveTransformer.from_config(config)
    assert again.get_config() == config
    assert config["sequences_per_iter"] == 4 and config["qkv_activation"] == "tanh"


def _model(cls, q_mask):
    keras.utils.set_random_seed(3)
    shapes = [((8,), "float32"), ((1,), "int32"), ((11,), "float32"), ((1,), "int32")]
    shapes += [((2,), "float32")] if q_mask else []
    inputs = [keras.Input(shape, batch_size=5, dtype=dtype) for shape, dtype in shapes]
    output, _ = ipu_layers.EffectiveTransformer(
        4, 5, use_scale=True, num_attention_heads=2, attention_head_size=3,
        sequences_per_iter=2, qkv_activation="tanh")(inputs)
    model = cls(inputs, keras.layers.Dense(1)(output))
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", steps_per_execution=2,
                  **({} if cls is ipu.Model else {"run_eagerly": True}))
    return model


@pytest.fixture(scope="module")
def trained():
    """The same model trained for 2 epochs of 2 batches on the simulator and in Keras."""
    mask = np.array([[1, 0], [1, 1], [0, 1], [1, 1], [1, 1]], np.float32)
    x = [np.concatenate([a, a[::-1]]) for a in _inputs(mask)]
    y = np.concatenate([FROM_LENS, TO_LENS]).astype(np.float32) / 8
    on_ipu, on_cpu = _model(ipu.Model, True), _model(keras.Model, True)
    on_cpu.set_weights(on_ipu.get_weights())
    got = on_ipu.fit(x, y, batch_size=5, epochs=2, verbose=0).history["loss"]
    want = on_cpu.fit(x, y, batch_size=5, epochs=2, verbose=0).history["loss"]
    return on_ipu, on_cpu, x, got, want


@pytest.mark.slow
def test_model_trains_under_fit_like_keras_on_the_cpu(trained):
    on_ipu, on_cpu, _, got, want = trained
    T.FLOAT32.assert_close(got, want, "losses")
    assert got[-1] < got[0]
    for g, w in zip(on_ipu.get_weights(), on_cpu.get_weights()):
        T.FLOAT32.assert_close(g, w, "trained weights")


@pytest.mark.slow
def test_save_and_load(trained, tmp_path):
    model, _, x, _, _ = trained
    path = str(tmp_path / "effective_transformer.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded, ipu.Model)
    assert isinstance(loaded.layers[5], ipu_layers.EffectiveTransformer)
    T.EXACT.assert_close(loaded.predict(x, batch_size=5, verbose=0),
                         model.predict(x, batch_size=5, verbose=0))


@pytest.mark.parametrize("kwargs, match", [
    (dict(sequences_per_iter=11), "max_batch_size must be greater than sequences_per_iter"),
    (dict(num_attention_heads=0), "positive integer num_attention_heads"),
    (dict(attention_head_size=2.5), "positive integer attention_head_size"),
])
def test_bad_arguments_are_refused(kwargs, match):
    with pytest.raises(AddonsArgumentError, match=match):
        ipu_layers.EffectiveTransformer(12, 10, **kwargs)


def _z(*shape, dtype=np.float32):
    return np.zeros(shape, dtype)


LENS3 = np.array([3] * 3, np.int32)


@pytest.mark.parametrize("inputs, match", [
    ([_z(3, 3, 1), LENS3, _z(3, 3), LENS3], "must be equal rank"),
    ([_z(4, 3), np.array([3] * 4, np.int32), _z(3, 3), LENS3],
     "must contain an equal number of sequences"),
    ([_z(3, 3), np.array([3] * 4, np.int32), _z(3, 3), np.array([3] * 4, np.int32)],
     "have lengths equal to the number of sequences provided"),
    ([_z(3, 3), LENS3, _z(3, 3), np.array([3] * 2, np.int32)],
     "have lengths equal to the number of sequences provided"),
    ([_z(3, 3, dtype=np.float16), LENS3, _z(3, 3, dtype=np.int32), LENS3],
     "must be equal types"),
    ([_z(3, 3), LENS3, _z(3, 3), LENS3, _z(3, 2, dtype=bool)], "q_mask that must have shape"),
    ([_z(3, 3), LENS3, _z(3, 3), LENS3, _z(4, 1, dtype=bool)], "q_mask that must have shape"),
    ([_z(3, 3), LENS3, _z(3, 3)], "four or five input shapes"),
])
def test_inconsistent_inputs_are_refused(inputs, match):
    layer = ipu_layers.EffectiveTransformer(12, 10)
    with pytest.raises(AddonsArgumentError, match=match):
        layer(inputs)


def attention_memory(max_batch_size, batch=32, width=16):
    """(temporary bytes, total cycles) of one prediction of a batch of 32 sequence pairs of
    width 16 (4 heads of 16) with the given `max_batch_size`."""
    rng = np.random.default_rng(0)
    x = [rng.random((batch, width), dtype=np.float32),
         rng.integers(1, width + 1, (batch, 1)).astype(np.int32),
         rng.random((batch, width), dtype=np.float32),
         rng.integers(1, width + 1, (batch, 1)).astype(np.int32)]
    inputs = [keras.Input((width,)), keras.Input((1,), dtype="int32"),
              keras.Input((width,)), keras.Input((1,), dtype="int32")]
    output, _ = ipu_layers.EffectiveTransformer(
        8, max_batch_size, num_attention_heads=4, attention_head_size=16)(inputs)
    model = ipu.Model(inputs, output)
    model.compile("sgd", "mse", steps_per_execution=1)
    model.predict(x, batch_size=batch, verbose=0)
    memory = model.predict_function.last_program.executable.memory
    return memory["categories"]["temporaries"], model.ipu_report()["total_cycles"]


@pytest.mark.slow
def test_smaller_chunks_take_less_attention_memory_and_more_cycles():
    whole, chunked = attention_memory(32), attention_memory(8)
    assert chunked[0] < whole[0] and chunked[1] > whole[1]


if __name__ == "__main__":
    print("| max_batch_size | temporaries (bytes) | cycles |")
    print("|---|---|---|")
    for size in (32, 16, 8, 4, 2):
        print(f"| {size} | " + " | ".join(map(str, attention_memory(size))) + " |")
