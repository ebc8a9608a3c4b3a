"""Replicated Keras models against Keras on the CPU, with Graphcore's semantics.

R replicas each take one batch of B samples per step (batch r of each group of R
consecutive batches) and compute the mean loss of their own batch; the gradients are
summed across replicas (IPU Keras did not divide the loss by R). One update is then
R times the gradient of the mean loss over the R x B samples, so the reference is
Keras on the CPU with batches of R x B samples and the learning rate times R (SGD). With
MEAN reduction, a step's logged loss and metrics are the mean of the replicas' running
means, which over equal batches is the CPU's running mean on the big batches.
"""
import keras
import numpy as np
import pytest

import ipu_keras as ipu
from ipu_keras._src.conformance import tolerances as T
from ipu_keras.errors import ReplicationError

B, STEPS, LR = 8, 8, 0.05


@pytest.fixture
def replicas(request):
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = request.param
    cfg.configure_ipu_system()
    yield request.param
    ipu.config.reset_ipu_configuration()


def _layers(arch):
    if arch == "mlp":
        return [keras.Input((12,)), keras.layers.Dense(16, activation="relu"),
                keras.layers.Dense(3)]
    return [keras.Input((8, 8, 1)), keras.layers.Conv2D(4, 3, activation="relu"),
            keras.layers.MaxPooling2D(), keras.layers.Flatten(), keras.layers.Dense(3)]


def _data(arch, n):
    rng = np.random.default_rng(0)
    shape = (12,) if arch == "mlp" else (8, 8, 1)
    return rng.standard_normal((n,) + shape).astype("float32"), rng.integers(0, 3, n)


def _model(cls, arch, lr, spe=1):
    keras.utils.set_random_seed(1)
    model = cls(_layers(arch))
    model.compile(keras.optimizers.SGD(lr),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], steps_per_execution=spe)
    return model


@pytest.mark.parametrize("replicas", [2, 4], indirect=True)
@pytest.mark.parametrize("arch", ["mlp", "cnn"])
def test_fit_evaluate_predict_equal_keras_on_the_global_batch(replicas, arch):
    x, y = _data(arch, replicas * B * STEPS)
    model = _model(ipu.Sequential, arch, LR, spe=4)
    model.set_replication_options("MEAN")
    history = model.fit(x, y, batch_size=B, epochs=2, shuffle=False, verbose=0)
    cpu = _model(keras.Sequential, arch, LR * replicas)
    cpu_history = cpu.fit(x, y, batch_size=B * replicas, epochs=2, shuffle=False, verbose=0)
    for key in ("loss", "accuracy"):
        T.FLOAT32.assert_close(history.history[key], cpu_history.history[key], err_msg=key)
    for got, expected in zip(model.get_weights(), cpu.get_weights()):
        T.FLOAT32.assert_close(got, expected)
    assert model.ipu_report()["steps"] == 4
    T.FLOAT32.assert_close(model.evaluate(x, y, batch_size=B, verbose=0),
                           cpu.evaluate(x, y, batch_size=B * replicas, verbose=0))
    predictions = model.predict(x, batch_size=B, verbose=0)   # in dataset order
    T.FLOAT32.assert_close(predictions, cpu.predict(x, verbose=0))


@pytest.mark.parametrize("replicas", [2], indirect=True)
def test_the_logs_of_the_replicas_are_reduced_as_asked(replicas):
    x, y = _data("mlp", replicas * B * STEPS)
    model = _model(ipu.Sequential, "mlp", LR, spe=2)
    model.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0)
    results = {}
    for method in ("NONE", "LIST", "SUM", "MEAN"):
        model.set_replication_options(replicated_metric_reduction_method=method)
        results[method] = model.evaluate(x, y, batch_size=B, verbose=0, return_dict=True)
    per_replica = np.asarray(results["LIST"]["loss"])
    assert per_replica.shape == (replicas,)
    T.FLOAT32.assert_close(results["NONE"]["loss"], per_replica[-1])
    T.FLOAT32.assert_close(results["SUM"]["loss"], per_replica.sum())
    T.FLOAT32.assert_close(results["MEAN"]["loss"], per_replica.mean())
    # Replica r evaluated batches r, r + R, ...: its loss is the CPU's on those batches.
    batches = x.reshape(STEPS, replicas, B, 12)
    labels = y.reshape(STEPS, replicas, B)
    cpu = _model(keras.Sequential, "mlp", LR)
    cpu.set_weights(model.get_weights())
    for r in range(replicas):
        expected = cpu.evaluate(batches[:, r].reshape(-1, 12), labels[:, r].reshape(-1),
                                batch_size=B, verbose=0)[0]
        T.FLOAT32.assert_close(per_replica[r], expected)
    with pytest.raises(ValueError, match="NONE, LIST, SUM, MEAN"):
        model.set_replication_options(replicated_metric_reduction_method="MAX")


@pytest.mark.parametrize("replicas", [4], indirect=True)
def test_data_too_short_for_the_replicas_is_refused_with_the_numbers(replicas):
    x, y = _data("mlp", 3 * B)
    model = _model(ipu.Sequential, "mlp", LR, spe=2)
    with pytest.raises(ReplicationError, match=r"only 3 batch\(es\).*4 x steps_per_execution "
                                               r"= 8"):
        model.fit(x, y, batch_size=B, epochs=1, verbose=0)


@pytest.mark.parametrize("replicas", [2], indirect=True)
def test_a_keras_model_in_the_strategy_scope_is_replicated(replicas):
    x, y = _data("mlp", replicas * B * STEPS)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = _model(keras.Sequential, "mlp", LR, spe=8)
        model.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0)
    cpu = _model(keras.Sequential, "mlp", LR * replicas)
    cpu.fit(x, y, batch_size=B * replicas, epochs=1, shuffle=False, verbose=0)
    for got, expected in zip(model.get_weights(), cpu.get_weights()):
        T.FLOAT32.assert_close(got, expected)


@pytest.mark.slow
@pytest.mark.parametrize("replicas", [4], indirect=True)
def test_two_pipeline_stages_on_four_ipus_are_two_replicas_of_the_pipeline(replicas):
    G = 4
    x, y = _data("mlp", 2 * G * B * 4)
    model = _model(ipu.Sequential, "mlp", LR, spe=G * 2)
    model.set_pipeline_stage_assignment([0, 1])
    model.set_pipelining_options(gradient_accumulation_steps_per_replica=G,
                                 gradient_accumulation_reduction_method="mean")
    model.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0)
    assert model.train_function.last_program.session.replicas == 2
    # Per update: the mean over G micro-batches, summed over 2 replicas.
    cpu = _model(keras.Sequential, "mlp", LR * 2)
    cpu.fit(x, y, batch_size=B * G * 2, epochs=1, shuffle=False, verbose=0)
    for got, expected in zip(model.get_weights(), cpu.get_weights()):
        T.FLOAT32.assert_close(got, expected)
