"""Where and when report files are written.

Reports are on when `enable_reports(directory)` was called, or else when
`POPLAR_ENGINE_OPTIONS` sets `"autoReport.all": "true"` (directory
`"autoReport.directory"`, default the current directory). Each compiled executable
gets `<directory>/<name>_<key prefix>/` with `report.json`, the PNGs of `plots.py`,
`trace.json.gz` (the execution trace as Chrome trace events, `trace.py`; of one pass
of the program until it ran) and `report.html`.

When: at compile time everything that does not depend on a run is written at once
(so a report exists even if the process then dies, or the model does not fit).
The execution trace needs the last run, and rewriting files after every execution
would slow training down, so it is written lazily: each run only stores a reference
to the engine's block counts (`note_execution`, called by `profile.record`), and
`write_report()` (also `profiling.write_report()`) and an `atexit` hook rewrite
`report.json`, `cycles.png`, `trace.png`, `trace.json.gz` and `report.html` of the
executables that ran since their files were last written.

A report directory or tensor map file that cannot be written raises `OutputWriteError`
naming the option that chose it; `check_outputs` makes both before a compile starts, and
`enable_reports` makes its directory at once.
"""
import atexit
import contextlib
import gzip
import json
import logging
import os
import re
import threading

from ipu_keras._src.flags import engine_options, flag_as_bool
from ipu_keras._src.reports import document, html, plots, trace
from ipu_keras.errors import OutputWriteError

logger = logging.getLogger("ipu_keras")

_lock = threading.Lock()
_settings = {"directory": None}   # set by enable_reports / disable_reports
_registered = {}                  # id(executable) -> [executable, directory, name, key]
_last_counts = {}                 # id(executable) -> block counts of its last run
_written_counts = {}              # id(executable) -> the counts last written
_tensor_maps = {}                 # tensor map file -> {entry name: rows}
_atexit = []


def enable_reports(directory):
    """Writes a report for every executable compiled from now on into `directory`.

    Raises:
        OutputWriteError: if `directory` cannot be created (it is made now).
    """
    directory = os.fspath(directory)
    with _writing("IPU report directory", "directory", directory):
        os.makedirs(directory, exist_ok=True)
    _settings["directory"] = directory


def disable_reports():
    """Stops writing reports from code; `POPLAR_ENGINE_OPTIONS` is read again."""
    _settings["directory"] = None


def reports_directory(environ=None):
    """The directory reports go to, or None when reports are off."""
    if _settings["directory"] is not None:
        return _settings["directory"]
    options = engine_options(environ)
    if not flag_as_bool(options.get("autoReport.all", False)):
        return None
    return str(options.get("autoReport.directory", "."))


def _directory_option():
    return "directory" if _settings["directory"] is not None else "autoReport.directory"


_FIXES = {
    "IPU report directory": "Give a writable directory (POPLAR_ENGINE_OPTIONS' "
                            "autoReport.directory or profiling.enable_reports), or turn "
                            "reports off.",
    "tensor map file": "Give a file path in a writable directory "
                       "(TF_POPLAR_FLAGS=--tensor_map_file_path=PATH), or drop the flag.",
}


@contextlib.contextmanager
def _writing(what, option, path):
    """Turns an OSError while writing `what` into an OutputWriteError naming `option`."""
    try:
        yield
    except OSError as e:
        expected = ("a directory that can be created and written" if "directory" in what
                    else "a file that can be created and written")
        raise OutputWriteError(
            f"The {what} cannot be written: expected {expected}. Received: "
            f"{option}={path!r} ({type(e).__name__}: {e}). {_FIXES[what]}") from e


def check_outputs(directory, map_file):
    """Makes the report directory and the tensor map file's directory before a compile.

    Args:
        directory: The report directory, or None / "" when reports are off.
        map_file: The tensor map file, or "" when none is written.

    Raises:
        OutputWriteError: if either cannot be written.
    """
    if directory:
        with _writing("IPU report directory", _directory_option(), directory):
            os.makedirs(directory, exist_ok=True)
    if map_file:
        with _writing("tensor map file", "tensor_map_file_path", map_file):
            os.makedirs(os.path.dirname(os.path.abspath(map_file)), exist_ok=True)
            if os.path.isdir(map_file):
                raise IsADirectoryError(21, "Is a directory", map_file)


def entry_name(name, key):
    """The report sub-directory of an executable: its name and a key prefix."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name or "").strip("_.")
    short = (key or "nokey")[:10]
    return f"{safe}_{short}" if safe else short


def write_compiled(executable, directory, name, key):
    """Writes the compile-time report of `executable`; returns its directory."""
    path = os.path.join(directory, entry_name(name, key))
    with _writing("IPU report directory", _directory_option(), directory):
        os.makedirs(path, exist_ok=True)
    with _lock:
        _registered[id(executable)] = [executable, path, name, key]
        _last_counts.pop(id(executable), None)
        _written_counts.pop(id(executable), None)
        if not _atexit:
            _atexit.append(atexit.register(_write_at_exit))
    report = document.build(executable, name, key)
    with _writing("IPU report directory", _directory_option(), directory):
        if os.path.exists(os.path.join(path, "trace.png")):
            os.remove(os.path.join(path, "trace.png"))  # of an earlier run of the same entry
        _write_files(path, report, plots.STATIC_PLOTS)
    logger.info("Wrote the report of '%s' to %s.", name or "graph", path)
    return path


def note_execution(executable, counts):
    """Remembers the block counts of the run that just ended (a reference, no copy)."""
    if id(executable) in _registered:
        _last_counts[id(executable)] = counts


def write_report():
    """Writes the execution trace of every reported executable that ran since last time.

    Returns:
        list: The report directories written.
    """
    with _lock:
        pending = [(k, list(_registered[k]), c) for k, c in _last_counts.items()
                   if _written_counts.get(k) is not c]
    written = []
    for k, (executable, path, name, key), counts in pending:
        report = document.build(executable, name, key, counts)
        with _writing("IPU report directory", _directory_option(), os.path.dirname(path)):
            _write_files(path, report, {"cycles.png": plots.cycles_plot,
                                        "trace.png": plots.trace_plot})
        _written_counts[k] = counts
        written.append(path)
    return written


def _write_at_exit():
    try:
        write_report()
    except Exception as e:  # never fail an interpreter exit over a report
        logger.warning("Could not write the IPU reports at exit: %r", e)


def _write_files(path, report, plot_functions):
    _atomic_write(os.path.join(path, "report.json"), json.dumps(report).encode())
    try:
        events = trace.trace_document(report)
    except Exception as e:  # noqa: BLE001 - a report never fails a compile or a run
        logger.warning("Could not lay out the execution trace of %s; the report has none. "
                       "Received: %r", path, e)
        events = None
    if events is not None:
        _atomic_write(os.path.join(path, "trace.json.gz"), gzip.compress(
            json.dumps(events, separators=(",", ":")).encode(), compresslevel=5))
    for file_name, plot in plot_functions.items():
        try:
            plot(report, os.path.join(path, file_name))
        except ImportError as e:
            logger.warning("matplotlib is needed for the report plots (%s); install it with "
                           "`pip install matplotlib`. Received: %r", file_name, e)
            break
    images = {}
    for file_name in ("memory.png", "liveness.png", "cycles.png", "trace.png", "timeline.png"):
        png = os.path.join(path, file_name)
        if os.path.exists(png) and (file_name != "trace.png" or report["execution"]):
            with open(png, "rb") as f:
                images[file_name] = f.read()
    _atomic_write(os.path.join(path, "report.html"),
                  html.render(report, images, events).encode())


def _atomic_write(path, data):
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "wb") as f:
        f.write(data)
    os.replace(temporary, path)


def write_tensor_map_file(path, executable, name, key):
    """Adds the tensor map of `executable` to the JSON file `path` (one entry each)."""
    entries = _tensor_maps.setdefault(os.fspath(path), {})
    entries[entry_name(name, key)] = {"name": name, "key": key,
                                      "target": executable.target["name"],
                                      "tensors": document.tensor_rows(executable)}
    directory = os.path.dirname(os.path.abspath(path))
    with _writing("tensor map file", "tensor_map_file_path", os.fspath(path)):
        os.makedirs(directory, exist_ok=True)
        _atomic_write(os.fspath(path), json.dumps({"executables": entries}, indent=1).encode())


__all__ = ["check_outputs", "disable_reports", "enable_reports", "entry_name", "note_execution",
           "reports_directory", "write_compiled", "write_report", "write_tensor_map_file"]
