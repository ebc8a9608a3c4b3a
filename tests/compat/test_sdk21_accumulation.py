"""SDK 2.1's `ipu.keras.Sequential/Model(..., gradient_accumulation_count=n)`.

Forwarded to `set_gradient_accumulation_options(gradient_accumulation_steps_per_replica=n)`,
which the gradient-accumulation work adds to the trainer mixin (branch `accumulation`):
these tests need it merged.
"""
import warnings

import keras
import numpy as np
import pytest

import ipu_keras as ipu

N, BATCH, COUNT = 32, 4, 2


def _data():
    rng = np.random.default_rng(0)
    return rng.random((N, 5), dtype=np.float32), rng.integers(0, 3, N).astype(np.int32)


def _fit(model, weights):
    model.set_weights(weights)
    model.compile(keras.optimizers.SGD(0.1),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=COUNT * 2)
    x, y = _data()
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, shuffle=False)
    return model.get_weights()


def _layers():
    return [keras.Input((5,)), keras.layers.Dense(3)]


def _functional(**kwargs):
    inputs = keras.Input((5,))
    return ipu.keras.Model(inputs, keras.layers.Dense(3)(inputs), **kwargs)


@pytest.mark.parametrize("form", ["Sequential", "Model"])
def test_gradient_accumulation_count_forwards_and_warns_once(form, fresh_warnings):
    build = ((lambda **kw: ipu.keras.Sequential(_layers(), **kw)) if form == "Sequential"
             else _functional)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = build(gradient_accumulation_count=COUNT)
        build(gradient_accumulation_count=COUNT)
    said = [w for w in caught if str(w.message).startswith(
        f"`ipu.keras.{form}(gradient_accumulation_count=)`")]
    assert len(said) == 1 and "gradient_accumulation_steps_per_replica" in str(said[0].message)

    new = build()
    new.set_gradient_accumulation_options(gradient_accumulation_steps_per_replica=COUNT)
    plain = build()
    weights = plain.get_weights()
    got, want, unaccumulated = _fit(old, weights), _fit(new, weights), _fit(plain, weights)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert any(not np.allclose(a, b) for a, b in zip(got, unaccumulated))


def test_sdk21_script_configures_and_accumulates(fresh_warnings):
    """An SDK 2.1 script unchanged but for its imports: old configuration, IPUStrategyV1,
    `ipu.keras.Sequential(..., gradient_accumulation_count=)`, fit."""
    with pytest.warns(DeprecationWarning):
        cfg = ipu.utils.create_ipu_config()
        cfg = ipu.utils.auto_select_ipus(cfg, 1)
        ipu.utils.configure_ipu_system(cfg)
        strategy = ipu.ipu_strategy.IPUStrategyV1()
    try:
        with strategy.scope():
            with pytest.warns(DeprecationWarning, match="gradient_accumulation_count"):
                model = ipu.keras.Sequential(_layers(), gradient_accumulation_count=COUNT)
            explicit = ipu.keras.Sequential(_layers())
            explicit.set_gradient_accumulation_options(
                gradient_accumulation_steps_per_replica=COUNT)
            weights = model.get_weights()
            got, want = _fit(model, weights), _fit(explicit, weights)
    finally:
        ipu.config.reset_ipu_configuration()
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
