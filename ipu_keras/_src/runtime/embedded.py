"""The embedded application runtime: an application file run by an engine of its own.

`load_application(path)` reads a file written by `driver/application.py` (the project's
executable format with its `info["application"]` interface) and refuses anything else:
a Poplar executable or PopEF file compiled for hardware, an ipu_keras executable that is
no application (a cache entry), a damaged file. `start(path, inputs, name)` gives the
`RuntimeEngine` named `name`, started with the start `inputs` (or the one already running
that file under that name). Like the SDK's, it runs the program in a background thread,
again and again: the program's infeed waits for the next `call`, and each element the
program enqueues on its outfeed is the result of the call that fed it, so one call is one
iteration of the program's loop; when the program ends (its loop ran the number of
iterations it was compiled with) the next call starts it again, with the variables as the
last run left them. Calls from several threads are served one at a time, in order.
After each completed run the profile is recorded (`ipu.profiling.last_report()`).
An error inside the program fails the call that waits for it, and every later call on
that engine, with `tf.errors.InternalError`, as an application error does on the IPU.
"""
import os
import queue
import threading

import numpy as np
import tensorflow as tf

from ipu_keras._src.device.executable import Executable
from ipu_keras._src.reports import profile
from ipu_keras._src.simulator.engine import Engine
from ipu_keras.errors import EmbeddedRuntimeDTypeError, EmbeddedRuntimeError, \
    ExecutableFormatError

SIGNATURE = "application"
"""The key of an application's interface in `Executable.info` (`driver/application.py`)."""
SIGNATURE_VERSION = 1
_ZIP_MAGIC = b"PK\x03\x04"
_ENGINES = {}
_LOCK = threading.Lock()


def load_application(path):
    """The `Executable` of the application file at `path`, its interface checked."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise EmbeddedRuntimeError(
            f"The embedded runtime expected the path of an executable file compiled by "
            f"experimental_application_compile_op. Received: executable_file='{path}', "
            "which is not a file.")
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != _ZIP_MAGIC:
        raise EmbeddedRuntimeError(
            f"'{path}' is not an ipu_keras executable (a Poplar executable or PopEF file "
            "compiled for IPU hardware cannot run on the simulator). Compile the function "
            "with ipu.application_compile_op.experimental_application_compile_op.")
    try:
        executable = Executable.load(path)
    except ExecutableFormatError as e:
        raise EmbeddedRuntimeError(f"The executable file cannot be used: {e}") from None
    signature = executable.info.get(SIGNATURE)
    if not isinstance(signature, dict) or signature.get("version") != SIGNATURE_VERSION:
        raise EmbeddedRuntimeError(
            f"'{path}' is an ipu_keras executable but no application (it was not written "
            "by experimental_application_compile_op). Received: an executable without an "
            "application signature.")
    return executable


def check_inputs(arrays, specs, what, dtype_error=EmbeddedRuntimeError):
    """Raises unless `arrays` match `specs` (name, shape, dtype) one by one, in the SDK's
    words; `what` says which API is checking."""
    if len(arrays) != len(specs):
        raise EmbeddedRuntimeError(
            f"{what} expects {len(specs)} inputs, but {len(arrays)} were provided.")
    for i, (array, spec) in enumerate(zip(arrays, specs)):
        if list(array.shape) != list(spec["shape"]):
            raise EmbeddedRuntimeError(
                f"Mismatched input shape at position {i} ('{spec['name']}'). Expected "
                f"{list(spec['shape'])}, but input {i} has shape {list(array.shape)}.")
        if array.dtype != np.dtype(spec["dtype"]):
            raise dtype_error(
                f"Mismatched input dtype at position {i} ('{spec['name']}'). Expected "
                f"{spec['dtype']}, but input {i} has dtype {array.dtype.name}.")


def start(path, inputs, name):
    """The engine `name` running the application at `path`, started with the start
    `inputs` (arrays in the signature's order) unless it already runs that file."""
    key = os.path.realpath(os.fspath(path))
    with _LOCK:
        running = _ENGINES.get(name)
        if running is not None:
            if running.path != key:
                raise EmbeddedRuntimeError(
                    f"An embedded runtime named '{name}' already runs '{running.path}'. "
                    f"Received: executable_file='{path}'. Use another name.")
            return running
        executable = load_application(path)
        specs = executable.info[SIGNATURE]["inputs"]
        check_inputs(inputs, specs, "Embedded application runtime")
        engine = _ENGINES[name] = RuntimeEngine(executable, key, inputs, name)
        return engine


class _Failed:
    """On an outfeed queue: the program failed with `error`."""

    def __init__(self, error):
        self.error = error


class RuntimeEngine:
    """One started application: the program's engine in a background thread."""

    def __init__(self, executable, path, inputs, name):
        self.executable, self.path, self.name = executable, path, name
        self.signature = executable.info[SIGNATURE]
        n = self.signature["num_args"]
        self.args = [np.asarray(a) for a in inputs[:n]]
        frozen = self.signature["frozen"]
        self.state = [np.array(v) for v in (inputs[n:] if frozen is None else frozen)]
        self.widths = [len(f["types"]) for f in executable.infeeds]
        self.in_queues = [queue.Queue() for _ in executable.infeeds]
        self.out_queues = [queue.Queue(maxsize=1) for _ in executable.outfeeds]
        self.error = None
        self.call_lock = threading.Lock()
        self.engine = Engine(executable)
        self.thread = threading.Thread(target=self._serve, name=f"embedded_runtime_{name}",
                                       daemon=True)
        self.thread.start()

    def call(self, arrays):
        """One iteration: `arrays` (the streamed inputs) in, the streamed outputs out."""
        check_inputs(arrays, self.signature["streamed_inputs"], "Embedded application call",
                     EmbeddedRuntimeDTypeError)
        with self.call_lock:
            self._raise_if_failed()
            start = 0
            for q, width in zip(self.in_queues, self.widths):
                q.put([np.array(a) for a in arrays[start:start + width]])
                start += width
            results = []
            for q in self.out_queues:
                element = q.get()
                if isinstance(element, _Failed):
                    q.put(element)   # for the next call too
                    self._raise_if_failed()
                results.extend(element)
            return results

    def _raise_if_failed(self):
        if self.error is not None:
            raise tf.errors.InternalError(
                None, None, f"The embedded application '{self.name}' failed: "
                f"{type(self.error).__name__}: {self.error}")

    def _serve(self):
        streams = _Streams(self)
        try:
            while True:
                self.engine.run(self.args, self.state, streams)
                profile.record(self.executable, self.engine)
                if not self.in_queues and not self.out_queues:
                    return   # nothing to wait for: one run
        except Exception as e:  # noqa: BLE001 - handed to the callers
            self.error = e
            for q in self.out_queues:
                q.put(_Failed(e))


class _Streams:
    """The engine's view of the runtime's queues."""

    def __init__(self, runtime):
        self.runtime = runtime

    def pull(self, feed):
        return self.runtime.in_queues[feed].get()

    def push(self, feed, arrays):
        self.runtime.out_queues[feed].put([np.array(a) for a in arrays])

    def collective(self, op, values, params):
        raise EmbeddedRuntimeError(
            f"The embedded runtime runs one replica; the program's collective '{op}' "
            "needs replicas. Compile the application without replication.")


__all__ = ["SIGNATURE", "SIGNATURE_VERSION", "RuntimeEngine", "check_inputs",
           "load_application", "start"]
