"""The compile progress bar of `TF_POPLAR_FLAGS=--show_progress_bar=true|false|auto`.

`CompileProgress` is the `on_pass(name, seconds)` callback `compile_graph` calls
after each pass; it draws one line on stderr, redrawn in place with a carriage
return, and ends it when the compile finishes. "true" always draws; "false" never;
"auto" (the default) draws only when stderr is a terminal and only once the compile
has taken more than `AUTO_AFTER_SECONDS`, so quick compiles stay silent.
"""
import sys
import time
import warnings

from ipu_keras._src import flags
from ipu_keras._src.compiler.pipeline import PASS_NAMES

AUTO_AFTER_SECONDS = 1.0
WIDTH = 24
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


class CompileProgress:
    """Draws the passes of one compile; see the module docstring."""

    def __init__(self, name, mode=None, stream=None):
        self.name = name or "graph"
        self.mode = progress_mode() if mode is None else mode
        self.stream = sys.stderr if stream is None else stream
        self.start = time.perf_counter()
        self.done = 0
        self.shown = False

    def _wanted(self):
        if self.mode == "true":
            return True
        if self.mode != "auto":
            return False
        isatty = getattr(self.stream, "isatty", None)
        if not (isatty and isatty()):
            return False
        return time.perf_counter() - self.start > AUTO_AFTER_SECONDS

    def __call__(self, pass_name, seconds):
        del seconds
        self.done += 1
        if self.shown or self._wanted():
            self._draw(pass_name)

    def _draw(self, pass_name):
        total = len(PASS_NAMES)
        filled = round(WIDTH * min(self.done, total) / total)
        bar = "#" * filled + "-" * (WIDTH - filled)
        elapsed = time.perf_counter() - self.start
        self.stream.write(f"\rCompiling '{self.name}' [{bar}] {self.done}/{total} "
                          f"{pass_name:<16} {elapsed:6.2f} s")
        self.stream.flush()
        self.shown = True

    def finish(self, note=""):
        """Ends the line (if one was drawn) with the total time and an optional note."""
        if self.shown:
            elapsed = time.perf_counter() - self.start
            self.stream.write(f"\rCompiled '{self.name}' in {elapsed:.2f} s{note}"
                              f"{' ' * (WIDTH + 12)}\n")
            self.stream.flush()
            self.shown = False
