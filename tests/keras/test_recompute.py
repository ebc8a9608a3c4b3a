"""Recomputation in a pipelined Keras model (`IPUConfig.allow_recompute` and
`set_pipelining_options(recomputation_mode=...)`).

A Keras MLP in three pipeline stages on one IPU (device mapping [0, 0, 0]), as
Graphcore's MLPerf ResNet-50 runs its four stages: trained with and without
recomputation, it must reach the same weights bit for bit (the recomputed forward
values are the same kernels on the same operands), while the backward passes of the
stages before the last recompute their activations: more cycles, fewer bytes live.
"""
import keras
import numpy as np
import pytest

import ipu_keras as ipu
from ipu_keras._src.keras.trainer import _last_program
from ipu_keras._src.reports.timeline import ipu_lines, ipus_section
from ipu_keras.ops import pipelining_ops as po
from tests.conftest import configured

G, MICRO, STEPS = 2, 64, 4


def _train(schedule, mode, recompute, g=G, steps=STEPS):
    with configured(1, 64, allow_recompute=recompute):
        keras.utils.set_random_seed(1)
        model = ipu.Sequential([
            keras.Input((32,)), keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(64, activation="tanh"), keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10)])
        model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      steps_per_execution=steps)
        model.set_pipeline_stage_assignment([0, 1, 1, 2])
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=g,
                                     device_mapping=[0, 0, 0], pipeline_schedule=schedule,
                                     recomputation_mode=mode)
        rng = np.random.default_rng(0)
        x = rng.random((steps * MICRO, 32)).astype("float32")
        y = rng.integers(0, 10, steps * MICRO)
        history = model.fit(x, y, batch_size=MICRO, epochs=1, shuffle=False, verbose=0)
        return model.get_weights(), history.history["loss"], _last_program(model).executable


@pytest.fixture(scope="module")
def sequential():
    """(off, on) of the Sequential schedule, mode Auto."""
    return [_train(po.PipelineSchedule.Sequential, po.RecomputationMode.Auto, on)
            for on in (False, True)]


@pytest.mark.slow
def test_training_with_recomputation_reaches_the_same_weights(sequential):
    (w_off, loss_off, _), (w_on, loss_on, _) = sequential
    assert loss_on == loss_off
    for a, b in zip(w_off, w_on):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_the_stages_before_the_last_recompute_their_forward_pass(sequential):
    (_, _, off), (_, _, on) = sequential
    (rows_off,), (rows_on,) = ([p["stages"] for p in e.info["pipelines"]] for e in (off, on))
    assert [r["recompute"] > 0 for r in rows_on] == [True, True, False]
    for r_off, r_on in zip(rows_off, rows_on):
        assert r_on["forward"] == r_off["forward"]
        # The backward pass rises by the recomputation, give or take the exchanges of
        # its readers, which now read the copies where the tile map put them.
        rest = r_on["backward"] - r_on["recompute"]
        assert abs(rest - r_off["backward"]) <= 0.05 * r_off["backward"]
    # At the turn from forward to backward (the loss), what the stages before the last
    # kept for their backward passes beyond their inputs and outputs is gone: stage 0
    # (dense + relu) keeps only its input and its output (relu_grad reads the output);
    # stage 1 (dense_1 + tanh, dense_2 + relu) recomputes the tanh output dense_2's
    # kernel gradient reads: one [MICRO, 64] float32 activation.
    turn = off.info["loop_liveness_steps"].index("sparse_softmax_xent")
    assert on.info["loop_liveness_steps"][turn] == "sparse_softmax_xent"
    drop = off.memory["loop_liveness"][turn] - on.memory["loop_liveness"][turn]
    assert drop == MICRO * 64 * 4
    assert max(on.memory["loop_liveness"]) <= max(off.memory["loop_liveness"])
    lines = ipu_lines({"ipus": ipus_section(on)})
    assert f"(recomputing the forward pass: {rows_on[1]['recompute']:,})" in "\n".join(lines)


@pytest.mark.slow
def test_recompute_then_backpropagate_trains_the_same_under_grouped():
    (w_off, _, _), (w_on, _, on) = [
        _train("Grouped", "RecomputeThenBackpropagate", flag, g=6, steps=6)
        for flag in (False, True)]   # Grouped: a depth of at least 2 x 3 stages
    for a, b in zip(w_off, w_on):
        np.testing.assert_array_equal(a, b)
    (plan,) = on.info["pipelines"]
    assert [r["recompute"] > 0 for r in plan["stages"]] == [True, True, False]


def test_an_unknown_recomputation_mode_is_refused():
    from ipu_keras.errors import PipelineError

    model = ipu.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    with pytest.raises(ValueError, match="recomputation_mode='Sometimes'"):
        model.set_pipelining_options(recomputation_mode="Sometimes")
    with pytest.raises(PipelineError, match="recomputation_mode='Sometimes'"):
        po.pipeline([lambda x: x, lambda x: x], gradient_accumulation_count=2,
                    recomputation_mode="Sometimes")


# -- pipelining_ops.pipeline and recomputation_checkpoint ---------------------------------


def _pipeline(recompute, checkpoint, mode=None, schedule=po.PipelineSchedule.Sequential):
    """Two stages on one IPU (three dense layers, then one); weights, executable."""
    import tensorflow as tf

    with configured(1, 64, allow_recompute=recompute):
        keras.utils.set_random_seed(2)
        layers = [keras.layers.Dense(48, activation="tanh") for _ in range(3)]
        layers.append(keras.layers.Dense(10))
        for layer, width in zip(layers, (32, 48, 48, 48)):
            layer.build((None, width))
        opt = keras.optimizers.SGD(0.1)
        rng = np.random.default_rng(3)
        data = tf.data.Dataset.from_tensor_slices((
            rng.random((4 * MICRO, 32)).astype("float32"),
            rng.integers(0, 10, 4 * MICRO).astype("int32")))
        data = data.batch(MICRO, drop_remainder=True).repeat()
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(data)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        def stage0(x, y):
            h = layers[0](x)
            if checkpoint:
                h = po.recomputation_checkpoint(h)
            return layers[2](layers[1](h)), y

        def stage1(h, y):
            return layers[3](h), y

        def optimizer_function(logits, y):
            return po.OptimizerFunctionOutput(opt, tf.reduce_mean(
                keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True)))

        strategy = ipu.ipu_strategy.IPUStrategy()
        with strategy.scope():
            strategy.run(lambda: po.pipeline(
                [stage0, stage1], gradient_accumulation_count=4, infeed_queue=infeed,
                outfeed_queue=outfeed, optimizer_function=optimizer_function,
                outfeed_loss=True, device_mapping=[0, 0], pipeline_schedule=schedule,
                recomputation_mode=mode))
        from ipu_keras._src.driver import executor
        return ([w for layer in layers for w in layer.get_weights()],
                executor.last_compiled().executable)


@pytest.fixture(scope="module")
def low_level():
    return {(on, mark): _pipeline(on, mark) for on, mark in
            ((False, False), (True, False), (True, True))}


def _recompute_cycles(exe):
    (plan,) = exe.info["pipelines"]
    return [r["recompute"] for r in plan["stages"]]


@pytest.mark.slow
def test_a_checkpoint_shortens_the_recomputation_and_no_number_changes(low_level):
    plain, _ = low_level[False, False]
    for key in ((True, False), (True, True)):
        for a, b in zip(plain, low_level[key][0]):
            np.testing.assert_array_equal(a, b)
    whole = _recompute_cycles(low_level[True, False][1])
    checkpointed = _recompute_cycles(low_level[True, True][1])
    assert whole[1] == checkpointed[1] == 0          # the last stage: nothing recomputed
    assert 0 < checkpointed[0] < whole[0]            # from the checkpoint, not the input
    views = {row[8] for row in low_level[True, True][1].info["tensor_map"] if row[1] == "view"}
    assert "recomputation_checkpoint" in views


def test_a_mode_the_schedule_does_not_support_fails_to_compile():
    from ipu_keras.errors import PipelineError

    with pytest.raises(PipelineError, match="does not support the RecomputeThenBackpropagate"):
        _pipeline(True, False, po.RecomputationMode.RecomputeThenBackpropagate)
