"""Keras models created inside `IPUStrategy().scope()` are IPU models (SDK 2.2+ style)."""
import logging

import keras
import numpy as np
import pytest

import ipu_keras as ipu
from ipu_keras.keras import IPUTrainerMixin
from ipu_keras._src.keras import extension
from ipu_keras._src.conformance import tolerances as T

N, BATCH, STEPS_PER_EXECUTION = 64, 16, 2  # 4 steps an epoch: 2 executions of 2 steps


def mnist_like(seed=0):
    """MNIST-shaped synthetic data: 28x28x1 images in [0, 1) and int labels."""
    rng = np.random.default_rng(seed)
    x = rng.random((N, 28, 28, 1), dtype=np.float32)
    y = rng.integers(0, 10, N).astype(np.int32)
    return x, y


def cnn_layers():
    """The Keras tutorial's MNIST CNN, made small."""
    return [keras.Input((28, 28, 1)), keras.layers.Conv2D(4, 3, activation="relu"),
            keras.layers.MaxPooling2D(2), keras.layers.Flatten(),
            keras.layers.Dense(10, activation="softmax")]


def train(model, x, y):
    model.compile(keras.optimizers.SGD(0.1), "sparse_categorical_crossentropy",
                  metrics=["accuracy"], steps_per_execution=STEPS_PER_EXECUTION)
    history = model.fit(x, y, batch_size=BATCH, epochs=2, verbose=0, shuffle=False)
    return history.history, model.evaluate(x, y, batch_size=BATCH, verbose=0)


def test_mnist_cnn_in_scope_runs_on_ipu_and_equals_ipu_keras_sequential(executions):
    x, y = mnist_like()
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = keras.Sequential(cnn_layers())
        history, scores = train(model, x, y)
    assert type(model).__name__ == "Sequential" and isinstance(model, keras.Sequential)
    assert isinstance(model, IPUTrainerMixin)
    # 2 epochs of 2 executions, then evaluate: 4 steps in 2 executions.
    assert len(executions) == 6

    reference = ipu.Sequential(cnn_layers())
    initial = reference.get_weights()
    ref_history, ref_scores = train(reference, x, y)
    with strategy.scope():
        again = keras.Sequential(cnn_layers())
        again.set_weights(initial)  # the same start as the reference
        new_history, new_scores = train(again, x, y)
    for key in ref_history:
        np.testing.assert_allclose(new_history[key], ref_history[key], **T.FLOAT32_FEW_OPS.kwargs)
    np.testing.assert_allclose(new_scores, ref_scores, **T.FLOAT32_FEW_OPS.kwargs)
    for got, want in zip(again.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(got, want, **T.FLOAT32_FEW_OPS.kwargs)
    assert np.isfinite(history["loss"]).all() and np.isfinite(scores).all()


class _Body:
    """`__init__` and `call` shared by the Keras subclass and the ipu_keras one."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.flatten = keras.layers.Flatten()
        self.dense = keras.layers.Dense(10, activation="softmax")

    def call(self, inputs):
        return self.dense(self.flatten(inputs))


class Subclassed(_Body, keras.Model):
    pass


class IPUSubclassed(_Body, ipu.Model):
    pass


def test_subclassed_model_in_scope_equals_ipu_keras_model(executions):
    x, y = mnist_like(1)
    with ipu.ipu_strategy.IPUStrategy().scope():
        model = Subclassed()
        model(x[:1])
    reference = IPUSubclassed()
    reference(x[:1])
    reference.set_weights(model.get_weights())
    history, scores = train(model, x, y)
    assert len(executions) == 6
    ref_history, ref_scores = train(reference, x, y)
    np.testing.assert_allclose(history["loss"], ref_history["loss"], **T.FLOAT32_FEW_OPS.kwargs)
    np.testing.assert_allclose(scores, ref_scores, **T.FLOAT32_FEW_OPS.kwargs)
    assert type(model).__name__ == "Subclassed" and isinstance(model, Subclassed)


def test_functional_model_in_scope_runs_on_batch_methods(executions):
    x, y = mnist_like(2)
    with ipu.ipu_strategy.IPUStrategy().scope():
        inputs = keras.Input((28, 28, 1))
        outputs = keras.layers.Dense(10, activation="softmax")(keras.layers.Flatten()(inputs))
        model = keras.Model(inputs, outputs)
        model.compile("sgd", "sparse_categorical_crossentropy")
        loss = model.train_on_batch(x[:BATCH], y[:BATCH])
        predictions = model.predict_on_batch(x[:BATCH])
        test_loss = model.test_on_batch(x[:BATCH], y[:BATCH])
    assert isinstance(model, IPUTrainerMixin)
    assert len(executions) == 3
    np.testing.assert_allclose(predictions, model(x[:BATCH]).numpy(), **T.FLOAT32.kwargs)
    expected = keras.losses.sparse_categorical_crossentropy(y[:BATCH], predictions)
    np.testing.assert_allclose(test_loss, np.mean(expected), **T.FLOAT32.kwargs)
    assert np.isfinite(loss)


def test_application_model_in_scope_is_an_ipu_model():
    with ipu.ipu_strategy.IPUStrategy().scope():
        model = keras.applications.MobileNetV2(weights=None, input_shape=(32, 32, 3),
                                               classes=10, alpha=0.35)
    assert isinstance(model, IPUTrainerMixin)
    assert model.make_predict_function().__class__.__name__ == "DeviceFunction"


def test_models_outside_scope_stay_plain_keras():
    with ipu.ipu_strategy.IPUStrategy().scope():
        pass
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    assert not isinstance(model, IPUTrainerMixin)
    assert not hasattr(model, "set_asynchronous_callbacks")
    disabled = ipu.ipu_strategy.IPUStrategy(enable_keras_extensions=False)
    with disabled.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    assert not isinstance(model, IPUTrainerMixin)


def test_mixin_methods_are_surfaced_generically(monkeypatch):
    """A method added to the mixin (as accumulation and pipelining do) reaches scope models."""
    with ipu.ipu_strategy.IPUStrategy().scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    monkeypatch.setattr(IPUTrainerMixin, "set_some_new_option", lambda self, n: n * 2,
                        raising=False)
    assert model.set_some_new_option(3) == 6
    model.set_asynchronous_callbacks(True)
    assert model._ipu_asynchronous_callbacks is True


def test_model_used_outside_its_scope_keeps_the_ipu_and_says_so_once(executions, caplog):
    x, y = mnist_like(3)
    with ipu.ipu_strategy.IPUStrategy().scope():
        model = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(),
                                  keras.layers.Dense(10, activation="softmax")])
    model.compile("sgd", "sparse_categorical_crossentropy")
    with caplog.at_level(logging.WARNING, logger="ipu_keras"):
        model.evaluate(x, y, batch_size=BATCH, verbose=0)
        model.predict(x, batch_size=BATCH, verbose=0)
    said = [r for r in caplog.records if "used outside it" in r.getMessage()]
    assert len(said) == 1
    assert len(executions) == 8  # still on the device: one execution per step by default


def test_run_eagerly_in_scope_raises_the_original_error():
    x, y = mnist_like(4)
    with ipu.ipu_strategy.IPUStrategy().scope():
        model = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(),
                                  keras.layers.Dense(10)])
        model.compile("sgd", "mse", run_eagerly=True)
        with pytest.raises(RuntimeError, match="cannot run eagerly when using `IPUStrategy`"):
            model.fit(x, np.zeros((N, 10), np.float32), verbose=0)


def test_scopes_nest_and_unwind():
    outer, inner = ipu.ipu_strategy.IPUStrategy(), ipu.ipu_strategy.IPUStrategy()
    with outer.scope():
        with inner.scope():
            assert extension.current_strategy() is inner
            model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        assert extension.current_strategy() is outer
    assert extension.current_strategy() is None
    assert model._ipu_strategy is inner


def test_saved_scope_model_loads_as_plain_keras_outside_and_as_ipu_model_inside(tmp_path):
    path = str(tmp_path / "model.keras")
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.save(path)
    outside = keras.models.load_model(path)
    assert type(outside) is keras.Sequential
    with strategy.scope():
        inside = keras.models.load_model(path)
    assert isinstance(inside, IPUTrainerMixin) and isinstance(inside, keras.Sequential)
    for got, want in zip(inside.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(got, want)
