"""Progress of the long work before a program's first result: tracing, compiling and the
first execution (`TF_POPLAR_FLAGS=--show_progress_bar=true|false|auto`).

A `WorkProgress` follows one program. Each stage it is told about is one line of
`tqdm` (a widget in a notebook that has `ipywidgets`, else text redrawn in place with a
carriage return, which terminals and notebook outputs both honour), kept when the stage
ends, with its count and time::

    Tracing 'model_train_step': 100%|████████| 6534/6534 ops [00:03, Identity]
    Compiling 'model_train_step': 100%|████████| 10/10 passes [00:01, lower]
    Running 'model_train_step': 100%|████████| 8/8 steps [00:04, first execution]

"true" always draws, on stderr; "false" never; "auto" (the default) only when stderr is a
terminal or a Jupyter kernel's, and only once the program's work has taken
`AUTO_AFTER_SECONDS`, so small programs stay silent; from then on every later stage of
the program shows at once. While a stage is open a ticker thread redraws its line, so
the time moves during work that reports nothing (TensorFlow tracing the step, the engine
running an execution).

The stages are fed by callbacks: the tracer's `on_progress(phase, done, total, note)`
(`tracer/trace.py`: each Keras layer call while TensorFlow traces, then each op the
importer turns into IR) and the compiler's `on_pass(name, seconds)`.
"""
import contextlib
import shutil
import sys
import threading
import time
import warnings

from ipu_keras._src import flags
from ipu_keras._src.compiler.pipeline import PASS_NAMES

AUTO_AFTER_SECONDS = 0.5
NOTE_WIDTH = 40
_COUNTED = "{desc}: {percentage:3.0f}%|{bar:20}| {n_fmt}/{total_fmt}{unit} [{elapsed}{postfix}]"
_OPEN = "{desc}: {n_fmt}{unit} [{elapsed}{postfix}]"   # no total known yet
TICK_SECONDS = 0.2
MODES = ("true", "false", "auto")


def progress_mode(environ=None):
    """The `--show_progress_bar` mode: "true", "false" or "auto" (also when unset)."""
    value = flags.get_flag("show_progress_bar", "auto", environ)
    if value is True:
        return "true"
    text = str(value).strip().lower()
    if text in MODES:
        return text
    as_bool = flags.flag_as_bool(text, None)
    if as_bool is not None:
        return "true" if as_bool else "false"
    warnings.warn(f"{flags.ENV_VAR}: --show_progress_bar expected true, false or auto. "
                  f"Received: show_progress_bar={value!r}; using auto.", stacklevel=2)
    return "auto"


def interactive(stream):
    """Whether `stream` is a terminal or the output of a Jupyter kernel."""
    isatty = getattr(stream, "isatty", None)
    try:
        if isatty and isatty():
            return True
    except ValueError:   # a closed stream
        return False
    return type(stream).__module__.startswith("ipykernel") and "ipykernel" in sys.modules


def _bar_class(stream):
    """tqdm's notebook widget for a kernel's own stderr (when ipywidgets is there), else
    its text bar (which writes to any stream)."""
    if stream is sys.stderr and "ipykernel" in sys.modules:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # tqdm's notes on which bar it chose
            from tqdm.auto import tqdm
        return tqdm
    from tqdm.std import tqdm
    return tqdm


class Stage:
    """One stage's line: a count (of `total`, if known) and a note (the latest item)."""

    def __init__(self, work, title, total, unit):
        self.work, self.title, self.total, self.unit = work, title, total, unit
        self.done = 0
        self.note = ""
        self.bar = None

    def advance(self, count=1, note=None):
        """Counts `count` more items; `note` names the latest."""
        self.set(self.done + count, note)

    def set(self, done, note=None):
        """Sets the count of items done; `note` names the latest."""
        self.done = done
        if note is not None:
            note = self.note = _short(note)
        if self.bar is not None:
            self.bar.n = done
            if note is not None:
                self.bar.set_postfix_str(note, refresh=False)
            self.bar.update(0)

    def restart(self, total, unit):
        """Counts other items from 0 (of `total`, None if unknown)."""
        self.total, self.unit, self.done = total, unit, 0
        if self.bar is not None:
            self.bar.unit = f" {unit}"
            self.bar.bar_format = _COUNTED if total else _OPEN
            start = self.bar.start_t
            self.bar.reset(total)
            self.bar.start_t = start   # the stage's time runs on

    def _show(self):
        cls = _bar_class(self.work.stream)
        self.bar = cls(total=self.total, desc=f"{self.title} '{self.work.name}'",
                       unit=f" {self.unit}", initial=self.done, file=self.work.stream,
                       leave=True, mininterval=0.1, **_screen(self.work.stream),
                       bar_format=_COUNTED if self.total else _OPEN)
        if self.note:
            self.bar.set_postfix_str(self.note, refresh=False)
        self.bar.refresh()

    def _tick(self):
        if self.bar is None:
            if self.work.showing():
                self._show()
        else:
            self.bar.refresh()

    def _close(self):
        if self.bar is None and self.work.showing():
            self._show()
        if self.bar is not None:
            self.bar.n = self.done
            self.bar.close()


def _screen(stream):
    """A terminal's size for tqdm (100 x 24 when it reports none, as pseudo-terminals
    without a size do, where tqdm would draw nothing); tqdm's own choice elsewhere."""
    isatty = getattr(stream, "isatty", None)
    if not (isatty and isatty()):
        return {}
    size = shutil.get_terminal_size((100, 24))
    return {"ncols": min(size.columns, 160), "nrows": size.lines}


def _short(note):
    """`note` cut to its last `NOTE_WIDTH` characters (an op's name ends with its own)."""
    return note if len(note) <= NOTE_WIDTH else "..." + note[3 - NOTE_WIDTH:]


class WorkProgress:
    """The stages of one program's first call; see the module docstring."""

    def __init__(self, name, mode=None, stream=None):
        self.name = name or "graph"
        self.mode = progress_mode() if mode is None else mode
        self.stream = sys.stderr if stream is None else stream
        self.start = time.perf_counter()
        self.shown = False
        self._lock = threading.Lock()

    @property
    def enabled(self):
        if self.mode == "true":
            return True
        return self.mode == "auto" and interactive(self.stream)

    def showing(self):
        """Whether a stage opened now is drawn (in "auto", once the work is long)."""
        if not self.shown and self.enabled and (
                self.mode == "true" or
                time.perf_counter() - self.start >= AUTO_AFTER_SECONDS):
            self.shown = True
        return self.shown

    @contextlib.contextmanager
    def stage(self, title, total=None, unit="it"):
        """A stage's line while the body runs; yields the `Stage` to advance."""
        stage = Stage(self, title, total, unit)
        if not self.enabled:
            yield stage
            return
        stop = threading.Event()
        ticker = threading.Thread(target=self._ticking, args=(stage, stop), daemon=True,
                                  name="ipu_keras progress")
        with self._lock:
            stage._tick()
        ticker.start()
        try:
            yield _Locked(stage, self._lock)
        finally:
            stop.set()
            ticker.join()
            with self._lock:
                stage._close()

    def _ticking(self, stage, stop):
        while not stop.wait(TICK_SECONDS):
            with self._lock:
                stage._tick()

    def on_pass(self, stage):
        """The compiler's `on_pass(name, seconds)` callback, advancing `stage`."""
        return lambda name, seconds: stage.advance(1, name)

    def compiling(self):
        """The compile stage: one item per compiler pass."""
        return self.stage("Compiling", total=len(PASS_NAMES), unit="passes")


class _Locked:
    """A `Stage` whose changes take the progress' lock (the ticker thread draws too)."""

    def __init__(self, stage, lock):
        self._stage, self._lock = stage, lock

    def advance(self, count=1, note=None):
        with self._lock:
            self._stage.advance(count, note)

    def set(self, done, note=None):
        with self._lock:
            self._stage.set(done, note)

    def restart(self, total, unit):
        with self._lock:
            self._stage.restart(total, unit)


def tracing_callback(stage):
    """The tracer's `on_progress(phase, done, total, note)` drawn on `stage`: while
    TensorFlow traces ("tensorflow"), the layer calls so far; then ("import") the ops
    imported into IR out of `total`."""
    phases = []

    def on_progress(phase, done, total, note):
        if not phases or phases[-1] != phase:
            phases.append(phase)
            stage.restart(total, "ops" if phase == "import" else "layer calls")
        stage.set(done, note)

    return on_progress
