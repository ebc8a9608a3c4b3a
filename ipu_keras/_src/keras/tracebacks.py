"""Tracebacks of the Keras methods that show the user's frames, not the simulator's.

Keras filters its own and TensorFlow's frames out of the traceback of an error raised in
`fit`, `evaluate` or `predict` (`keras.config.enable_traceback_filtering`, on by default).
An `ipu_keras` model's error passes through the trainer, the program and the tracer as
well; `filtered(method)` drops those frames (and the wrappers around them) the same way, with the
contextless chaining Keras uses, so that a wrong input shape reads as it does in Keras. The error itself, its
type and message, is unchanged. With filtering off the traceback is whole.
"""
import contextlib
import functools
import pathlib
import traceback
import types

import keras

_MACHINERY = str(pathlib.Path(__file__).resolve().parent.parent)   # ipu_keras/_src
_CONTEXTLIB = contextlib.__file__     # its decorator wrappers, around the tracer's functions
_AUTOGRAPH = "__autograph_generated_file"   # TensorFlow's conversions of the traced step


def filtered(method):
    """`method` whose errors lose the frames inside `ipu_keras/_src` (module docstring)."""

    @functools.wraps(method)
    def call(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - re-raised as it is, with fewer frames
            if not keras.config.is_traceback_filtering_enabled():
                raise
            raise e.with_traceback(_without_machinery(e.__traceback__)) from None

    return call


def _ours(filename):
    return (filename.startswith(_MACHINERY) or filename == _CONTEXTLIB
            or _AUTOGRAPH in filename)


def _without_machinery(tb):
    """`tb` without the frames of files under `ipu_keras/_src`, of contextlib's wrappers
    and of autograph's converted step (the outermost kept if all would go)."""
    frames = list(traceback.walk_tb(tb))
    kept = None
    for frame, line in reversed(frames):
        if not _ours(frame.f_code.co_filename):
            kept = types.TracebackType(kept, frame, frame.f_lasti, line)
    if kept is None and frames:
        frame, line = frames[-1]
        kept = types.TracebackType(None, frame, frame.f_lasti, line)
    return kept
