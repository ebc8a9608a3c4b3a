"""Tracebacks of the Keras methods that show the user's frames, not the simulator's.

Keras filters its own and TensorFlow's frames out of the traceback of an error raised in
`fit`, `evaluate` or `predict` (`keras.config.enable_traceback_filtering`, on by default).
An `ipu_keras` model's error passes through the trainer, the program and the tracer as
well. `filtered(method)` drops those frames, and the wrappers around them, the same way,
with the contextless chaining Keras uses; and for an error raised while TensorFlow traces
the step, it drops them from the "in user code" listing autograph puts in the message
too. A wrong input shape then reads as in Keras (25 lines against Keras' 16: the rest is
that listing, which Keras shows too when its own traced step fails). The error's type
and the user's frames are kept. With filtering off the traceback is whole.
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
            e = _listing_without_machinery(e)
            raise e.with_traceback(_without_machinery(e.__traceback__)) from None

    return call


def _listing_without_machinery(error):
    """`error`, or the same error made again without our frames in its "in user code"
    listing: an error raised while TensorFlow traces the step carries autograph's
    metadata, whose stack of the user's frames passes through the tracer's wrappers."""
    metadata = getattr(error, "ag_error_metadata", None)
    stack = getattr(metadata, "translated_stack", None)
    if not stack or not any(_ours(frame.filename) for frame in stack):
        return error
    metadata.translated_stack = [frame for frame in stack if not _ours(frame.filename)]
    try:
        again = metadata.to_exception(error)
    except Exception:  # noqa: BLE001 - a type autograph cannot make again: keep the error
        again = None
    metadata.translated_stack = stack
    return error if again is None else again


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
