"""A Keras model's options for how data reaches the device: the infeed and outfeed queue
options (`set_infeed_queue_options`, `set_outfeed_queue_options`) and
`steps_per_execution` as a number.

Graphcore's Keras forwarded the queue options to the `IPUInfeedQueue` and
`IPUOutfeedQueue` that every `fit`/`evaluate`/`predict` created. Here the Keras data
path has no user-visible queues: `prefetch_depth` becomes a host prefetch of that many
batches in front of the device (a `tf.data` prefetch on the epoch's dataset, filled by
tf.data's thread while the device runs), and the outfeed's `buffer_depth` and both
queues' `optimise_latency` and `device_ordinal` are checked and kept, without effect on
the simulator. The checks and their texts are Graphcore's; they run when the option is
set rather than at the next `fit`.

`steps_per_execution` may be given as a tensor (`dataset.cardinality()`, an int64
variable), as Graphcore's Keras allowed: the model keeps it as a Python int, since
Keras' loop counts its steps with it.
"""
import logging
import numbers

import numpy as np

from ipu_keras.errors import ModelOptionError, UnknownOptionError

logger = logging.getLogger("ipu_keras")

_INFEED_ATTR = "_infeed_kwargs"
_OUTFEED_ATTR = "_outfeed_kwargs"
_SET_BY_KERAS = {"infeed": ("dataset", "infeed_spec", "element_spec"), "outfeed": ()}
_NOT_FOR_KERAS = {"infeed": ("_internal_id",), "outfeed": ("outfeed_mode", "device_ordinal")}
_KNOWN = {"infeed": ("prefetch_depth", "optimise_latency", "device_ordinal"),
          "outfeed": ("buffer_depth", "optimise_latency")}


def set_infeed_queue_options(model, **kwargs):
    """Checks and stores the infeed options of `model`'s next fit/evaluate/predict."""
    _check_keys("infeed", kwargs)
    for key in kwargs:
        if key not in _KNOWN["infeed"]:
            # Graphcore's infeed queue took any keyword and ignored what it did not know.
            logger.warning("set_infeed_queue_options: the option `%s` is not an option of "
                           "IPUInfeedQueue and is ignored. Received: %s=%r",
                           key, key, kwargs[key])
    if "prefetch_depth" in kwargs:
        check_prefetch_depth(kwargs["prefetch_depth"])
    if "device_ordinal" in kwargs:
        _check_device_ordinal(kwargs["device_ordinal"])
    _check_bool(kwargs, "optimise_latency")
    object.__setattr__(model, _INFEED_ATTR, dict(kwargs))


def set_outfeed_queue_options(model, **kwargs):
    """Checks and stores the outfeed options of `model`'s next fit/evaluate/predict."""
    _check_keys("outfeed", kwargs)
    unknown = sorted(k for k in kwargs if k not in _KNOWN["outfeed"])
    if unknown:
        raise UnknownOptionError(
            f"set_outfeed_queue_options expected options of IPUOutfeedQueue "
            f"({', '.join(_KNOWN['outfeed'])}). Received: unexpected keyword argument(s) "
            f"{', '.join(unknown)}")
    if "buffer_depth" in kwargs:
        depth = kwargs["buffer_depth"]
        if not _is_int(depth) or depth < 1:
            raise ModelOptionError(
                f"buffer_depth expected an int greater than zero. Received: "
                f"buffer_depth={depth!r}")
    _check_bool(kwargs, "optimise_latency")
    object.__setattr__(model, _OUTFEED_ATTR, dict(kwargs))


def infeed_options(model):
    """The options last given to `set_infeed_queue_options` (a copy; {} if none)."""
    return dict(getattr(model, _INFEED_ATTR, None) or {})


def outfeed_options(model):
    """The options last given to `set_outfeed_queue_options` (a copy; {} if none)."""
    return dict(getattr(model, _OUTFEED_ATTR, None) or {})


def with_prefetch(model, dataset):
    """`dataset` prefetched `prefetch_depth` batches ahead when the model's infeed options
    set one; else `dataset` as it is."""
    depth = infeed_options(model).get("prefetch_depth")
    return dataset if depth is None else dataset.prefetch(depth)


def check_prefetch_depth(depth):
    """Graphcore's rule: None (the default) or an int from 1 to 255."""
    if depth is None:
        return
    if not _is_int(depth):
        raise ModelOptionError(
            f"prefetch_depth expected an int from 1 to 255. Received: prefetch_depth={depth!r}")
    if depth <= 0:
        raise ModelOptionError(
            f"prefetch_depth must be greater than zero, but it is {depth}. Received: "
            f"prefetch_depth={depth}")
    if depth > 255:
        raise ModelOptionError(
            f"prefetch_depth must be less than 256, but it is {depth}. Received: "
            f"prefetch_depth={depth}")


def as_steps_per_execution(value):
    """`value` (an int, numpy int, or integer scalar tensor or variable) as a Python int >= 1.

    Graphcore's Keras converted it with `.numpy().item()` at each fit/evaluate/predict;
    converting once when it is set gives Keras' step counting the int it needs.
    """
    if hasattr(value, "numpy") and hasattr(value, "dtype"):   # tf.Tensor, tf.Variable
        if not getattr(value.dtype, "is_integer", False) or value.shape.rank != 0:
            raise ModelOptionError(
                "steps_per_execution expected a positive integer (an int, or an integer "
                f"scalar tensor). Received: steps_per_execution={value!r}")
        value = value.numpy()
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if not _is_int(value) or value < 1:
        raise ModelOptionError(
            "steps_per_execution expected a positive integer (an int, or an integer scalar "
            f"tensor). Received: steps_per_execution={value!r}")
    return int(value)


def _check_keys(which, kwargs):
    setter = f"set_{which}_queue_options"
    for key in kwargs:
        if key in _SET_BY_KERAS[which]:
            raise ModelOptionError(
                f"Found `{key}` key in `kwargs`. This argument is automatically set by Keras. "
                f"Received: {setter}({key}=...)")
        if key in _NOT_FOR_KERAS[which]:
            raise ModelOptionError(
                f"Found `{key}` key in `kwargs`. This argument is not compatible with Keras. "
                f"Received: {setter}({key}=...)")


def _check_device_ordinal(ordinal):
    if not _is_int(ordinal) or ordinal < 0:
        raise ModelOptionError(
            f"device_ordinal expected an int >= 0. Received: device_ordinal={ordinal!r}")


def _check_bool(kwargs, key):
    if key in kwargs and not isinstance(kwargs[key], (bool, np.bool_)):
        raise ModelOptionError(f"{key} expected a bool. Received: {key}={kwargs[key]!r}")


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))
