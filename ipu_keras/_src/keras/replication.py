"""Replicated Keras models: R copies of the step, each on its own batches.

With more IPUs than the model's shards (1, or a pipeline's IPUs rounded up to a power
of two), `fit`, `evaluate` and `predict` run R = IPUs / shards replicas, as Graphcore's
IPU Keras did:

* `steps_per_execution` and an epoch's steps count per replica: one step takes R
  consecutive batches, batch r to replica r. While Keras runs, the model's
  `steps_per_execution` is R times larger (`batches_per_execution`), so Keras hands
  over R x `steps_per_execution` batches per execution and counts batches; an epoch of
  N batches is N / R steps, and a trailing group of fewer than R batches is dropped
  with a warning.
* Training sums the replicas' gradients (`cross_replica_sum` before the optimizer, or
  before the accumulator when accumulating). Each replica's loss is the mean over its
  own batch and is not divided by R, so one update is R times the update of one batch
  of R x B samples at the same learning rate: divide the learning rate by R to train
  as on a single device with the global batch (the log line says so).
* The logs of a step come back per replica and are reduced by
  `set_replication_options(replicated_metric_reduction_method=...)`: NONE (the last
  replica's), LIST (one value per replica), SUM or MEAN. Each replica keeps its own
  metric state between executions of an epoch, and the model's metric results (what
  Keras reports at the end of an epoch or of `evaluate`) are the last step's reduced
  logs, not replica 0's metric variables.
* `predict` returns the outputs in dataset order (step-major, then replica).
"""
import contextlib
import enum
import logging

import numpy as np

from ipu_keras._src.device import config as ipu_config
from ipu_keras._src.tracer.marked import cross_replica_sum
from ipu_keras._src.runtime.process_group import active_group
from ipu_keras._src.keras.cross_replica_optimizer import CrossReplicaOptimizer
from ipu_keras.errors import ReplicationError
from ipu_keras._src.keras import pipelining

logger = logging.getLogger("ipu_keras")
_OPTIONS_ATTR = "_ipu_replicated_metric_reduction_method"
_LOGS_ATTR = "_ipu_replicated_logs"


class ReplicatedMetricReductionMethod(enum.Enum):
    """How the logs of the replicas become the logs of a step."""

    NONE = "NONE"
    LIST = "LIST"
    SUM = "SUM"
    MEAN = "MEAN"

    @classmethod
    def parse(cls, value):
        if isinstance(value, cls):
            return value
        if isinstance(value, str) and value.upper() in cls.__members__:
            return cls[value.upper()]
        raise ValueError(
            "replicated_metric_reduction_method expected one of NONE, LIST, SUM, MEAN (a "
            f"ReplicatedMetricReductionMethod or its name). Received: {value!r}")


def set_options(model, replicated_metric_reduction_method="NONE"):
    method = ReplicatedMetricReductionMethod.parse(replicated_metric_reduction_method)
    object.__setattr__(model, _OPTIONS_ATTR, method)


def reduction_method(model):
    return getattr(model, _OPTIONS_ATTR, ReplicatedMetricReductionMethod.NONE)


def replication_factor(model):
    """R for `model` on the configured device: its IPUs over the model's shards."""
    requested = ipu_config.get_active_config().auto_select_ipus
    ipus = max(1, (sum(requested) if isinstance(requested, list) else requested) or 0)
    shards = 1
    if pipelining.is_pipelined(model):
        stages = [a.pipeline_stage for a in pipelining.assignment_in_use(model)]
        if None in stages:
            return 1   # an unassigned layer: `pipelining.check_model` says so
        while shards < max(pipelining.device_mapping(model)) + 1:
            shards *= 2
    return max(1, ipus // shards)


@contextlib.contextmanager
def batches_per_execution(model):
    """While Keras runs `fit`/`evaluate`/`predict`: its `steps_per_execution` counts the
    batches of an execution, `steps_per_execution` x R (one batch per replica a step), so
    that its data iterators hand over whole executions and its epochs end with the data."""
    replicas = replication_factor(model)
    steps = getattr(model, "steps_per_execution", 1)
    if replicas == 1:
        yield
        return
    model.steps_per_execution = steps * replicas
    remember_logs(model, None)
    try:
        yield
    finally:
        model.steps_per_execution = steps


def remember_logs(model, logs):
    """Keeps the last step's reduced logs: Keras reads a model's metric results from its
    metric variables, which hold only replica 0's state (`replicated_logs`)."""
    object.__setattr__(model, _LOGS_ATTR, logs)


def replicated_logs(model):
    """The last replicated step's logs, reduced across replicas; None if none ran."""
    return getattr(model, _LOGS_ATTR, None)


def reduces(replicas):
    """Whether training must sum gradients across replicas: more than one here, or other
    instances of a distributed run (`ipu_keras.distributed`)."""
    return replicas > 1 or active_group() is not None


def replica_sum_optimizer(optimizer):
    """`optimizer` with every gradient summed over the replicas before it applies it."""
    return _CrossReplicaSum(optimizer)


class _CrossReplicaSum(CrossReplicaOptimizer):
    """IPU Keras' reduction: the sum of the replicas' gradients, not their mean."""

    _reduce = staticmethod(cross_replica_sum)


def whole_groups(batches, replicas, kind):
    """The batches of whole groups of `replicas` (one per replica); warns about the rest."""
    whole = len(batches) - len(batches) % replicas
    if whole < len(batches):
        logger.warning(
            "%s: %d batch(es) at the end of the data do not make a group of %d (one per "
            "replica) and are dropped; make the number of batches a multiple of %d.",
            kind, len(batches) - whole, replicas, replicas)
    return batches[:whole]


def check_enough(batches, replicas, steps_per_execution):
    if len(batches) < replicas:
        raise ReplicationError(
            f"The model runs {replicas} replicas, which take {replicas} batches per step, "
            f"but the data held only {len(batches)} batch(es) for this execution. Expected at "
            f"least {replicas} x steps_per_execution = {replicas * steps_per_execution} "
            "batches per execution. Received: fewer. Give more data, or a smaller batch.")


def reduce_logs(logs, method):
    """One step's logs (each value with a leading replica axis) reduced by `method`."""
    def reduce(value):
        value = np.asarray(value)
        if method is ReplicatedMetricReductionMethod.LIST:
            return list(value)
        if method is ReplicatedMetricReductionMethod.SUM:
            return value.sum(axis=0)
        if method is ReplicatedMetricReductionMethod.MEAN:
            return value.mean(axis=0)
        return value[-1]
    if isinstance(logs, dict):
        return {k: reduce(v) for k, v in logs.items()}
    return reduce(logs)


def predictions_in_order(step_outputs):
    """[per step: outputs with a replica axis] -> [per batch: outputs], in dataset order."""
    import tensorflow as tf

    flat = []
    for outputs in step_outputs:
        leaves = tf.nest.flatten(outputs)
        for r in range(np.shape(leaves[0])[0]):
            flat.append(tf.nest.pack_sequence_as(outputs, [np.asarray(x)[r] for x in leaves]))
    return flat
