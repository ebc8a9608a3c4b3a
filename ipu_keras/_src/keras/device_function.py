"""`DeviceFunction`: what Keras calls as `train_function`, `test_function` and
`predict_function` on an ipu_keras model.

It keeps Keras' contract: it takes the epoch's iterator (or, for predict, the list of
batches Keras gathered; or an `Execution` of `step_counts.py` that says how many batches
this execution has), runs up to `steps_per_execution` steps and returns the last
step's logs (predict: the outputs of all steps, concatenated), raising StopIteration
when there is no data left. Each distinct batch signature (a partial last batch has
its own) gets its own `StepProgram`, compiled once and reused; the number of steps is
an input of the executable, so the remainder of an epoch needs no recompile.
"""
import logging

import numpy as np
import tensorflow as tf

from ipu_keras.errors import FeedError
from ipu_keras._src.keras import accumulation, replication
from ipu_keras._src.keras.boundary import flatten_batch, signature
from ipu_keras._src.keras.program import StepProgram
from ipu_keras._src.keras.step_counts import unwrap

logger = logging.getLogger("ipu_keras")


class DeviceFunction:
    def __init__(self, model, kind):
        self.model = model
        self.kind = kind
        self.programs = {}
        # Accumulating or pipelined models trace and feed their steps through a plan.
        self.plan = accumulation.step_plan(model, kind)
        self.last_program = None
        self._last_data = None
        self.step_outputs = []
        # Simulated device time since the trainer last reset it (keras/device_time.py).
        self.device_seconds = 0.0
        self.device_steps = 0
        self.device_samples = 0

    def __call__(self, data):
        data, budget = unwrap(data)
        batches = self._stage(data, budget)
        if self.replicas > 1:
            batches = self._replica_groups(batches, data)
        if not batches:
            raise StopIteration
        if self.plan is not None:
            batches = self.plan.tag(batches)
        flats = [flatten_batch(b) for b in batches]
        self.step_outputs = []
        for start, end in _runs_of_equal_signature(flats):
            program = self._program(batches[start], flats[start])
            outputs = program.run(flats[start:end])
            if self.replicas > 1:
                outputs = self._per_step(outputs)
            self.step_outputs.extend(outputs)
            self.last_program = program
            self._count_device_time(program, end - start, flats[start])
        if self.replicas > 1 and self.kind != "predict":
            replication.remember_logs(self.model, self.step_outputs[-1])
        if self.kind == "predict":
            # Keras concatenates executions itself and expects tensors back.
            return tf.nest.map_structure(lambda *xs: tf.convert_to_tensor(np.concatenate(xs)),
                                         *self.step_outputs)
        return self.step_outputs[-1]

    @property
    def replicas(self):
        return 1 if self.plan is None else self.plan.replicas

    def _replica_groups(self, batches, data):
        """The staged batches in whole groups of one batch per replica, all of the first
        batch's signature (a partial last batch cannot share a step with full ones)."""
        first_of_epoch = data is not self._last_data
        self._last_data = data
        if first_of_epoch and batches:
            replication.check_enough(batches, self.replicas,
                                     self.model.steps_per_execution // self.replicas)
        if batches:
            key = signature(flatten_batch(batches[0]))
            same = [b for b in batches if signature(flatten_batch(b)) == key]
            if len(same) < len(batches):
                logger.warning("%s: a partial last batch cannot be one replica's share of a "
                               "step and is dropped.", self.kind)
            batches = same
        return replication.whole_groups(batches, self.replicas, self.kind)

    def _per_step(self, outputs):
        """Each step's outputs, per replica -> the step's logs (or, for predict, each
        replica's outputs as one batch of its own, in dataset order)."""
        if self.kind == "predict":
            return replication.predictions_in_order(outputs)
        method = replication.reduction_method(self.model)
        return [replication.reduce_logs(o, method) for o in outputs]

    def _count_device_time(self, program, batches, flat):
        cycles = program.session.last_cycles
        self.device_seconds += sum(cycles.values()) / program.target.clock_hz
        self.device_steps += batches // self.replicas
        self.device_samples += batches * (int(flat[0].shape[0]) if flat and flat[0].ndim else 1)

    def _stage(self, data, budget=None):
        if isinstance(data, list):  # predict: Keras already gathered the batches
            return data
        batches = []
        pull = _fast_pull(data)
        # R x per replica while replicated; fewer when the epoch ends (step_counts.py).
        count = self.model.steps_per_execution if budget is None else budget
        for _ in range(count):
            try:
                batches.append(pull())
            except (StopIteration, tf.errors.OutOfRangeError):
                break
            except Exception as e:  # noqa: BLE001 - the input pipeline's own error, kept
                message = getattr(e, "message", None) or str(e)
                raise FeedError(
                    "The input pipeline expected to produce the next batch of this execution. "
                    f"Received: error {type(e).__name__}: {message.strip()}. The execution "
                    "did not run; the weights are those of the last completed one."
                ) from e
        return batches

    def _program(self, batch, flat):
        key = signature(flat)
        program = self.programs.get(key)
        if program is None:
            step = (getattr(self.model, f"{self.kind}_step") if self.plan is None
                    else self.plan.step_function())
            pipeline = None if self.plan is None else self.plan.pipeline()
            program = self.programs[key] = StepProgram(self.model, step, batch, pipeline)
            first = not getattr(self.model, "_ipu_compile_logged", False)
            self.model._ipu_compile_logged = True
            logger.log(logging.INFO if first else logging.DEBUG,
                       "Compiled the %s step of '%s' for %s in %.2f s.", self.kind,
                       self.model.name, program.target.name, program.compile_seconds)
        return program


def _fast_pull(iterator):
    """`next(iterator)`; for a tf.data iterator, the raw op on its resource (~40% cheaper),
    its values packed as the element spec: a flat tuple of tensors (Keras' `(x, y)` and
    `(x, y, sample_weight)`) or one tensor directly, other structures by `tf.nest` (which
    cost a quarter of an MLP's step at batch 32)."""
    handle = getattr(iterator, "_iterator_resource", None)
    if handle is None:
        return lambda: next(iterator)
    spec = iterator.element_spec
    flat = tf.nest.flatten(spec)
    if not all(isinstance(s, tf.TensorSpec) for s in flat):
        return lambda: next(iterator)
    types, shapes = [s.dtype for s in flat], [s.shape for s in flat]
    if isinstance(spec, tf.TensorSpec):
        pack = lambda values: values[0]    # noqa: E731
    elif type(spec) is tuple and len(spec) == len(flat):
        pack = tuple
    else:
        pack = lambda values: tf.nest.pack_sequence_as(spec, values)   # noqa: E731

    def pull():
        return pack(tf.raw_ops.IteratorGetNext(iterator=handle, output_types=types,
                                               output_shapes=shapes))

    return pull


def _runs_of_equal_signature(flats):
    """(start, end) of each run of consecutive batches with the same signature."""
    keys = [signature(f) for f in flats]
    starts = [i for i in range(len(keys)) if i == 0 or keys[i] != keys[i - 1]]
    return list(zip(starts, starts[1:] + [len(keys)]))
