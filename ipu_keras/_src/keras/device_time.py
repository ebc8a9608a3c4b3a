"""`DeviceTimeLogger`: one line per epoch with the simulated device time of training.

Keras' progress bar shows the host's wall time; what the IPU would take is the
simulator's cycle count. When `fit` runs with `verbose` on, the trainer adds this
callback after the user's and after a progress bar (`with_device_time`: Keras
appends its own progress bar after the user's callbacks, so one is put in the list
first, which Keras then uses instead); at the end of each epoch, right under the
progress bar's line, it prints (through Keras' `print_msg`, as the progress bar
does) the device time per step, the samples per second at that speed and, beside
them, the wall time per step:

    ipu2 (simulated): 0.812 ms/step device, 78,818 samples/s; wall 41.3 ms/step

It never touches `logs`, so History is exactly Keras'. The numbers come from the
train `DeviceFunction`, which adds up each execution's cycles; the same line goes to
the `ipu_keras` logger at DEBUG.
"""
import logging
import time

import keras

logger = logging.getLogger("ipu_keras")


def _print(message):
    try:
        from keras.src.utils.io_utils import print_msg
    except ImportError:  # a Keras without it: plain stdout
        print(message)
        return
    print_msg(message)


class DeviceTimeLogger(keras.callbacks.Callback):
    """Prints the simulated device time of each training epoch (see the module docstring)."""

    def __init__(self, ipu_model):
        super().__init__()
        self._ipu_model = ipu_model
        self._start = None
        self._wall = 0.0

    def _function(self):
        return getattr(self._ipu_model, "train_function", None)

    def on_epoch_begin(self, epoch, logs=None):
        function = self._function()
        if function is not None and hasattr(function, "device_seconds"):
            function.device_seconds, function.device_steps, function.device_samples = 0.0, 0, 0
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        function = self._function()
        if function is None or not getattr(function, "device_steps", 0):
            return
        wall = time.perf_counter() - self._start
        line = device_time_line(function, wall)
        logger.debug(line)
        _print(line)


def with_device_time(callbacks, ipu_model):
    """`fit`'s callbacks with a progress bar (if none) and a `DeviceTimeLogger` last."""
    if isinstance(callbacks, keras.callbacks.CallbackList):
        callbacks.append(DeviceTimeLogger(ipu_model))
        return callbacks
    callbacks = list(callbacks or [])
    if not any(isinstance(c, keras.callbacks.ProgbarLogger) for c in callbacks):
        callbacks.append(keras.callbacks.ProgbarLogger())
    return callbacks + [DeviceTimeLogger(ipu_model)]


def device_time_line(function, wall_seconds):
    """The text of one epoch's line from a `DeviceFunction`'s counters."""
    steps = function.device_steps
    device = function.device_seconds
    target = function.last_program.target.name if function.last_program else "IPU"
    per_step = device / steps
    samples = function.device_samples / device if device else float("inf")
    return (f"{target} (simulated): {per_step * 1e3:.3f} ms/step device, {samples:,.0f} "
            f"samples/s; wall {wall_seconds / steps * 1e3:.1f} ms/step")


__all__ = ["DeviceTimeLogger", "device_time_line", "with_device_time"]
