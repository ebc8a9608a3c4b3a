"""`pipelining_ops.pipeline` against TensorFlow on the CPU, and every rule it checks.

The oracle is the unpipelined accumulated training: a plain TensorFlow loop on the CPU
over the same micro-batches, gradients reduced the same way and applied once per run.
"""
import keras
import numpy as np
import pytest
import tensorflow as tf

import ipu_keras as ipu
from tests.conftest import configured_ipus
from ipu_keras._src.driver import executor as _executor
from ipu_keras.ops import pipelining_ops as po
from ipu_keras.errors import PipelineError
from ipu_keras._src.conformance import tolerances as T

G, RUNS, BATCH = 8, 2, 4
RNG = np.random.default_rng(0)
X = RNG.normal(size=(64, 8)).astype(np.float32)
Y = RNG.integers(0, 4, 64).astype(np.int32)


@pytest.fixture(autouse=True)
def two_ipus():
    yield from configured_ipus(2, tiles_per_ipu=16)


def dataset():
    return tf.data.Dataset.from_tensor_slices((X, Y)).batch(BATCH, drop_remainder=True).repeat()


def make_layers():
    keras.utils.set_random_seed(1)
    l1, l2 = keras.layers.Dense(16, activation="relu"), keras.layers.Dense(4)
    l1.build((None, 8))
    l2.build((None, 16))
    return l1, l2, keras.optimizers.SGD(0.1)


def loss_of(logits, y):
    return tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, logits,
                                                                       from_logits=True))


def cpu_reference(reduction):
    """Accumulated training on the CPU: losses per micro-batch and final weights."""
    l1, l2, opt = make_layers()
    variables = l1.trainable_variables + l2.trainable_variables
    iterator, losses = iter(dataset()), []
    for _ in range(RUNS):
        acc = [tf.zeros_like(v) for v in variables]
        for _ in range(G):
            x, y = next(iterator)
            with tf.GradientTape() as tape:
                loss = loss_of(l2(l1(x)), y)
            grads = tape.gradient(loss, variables)
            scale = 1.0 if reduction == "SUM" else 1.0 / G
            acc = [a + g * scale for a, g in zip(acc, grads)]
            losses.append(loss.numpy())
        opt.apply_gradients(zip(acc, variables))
    return np.array(losses), l1.get_weights() + l2.get_weights()


def run_pipeline(schedule=None, reduction="MEAN", **kwargs):
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        l1, l2, opt = make_layers()
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset())
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        def stage1(x, y):
            return l1(x), y

        def stage2(h, y):
            return l2(h), y

        def optimizer_function(logits, y):
            return po.OptimizerFunctionOutput(opt, loss_of(logits, y))

        def net():
            return po.pipeline([stage1, stage2], gradient_accumulation_count=G,
                               repeat_count=RUNS, infeed_queue=infeed, outfeed_queue=outfeed,
                               optimizer_function=optimizer_function, outfeed_loss=True,
                               pipeline_schedule=schedule, reduction_method=reduction, **kwargs)

        strategy.run(net)
        losses = outfeed.dequeue()
    return np.asarray(losses), l1.get_weights() + l2.get_weights(), opt


@pytest.fixture(scope="module")
def mean_reference():
    return cpu_reference("MEAN")


@pytest.mark.parametrize("schedule", list(po.PipelineSchedule))
def test_each_schedule_trains_as_the_unpipelined_accumulated_loop(schedule, mean_reference):
    losses, weights, opt = run_pipeline(schedule)
    ref_losses, ref_weights = mean_reference
    np.testing.assert_allclose(losses, ref_losses, **T.FLOAT32.kwargs)
    for got, expected in zip(weights, ref_weights):
        np.testing.assert_allclose(got, expected, **T.FLOAT32.kwargs)
    assert int(opt.iterations.numpy()) == RUNS    # one weight update per pipeline run
    executable = _executor.last_compiled().executable
    assert executable.target["num_ipus"] == 2


@pytest.mark.slow
@pytest.mark.parametrize("reduction", ["SUM", "RUNNING_MEAN"])
def test_sum_and_running_mean_reductions(reduction):
    losses, weights, _ = run_pipeline(reduction=reduction)
    ref_losses, ref_weights = cpu_reference("SUM" if reduction == "SUM" else "MEAN")
    np.testing.assert_allclose(losses, ref_losses, **T.FLOAT32.kwargs)
    for got, expected in zip(weights, ref_weights):
        np.testing.assert_allclose(got, expected, **T.FLOAT32.kwargs)


def test_inference_pipeline_with_an_accumulated_outfeed():
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        l1, l2, _ = make_layers()
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset())
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        def net():
            return po.pipeline([lambda x, y: l1(x), lambda h: l2(h)],
                               gradient_accumulation_count=2, repeat_count=3,
                               infeed_queue=infeed, outfeed_queue=outfeed,
                               accumulate_outfeed=True)

        strategy.run(net)
        (sums,) = outfeed.dequeue()     # accumulated results leave as a list, as the SDK's
        sums = np.asarray(sums)
    logits = l2(l1(X[:24])).numpy().reshape(3, 2, BATCH, 4)
    np.testing.assert_allclose(sums, logits.sum(axis=1), **T.FLOAT32.kwargs)


def _traced_error(**kwargs):
    l1, l2, opt = make_layers()
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    base = dict(computational_stages=[lambda x: l1(x), lambda h: l2(h)],
                gradient_accumulation_count=4, inputs=[tf.constant(X[:4])],
                outfeed_queue=outfeed)
    base.update(kwargs)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        strategy.run(lambda: po.pipeline(**base))


@pytest.mark.parametrize("kwargs, error, pattern", [
    (dict(computational_stages=[lambda x: x]), PipelineError, "at least two computational"),
    (dict(gradient_accumulation_count=None), PipelineError, "must be specified"),
    (dict(device_mapping=[0]), PipelineError, r"1 mappings != 2 stages"),
    (dict(device_mapping=(0, 1)), TypeError, "needs to be a list"),
    (dict(gradient_accumulation_count=3), PipelineError,
     r"must be a multiple of 2, but it is 3\. .*`gradient_accumulation_steps_per_replica`"),
    (dict(gradient_accumulation_count=6, optimizer_function=lambda h: None), PipelineError,
     "must be a multiple of 4, but it is 6"),
    (dict(gradient_accumulation_count=2, optimizer_function=lambda h: None), PipelineError,
     "must be at least 4, but it is 2"),
    (dict(gradient_accumulation_count=4, pipeline_schedule=po.PipelineSchedule.Interleaved,
          device_mapping=[0, 0], optimizer_function=lambda h: None), NotImplementedError,
     "Interleaved"),
    (dict(outfeed_queue=None), PipelineError, "no outfeed_queue has been provided"),
    (dict(outfeed_loss=True), PipelineError, "outfeed_loss expected a training pipeline"),
    (dict(forward_propagation_stages_poplar_options=[po.PipelineStageOptions()]),
     PipelineError, "one PipelineStageOptions per stage"),
    (dict(reduction_method="median"), ValueError, "Valid values are: SUM, MEAN, RUNNING_MEAN"),
])
def test_rules_of_the_original(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        _traced_error(**kwargs)


def test_sequential_inference_accepts_any_depth():
    _traced_error(gradient_accumulation_count=3,
                  pipeline_schedule=po.PipelineSchedule.Sequential)


def test_a_stage_capturing_an_outside_tensor_is_refused():
    l1, l2, _ = make_layers()

    def net():
        outside = tf.constant(X[:4]) * 2.0       # computed, not a constant or a variable
        return po.pipeline([lambda x: l1(x) + outside[:, :1], lambda h: l2(h)],
                           gradient_accumulation_count=2, inputs=[tf.constant(X[:4])],
                           outfeed_queue=ipu.ipu_outfeed_queue.IPUOutfeedQueue())

    with pytest.raises(PipelineError, match="Trying to capture the tensor .* not a resource"):
        ipu.ipu_strategy.IPUStrategy().run(net)


def test_the_module_is_also_ipu_ops_pipelining_ops():
    from ipu_keras.ops import pipelining_ops

    assert pipelining_ops is po and ipu.pipelining_ops is po
    assert po.PipelineSchedule.Grouped == 0 and po.PipelineSchedule.Sequential == 2
    assert po.recomputation_checkpoint(tf.constant(1.0)).numpy() == 1.0


def test_the_pipeline_time_is_the_schedule_makespan():
    run_pipeline(po.PipelineSchedule.Grouped)
    executable = _executor.last_compiled().executable
    (info,) = executable.info["pipelines"]
    assert info["schedule"] == "Grouped" and info["depth"] == G
    assert [(r["stage"], r["ipu"]) for r in info["stages"]] == [(0, 0), (1, 1)]
    assert all(r["forward"] > 0 and r["backward"] > 0 for r in info["stages"])
    body = next(b for b in executable.blocks if b.pipeline is not None)
    per_run = sum(body.cycles.values()) * G
    assert abs(per_run - info["makespan_cycles"]) <= 4 * G    # rounding of the scaled kinds
    assert {i["ipu"] for i in info["ipus"]} == {0, 1}


def test_report_of_a_two_ipu_pipeline_shows_ipus_and_the_timeline(tmp_path):
    import json
    import os

    from ipu_keras import profiling
    from ipu_keras._src.reports import summary

    profiling.enable_reports(tmp_path)
    try:
        run_pipeline(po.PipelineSchedule.Grouped)
    finally:
        profiling.write_report()        # flush: leave no pending trace to later tests
        profiling.disable_reports()
    (entry,) = os.listdir(tmp_path)
    path = os.path.join(tmp_path, entry)
    report = json.load(open(os.path.join(path, "report.json")))
    assert len(report["ipus"]["ipu_memory"]) == 2
    (pipeline,) = report["ipus"]["pipelines"]
    passes = [b for b in pipeline["timeline"] if b[3] != "O"]
    assert len(passes) == 2 * 2 * G      # stage x pass x micro-batch boxes
    # the work of no stage is boxes too, so the boxes end at the makespan
    assert max(b[5] for b in pipeline["timeline"]) == pipeline["makespan_cycles"]
    text = summary.summarise(report)
    assert "pipeline (Grouped, 2 stages, depth 8)" in text and "IPU 1: busy" in text
    page = open(os.path.join(path, "report.html")).read()
    assert "IPUs and pipeline" in page and "alt='timeline.png'" in page
    assert os.path.getsize(os.path.join(path, "timeline.png")) > 1000


def test_stage_options_reach_the_planner_of_their_stage_and_pass():
    from ipu_keras.errors import ConfigurationError

    bad = po.PipelineStageOptions(matmul_options={"availableMemoryProportion": "2"})
    with pytest.raises(ConfigurationError, match="forward stage 1 matmul options"):
        run_pipeline(forward_propagation_stages_poplar_options=[po.PipelineStageOptions(),
                                                                bad])
    with pytest.raises(ConfigurationError, match="backward stage 0 matmul options"):
        run_pipeline(backward_propagation_stages_poplar_options=[bad, po.PipelineStageOptions()])
