"""The infeed/outfeed custom training loop of the IPU TensorFlow 2 tutorial.

MNIST-shaped data (synthetic when the real set cannot be downloaded), a plain
keras.Sequential MLP trained with SGD in a `tf.range` loop of 10 steps per execution,
losses sent through an outfeed: the loop of `ipu_keras._src.demo`, which is the tutorial's.
The same loop runs in TensorFlow on the CPU from the same initial weights; losses and
final weights must agree within the float32 row of the tolerance table.
"""
import numpy as np
import pytest
import tensorflow as tf
import keras

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T
from ipu_keras._src.demo import load_data, make_dataset, make_model, make_training_loop
from ipu_keras.errors import InfeedExhaustedError

STEPS_PER_EXECUTION = 10
EXECUTIONS = 10


def mnist_like(n=640):
    x, y, _ = load_data(samples=n)
    return x[:n], y[:n]


def dataset():
    x, y = mnist_like()
    return make_dataset(x, y, 32)


def make_loop(model, optimizer, loss_fn, record, jit_compile=True):
    return make_training_loop(model, optimizer, loss_fn, record, jit_compile)


@pytest.fixture(scope="module")
def reference():
    """The loop on TensorFlow's CPU: losses of every step and final weights."""
    model = make_model()
    optimizer = keras.optimizers.SGD(0.01)
    loss_fn = keras.losses.SparseCategoricalCrossentropy()
    losses = []
    loop = make_loop(model, optimizer, loss_fn, lambda loss: tf.py_function(
        lambda v: losses.append(v.numpy()), [loss], []), jit_compile=False)
    iterator = iter(dataset())
    for _ in range(EXECUTIONS):
        loop(iterator, tf.constant(STEPS_PER_EXECUTION))
    return np.array(losses), model.get_weights()


@pytest.fixture(scope="module")
def on_ipu():
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = make_model()
        optimizer = keras.optimizers.SGD(0.01)
        loss_fn = keras.losses.SparseCategoricalCrossentropy()
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        loop = make_loop(model, optimizer, loss_fn, outfeed.enqueue)
        iterator = iter(dataset())
        losses = []
        for _ in range(EXECUTIONS):
            strategy.run(loop, args=[iterator, STEPS_PER_EXECUTION])
            losses.append(outfeed.dequeue())
    return np.concatenate(losses), model.get_weights(), optimizer


def test_losses_match_tensorflow(reference, on_ipu):
    ref_losses, _ = reference
    losses, _, _ = on_ipu
    assert losses.shape == (STEPS_PER_EXECUTION * EXECUTIONS,)
    T.FLOAT32.assert_close(losses, ref_losses)
    assert losses[-10:].mean() < losses[:10].mean()  # it really trains


def test_final_weights_match_tensorflow(reference, on_ipu):
    _, ref_weights = reference
    _, weights, optimizer = on_ipu
    for got, expected in zip(weights, ref_weights):
        T.FLOAT32.assert_close(got, expected)
    assert int(optimizer.iterations.numpy()) == STEPS_PER_EXECUTION * EXECUTIONS


def test_outfeed_last_mode_keeps_only_the_last_enqueue():
    model, optimizer = make_model(), keras.optimizers.SGD(0.01)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(ipu.ipu_outfeed_queue.IPUOutfeedMode.LAST)
    loop = make_loop(model, optimizer, keras.losses.SparseCategoricalCrossentropy(),
                     outfeed.enqueue)
    ipu.ipu_strategy.IPUStrategy().run(loop, args=[iter(dataset()), 3])
    assert np.shape(outfeed.dequeue()) == ()


def test_exhausted_infeed_fails_without_touching_the_weights():
    x, y = mnist_like(64)
    short = tf.data.Dataset.from_tensor_slices((x, y)).batch(32, drop_remainder=True)
    model, optimizer = make_model(), keras.optimizers.SGD(0.01)
    before = model.get_weights()
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    loop = make_loop(model, optimizer, keras.losses.SparseCategoricalCrossentropy(),
                     outfeed.enqueue)
    with pytest.raises(InfeedExhaustedError, match="exhausted"):
        ipu.ipu_strategy.IPUStrategy().run(loop, args=[iter(short), 5])
    for got, expected in zip(model.get_weights(), before):
        np.testing.assert_array_equal(got, expected)
    assert outfeed.dequeue().shape == (0,)  # nothing of the failed execution was delivered
