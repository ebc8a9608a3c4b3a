"""How Keras counts the batches of an ipu_keras model's executions.

Keras' epoch iterator tells the callbacks (the progress bar among them) that an execution
ended at batch `begin + steps_per_execution - 1`, whether the data had that many batches
or not: 29 batches at 10 steps per execution read `30/29` before the bar settles. Keras 2,
which Graphcore's IPU Keras stood on, cut the last execution to the epoch. A replicated
model also takes R batches a step and drops a trailing group of fewer than R, so with 4
replicas its bar counted batches that never ran.

`count_batches_run(epoch_iterator, replicas)` makes one epoch iterator of `fit` or
`evaluate` count only the batches that run, when the epoch's length is known:

* the epoch's length (the bar's target) is its whole groups of R batches;
* an execution ends at the epoch's last batch, and the batch index the callbacks get
  is the index of the last batch it ran, as Keras gives at one step per execution;
* each execution hands the device function (`device_function.py`) the iterator with its
  number of batches (`Execution`), so the device pulls exactly those: a dropped trailing
  batch is said once, before the bar starts, instead of in the middle of it, and an
  execution holding only dropped batches is not started (Keras would warn that the input
  ran out).

With an epoch of unknown length (a dataset of unknown cardinality, a generator) the
iterator counts as Keras does, since neither can know where the data ends; so it does
with `steps_per_epoch`, where Keras 3 runs every execution whole (5 steps an epoch at 4
steps per execution run 8 batches, and its bar says so) and the oracle runs the same.
"""
import logging

logger = logging.getLogger("ipu_keras")

_CLASSES = {}


class Execution:
    """One execution's data iterator and how many batches it runs (None: until it ends)."""

    __slots__ = ("iterator", "batches")

    def __init__(self, iterator, batches):
        self.iterator = iterator
        self.batches = batches


def unwrap(data):
    """(iterator, batches of this execution or None) of what Keras passed a step function."""
    if isinstance(data, Execution):
        return data.iterator, data.batches
    return data, None


class _CountsBatchesRun:
    """Mixed before the class of a Keras epoch iterator (see the module docstring)."""

    _ipu_replicas = 1
    _ipu_said_dropped = False

    def _ipu_data_batches(self):
        """The batches of the epoch's data, when known and not cut by `steps_per_epoch`."""
        return None if self.steps_per_epoch else super().num_batches

    @property
    def num_batches(self):
        batches = self._ipu_data_batches()
        if not batches:
            return super().num_batches
        return batches - batches % self._ipu_replicas

    def _enumerate_iterator(self):
        for begin, end, iterator in super()._enumerate_iterator():
            total = self._ipu_data_batches() and self.num_batches
            if not total:
                yield begin, end, iterator
                continue
            if begin >= total:
                continue   # only batches dropped for the replicas are left
            end = min(end, total - 1)
            yield begin, end, Execution(iterator, end - begin + 1)


def count_batches_run(epoch_iterator, replicas):
    """Makes `epoch_iterator` count the batches that run (module docstring)."""
    if not isinstance(epoch_iterator, _CountsBatchesRun):
        base = type(epoch_iterator)
        cls = _CLASSES.get(base)
        if cls is None:
            cls = _CLASSES[base] = type(base.__name__, (_CountsBatchesRun, base), {
                "__module__": __name__, "__doc__": base.__doc__})
        epoch_iterator.__class__ = cls
    epoch_iterator._ipu_replicas = max(1, int(replicas))
    _say_dropped(epoch_iterator)


def _say_dropped(epoch_iterator):
    replicas = epoch_iterator._ipu_replicas
    batches = epoch_iterator._ipu_data_batches()
    if replicas == 1 or not batches or batches % replicas == 0:
        return
    if epoch_iterator._ipu_said_dropped:
        return
    epoch_iterator._ipu_said_dropped = True
    dropped = batches % replicas
    logger.warning(
        "The model runs %d replicas, one batch each a step: of the %d batches of each epoch, "
        "the last %d do not make a group of %d and are not run; make the number of batches "
        "a multiple of %d.", replicas, batches, dropped, replicas, replicas)


__all__ = ["Execution", "count_batches_run", "unwrap"]
