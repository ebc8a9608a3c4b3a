"""Every deprecated SDK name works and warns exactly once; the compatibility table is current."""
import pathlib
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from ipu_keras import compat
from ipu_keras._src.conformance import tolerances as T

DOC = pathlib.Path(__file__).parents[2] / "docs" / "compatibility.md"


def _dataset():
    return tf.data.Dataset.from_tensor_slices(np.zeros((4, 2), np.float32)).batch(
        2, drop_remainder=True)


def _strategy_v1():
    return ipu.ipu_strategy.IPUStrategyV1()


def _run_v2():
    return ipu.ipu_strategy.IPUStrategy().experimental_run_v2(tf.function(lambda: tf.ones(2)))


def _functional():
    inputs = keras.Input((2,))
    return inputs, keras.layers.Dense(1)(inputs)


def _opts():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return ipu.utils.create_ipu_config()


# Each deprecated name of the table, and a call that uses it.
USES = {
    "ipu.ipu_strategy.IPUStrategyV1": _strategy_v1,
    "ipu.ipu_strategy.IPUStrategy.experimental_run_v2": _run_v2,
    "ipu.ipu_infeed_queue.IPUInfeedQueue(feed_name=)":
        lambda: ipu.ipu_infeed_queue.IPUInfeedQueue(_dataset(), "infeed"),
    "ipu.ipu_infeed_queue.IPUInfeedQueue(replication_factor=)":
        lambda: ipu.ipu_infeed_queue.IPUInfeedQueue(_dataset(), replication_factor=1),
    "ipu.ipu_infeed_queue.IPUInfeedQueue(data_to_prefetch=)":
        lambda: ipu.ipu_infeed_queue.IPUInfeedQueue(_dataset(), "in", 0, 1, 1),
    "ipu.ipu_outfeed_queue.IPUOutfeedQueue(feed_name=)":
        lambda: ipu.ipu_outfeed_queue.IPUOutfeedQueue("outfeed"),
    "ipu.ipu_outfeed_queue.IPUOutfeedQueue(outfeed_all_replicas=)":
        lambda: ipu.ipu_outfeed_queue.IPUOutfeedQueue("out", None, True),
    "ipu.ipu_outfeed_queue.IPUOutfeedQueue(replication_factor=)":
        lambda: ipu.ipu_outfeed_queue.IPUOutfeedQueue(replication_factor=1),
    "ipu.ipu_outfeed_queue.IPUOutfeedQueue(io_batch_size=)":
        lambda: ipu.ipu_outfeed_queue.IPUOutfeedQueue(feed_name="out", io_batch_size=1),
    "ipu.utils.create_ipu_config": lambda: ipu.utils.create_ipu_config(profiling=True),
    "ipu.utils.auto_select_ipus": lambda: ipu.utils.auto_select_ipus(_opts(), 1),
    "ipu.utils.select_ipus": lambda: ipu.utils.select_ipus(_opts(), [0]),
    "ipu.utils.set_ipu_model_options":
        lambda: ipu.utils.set_ipu_model_options(_opts(), tiles_per_ipu=4),
    "ipu.utils.set_matmul_options": lambda: ipu.utils.set_matmul_options(
        _opts(), {"availableMemoryProportion": "0.3"}),
    "ipu.utils.set_convolution_options": lambda: ipu.utils.set_convolution_options(
        _opts(), {"partialsType": "half"}),
    "ipu.utils.set_floating_point_behaviour_options":
        lambda: ipu.utils.set_floating_point_behaviour_options(_opts()),
    "ipu.utils.set_recomputation_options": lambda: ipu.utils.set_recomputation_options(_opts()),
    "ipu.utils.configure_ipu_system(create_ipu_config())":
        lambda: ipu.utils.configure_ipu_system(_opts()),
    "ipu.keras.layers.<name>": lambda: ipu.keras.layers.Flatten(),
    "ipu.keras.Sequential(gradient_accumulation_dtype=)": lambda: ipu.keras.Sequential(
        [keras.layers.Dense(1)], gradient_accumulation_dtype=tf.float32),
    "ipu.keras.Model(gradient_accumulation_dtype=)": lambda: ipu.keras.Model(
        *_functional(), gradient_accumulation_dtype=tf.float32),
}
ELSEWHERE = {  # tested in test_sdk21_accumulation.py (needs the accumulation work)
    "ipu.keras.Model(gradient_accumulation_count=)",
    "ipu.keras.Sequential(gradient_accumulation_count=)",
    # tested in test_sdk20_pipeline_models.py
    "ipu.keras.PipelineModel",
    "ipu.keras.PipelineSequential",
    # tested in tests/serving/ (test_single_step.py, test_pipeline_keras.py)
    "ipu.serving.export_single_step(input_signature=)",
    "ipu.serving.export_pipeline(input_signature=)",
}


@pytest.fixture(autouse=True)
def _restore_config():
    yield
    ipu.config.reset_ipu_configuration()


def test_every_deprecated_name_has_a_use_here():
    deprecated = {name for name, status, *_ in compat.rows() if status == compat.DEPRECATED}
    assert deprecated == set(USES) | ELSEWHERE


@pytest.mark.parametrize("name", sorted(USES))
def test_deprecated_name_works_and_warns_once(name, fresh_warnings):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        USES[name]()
        USES[name]()
    spelled = "`" + name.replace("<name>", "Flatten") + "`"
    ours = [w for w in caught if issubclass(w.category, DeprecationWarning)
            and str(w.message).startswith(spelled)]
    assert len(ours) == 1, [str(w.message) for w in ours]
    assert ours[0].filename == __file__  # points at the caller's line


def test_old_layers_forward_to_keras_when_addons_lack_the_name(fresh_warnings):
    with pytest.warns(DeprecationWarning, match="use `keras.layers.Dense`"):
        assert ipu.keras.layers.Dense is keras.layers.Dense
    with pytest.raises(AttributeError, match="neither"):
        ipu.keras.layers.NoSuchLayer


def test_sdk21_script_with_create_ipu_config(fresh_warnings):
    """An SDK 2.1 script: old configuration, IPUStrategyV1, ipu.keras.Sequential, fit."""
    with pytest.warns(DeprecationWarning):
        cfg = ipu.utils.create_ipu_config()
        cfg = ipu.utils.auto_select_ipus(cfg, 1)
        cfg = ipu.utils.set_ipu_model_options(cfg, compile_ipu_code=False, tiles_per_ipu=8)
        ipu.utils.configure_ipu_system(cfg)
        strategy = ipu.ipu_strategy.IPUStrategyV1()
    active = ipu.config.get_active_config()
    assert active.auto_select_ipus == 1 and active.ipu_model.tiles_per_ipu == 8
    assert active.ipu_model.compile_ipu_code is False

    rng = np.random.default_rng(0)
    x = rng.random((32, 6), dtype=np.float32)
    y = rng.integers(0, 3, 32).astype(np.int32)
    with strategy.scope():
        model = ipu.keras.Sequential([keras.Input((6,)), keras.layers.Dense(3)])
        model.compile(keras.optimizers.SGD(0.1),
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        weights = model.get_weights()
        history = model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)
    assert model.train_function.last_program.target.tiles_per_ipu == 8  # the old config ran

    reference = keras.Sequential([keras.Input((6,)), keras.layers.Dense(3)])
    reference.set_weights(weights)
    reference.compile(keras.optimizers.SGD(0.1),
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      run_eagerly=True)
    expected = reference.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)
    T.FLOAT32.assert_close(history.history["loss"], expected.history["loss"])


def test_old_options_functions_reject_an_ipuconfig():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(ipu.errors.ConfigurationError, match="create_ipu_config"):
            ipu.utils.auto_select_ipus(ipu.config.IPUConfig(), 1)


def test_compatibility_table_is_current():
    assert DOC.read_text() == compat.markdown(), (
        "docs/compatibility.md is stale: run `python -m ipu_keras.compat > "
        "docs/compatibility.md`")
