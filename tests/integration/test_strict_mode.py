"""Strict tile mode on traced TensorFlow programs: same bits as the vectorised run.

`IPUConfig.ipu_model.strict_tile_mode` replays every compute set tile by tile on a
small target; training and inference must not change by a single bit.
"""
import numpy as np
import pytest
import tensorflow as tf
import keras

import ipu_keras as ipu
from ipu_keras._src.driver import executor as _executor
from ipu_keras.config import reset_ipu_configuration
from ipu_keras._src.demo import make_dataset, make_model, make_training_loop
from ipu_keras._src.simulator.strict import StrictEngine

TILES = 8


@pytest.fixture(autouse=True)
def _fresh_config():
    reset_ipu_configuration()
    yield
    reset_ipu_configuration()


def _configure(strict):
    cfg = ipu.config.IPUConfig()
    cfg.ipu_model.tiles_per_ipu = TILES
    cfg.ipu_model.strict_tile_mode = strict
    cfg.configure_ipu_system()


def _engine(strict):
    engine = _executor.last_compiled().session.engine
    assert isinstance(engine, StrictEngine) == strict
    return engine


def _train_mlp(strict, steps=3):
    """The demo's custom loop for `steps` steps; returns (losses, weights, engine)."""
    _configure(strict)
    rng = np.random.default_rng(1)
    x = rng.random((48, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, 48).astype(np.int32)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = make_model()
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        loop = make_training_loop(model, keras.optimizers.SGD(0.01),
                                  keras.losses.SparseCategoricalCrossentropy(), outfeed.enqueue)
        strategy.run(loop, args=[iter(make_dataset(x, y, 16)), steps])
        losses = np.asarray(outfeed.dequeue())
    return losses, [w.numpy() for w in model.weights], _engine(strict)


def test_mnist_mlp_training_is_bit_identical_in_strict_mode():
    losses, weights, _ = _train_mlp(strict=False)
    strict_losses, strict_weights, engine = _train_mlp(strict=True)
    assert losses.shape == (3,)
    assert losses.tobytes() == strict_losses.tobytes()
    for a, b in zip(weights, strict_weights):
        assert a.tobytes() == b.tobytes()
    report = engine.report()
    rules = {r.op: r.rule for r in report}
    assert rules["matmul"] == "matmul" and rules["sparse_softmax_xent"] == "rows"
    assert {r.runs for r in report if r.op == "matmul"} == {3}   # once per step
    assert all(r.tiles <= TILES for r in report)


def _cnn_step(x, y, model, optimizer):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
            y, model(x, training=True), from_logits=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


def _run_cnn(strict):
    _configure(strict)
    keras.utils.set_random_seed(3)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 8, 8, 2)).astype(np.float32)
    y = rng.integers(0, 5, 4).astype(np.int32)
    with ipu.ipu_strategy.IPUStrategy().scope():
        model = keras.Sequential([
            keras.Input((8, 8, 2)),
            keras.layers.Conv2D(3, 3, padding="same", activation="relu"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Flatten(),
            keras.layers.Dense(5),
        ])
        optimizer = keras.optimizers.SGD(0.1)
        (loss,) = ipu.ipu_compiler.compile(
            tf.function(lambda a, b: _cnn_step(a, b, model, optimizer)), [x, y])
    return loss, [w.numpy() for w in model.weights], _engine(strict)


def test_cnn_step_is_bit_identical_in_strict_mode():
    loss, weights, _ = _run_cnn(strict=False)
    strict_loss, strict_weights, engine = _run_cnn(strict=True)
    assert np.asarray(loss).tobytes() == np.asarray(strict_loss).tobytes()
    for a, b in zip(weights, strict_weights):
        assert a.tobytes() == b.tobytes()
    ops = {r.op for r in engine.report()}
    assert {"conv", "max_pool", "conv_filter_grad", "matmul"} <= ops
