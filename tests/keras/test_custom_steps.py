"""User-defined `train_step`, `test_step` and `predict_step` run on the device like Keras'.

A subclassed model overrides all three (gradient clipping and an extra log in training,
a halved loss in testing, a dict of probabilities and labels in prediction); the same
class on `keras.Model` runs on the CPU. fit, evaluate and predict give the same History,
weights, results and outputs; the custom logs reach the callbacks.
"""
import numpy as np
import pytest
import tensorflow as tf
import keras

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T

from tests.keras.common import (
    BATCH, SHAPE, Recorder, assert_events_equal, assert_history_equal, assert_logs_equal,
    assert_weights_equal, compile_model, events_as_run, train_val,
)


class _CustomSteps:
    """The body of the model, on whichever base class follows in the MRO."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.flatten = keras.layers.Flatten()
        self.hidden = keras.layers.Dense(16, activation="relu")
        self.out = keras.layers.Dense(10, activation="softmax")
        self.grad_norm = keras.metrics.Mean(name="grad_norm")

    def call(self, inputs):
        return self.out(self.hidden(self.flatten(inputs)))

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(x=x, y=y, y_pred=y_pred)
        grads = tape.gradient(loss, self.trainable_variables)
        grads, norm = tf.clip_by_global_norm(grads, 0.5)
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables))
        self.grad_norm.update_state(norm)
        return self.compute_metrics(x, y, y_pred) | {"grad_norm": self.grad_norm.result()}

    def test_step(self, data):
        x, y = data
        y_pred = self(x, training=False)
        loss = self.compute_loss(x=x, y=y, y_pred=y_pred)
        logs = self.compute_metrics(x, y, y_pred)
        return logs | {"half_loss": loss / 2}

    def predict_step(self, data):
        x = data[0] if isinstance(data, tuple) else data
        probs = self(x, training=False)
        return {"probs": probs, "label": tf.argmax(probs, axis=-1, output_type=tf.int32)}


class CustomOnCPU(_CustomSteps, keras.Model):
    pass


class CustomOnIPU(_CustomSteps, ipu.Model):
    pass


def _run(model):
    (x, y), val = train_val()
    rec = Recorder()
    history = model.fit(x, y, epochs=2, batch_size=BATCH, shuffle=False, validation_data=val,
                        callbacks=[rec], verbose=0)
    return {
        "history": history.history,
        "events": rec.events,
        "weights": model.get_weights(),
        "evaluate": model.evaluate(*val, batch_size=BATCH, verbose=0, return_dict=True),
        "predict": model.predict(val[0], batch_size=BATCH, verbose=0),
    }


@pytest.fixture(scope="module")
def runs():
    models = []
    for cls in (CustomOnIPU, CustomOnCPU):
        keras.utils.set_random_seed(3)
        model = cls()
        model(np.zeros((1,) + SHAPE, np.float32))
        models.append(compile_model(model, "adam"))
    models[1].set_weights(models[0].get_weights())
    return [_run(m) for m in models]


def test_custom_train_step_matches_keras(runs):
    on_ipu, on_cpu = runs
    assert "grad_norm" in on_ipu["history"]
    assert_history_equal(on_ipu["history"], on_cpu["history"])
    assert_weights_equal(on_ipu["weights"], on_cpu["weights"])


def test_custom_logs_reach_the_callbacks(runs):
    on_ipu, on_cpu = runs
    # 200 samples in batches of 32: 7 batches; validation, 50: 2 batches.
    assert_events_equal(on_ipu["events"], events_as_run(on_cpu["events"], 7, 2))


def test_custom_test_step_matches_keras(runs):
    on_ipu, on_cpu = runs
    assert "half_loss" in on_ipu["evaluate"]
    assert_logs_equal(on_ipu["evaluate"], on_cpu["evaluate"])


def test_custom_predict_step_matches_keras(runs):
    on_ipu, on_cpu = runs
    assert sorted(on_ipu["predict"]) == ["label", "probs"]
    T.FLOAT32.assert_close(on_ipu["predict"]["probs"], on_cpu["predict"]["probs"])
    np.testing.assert_array_equal(on_ipu["predict"]["label"], on_cpu["predict"]["label"])
    assert on_ipu["predict"]["label"].dtype == np.int32
