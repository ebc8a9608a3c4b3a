"""The environment switches of Graphcore's IPU TensorFlow: `TF_POPLAR_FLAGS` and
`POPLAR_ENGINE_OPTIONS`.

`poplar_flags()` and `engine_options()` read their variable each time they are called
(it is cheap), so a test or a notebook can change it between runs. Flags keep their text
values; `flag_as_bool()` interprets the boolean-looking ones.

A malformed string (an unbalanced quote, a word that is not a flag, a flag that takes a
value given without one, engine options that are not a JSON object or hold a value of the
wrong kind) raises `FlagsError`: a typo must not quietly turn the cache or the reports
off. An unknown flag or option warns once per process, with a suggestion when a known
name is close, and is otherwise ignored, as the original ignores what it does not use.

Example: `TF_POPLAR_FLAGS="--use_ipu_model --executable_cache_path=/tmp/x"` gives
`{"use_ipu_model": True, "executable_cache_path": "/tmp/x"}`.
"""
import difflib
import json
import os
import shlex
import threading
import warnings

from ipu_keras.errors import FlagsError

ENV_VAR = "TF_POPLAR_FLAGS"
ENGINE_OPTIONS_VAR = "POPLAR_ENGINE_OPTIONS"

KNOWN_FLAGS = {
    "use_ipu_model": "Run as Graphcore's IPU Model: a program whose tiles are out of memory "
                     "still compiles and runs (the report shows those tiles), where the "
                     "hardware, and ipu_keras without this flag, stop.",
    "executable_cache_path": "Directory in which compiled executables are cached.",
    "executable_cache_max_size": "Size limit of the executable cache, e.g. 2GB (0: none).",
    "show_progress_bar": "Progress of tracing, compiling and the first execution: true, "
                         "false or auto (a terminal or notebook, once the work is long).",
    "use_synthetic_data": "Do not copy data between host and device; use synthetic data.",
    "synthetic_data_initializer": "How synthetic data is filled: random, uniform, normal or a "
                                  "constant.",
    "log_cycle_count": "Log the cycle count of each executable run.",
    "tensor_map_file_path": "Write the tile mapping of every tensor to this file.",
    "save_interval_report": "Write the profile report to this file.",
    "max_compilation_threads": "Maximum number of threads used to compile.",
    "max_infeed_threads": "Maximum number of threads that fill infeeds.",
    "ipu_model_tiles": "Tiles per IPU of the IPU Model (0: the version's standard count).",
    "enable_hlo_verifier": "Verify the IR after each compiler pass.",
    "dump_schedule_as_dot": "Write the schedule of each compiled graph as a dot file.",
    "disable_poplar_version_check": "Do not check the Poplar version of cached executables.",
}
"""Flags this package knows about, with what each does."""

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")

SWITCHES = frozenset({"use_ipu_model", "use_synthetic_data", "log_cycle_count",
                      "show_progress_bar", "enable_hlo_verifier", "dump_schedule_as_dot",
                      "disable_poplar_version_check"})
"""Known flags that may be given without a value; every other known flag needs one."""

_said = set()
_said_lock = threading.Lock()


def _warn_once(key, message):
    """Warns `message` unless `key` was warned about before in this process."""
    with _said_lock:
        if key in _said:
            return
        _said.add(key)
    warnings.warn(message, stacklevel=4)


def forget_warnings():
    """Lets every unknown flag or option warn again (for tests)."""
    with _said_lock:
        _said.clear()


def _suggestion(name, known, prefix=""):
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" Did you mean '{prefix}{close[0]}'?" if close else ""


def _unknown_flag_message(name):
    return (f"{ENV_VAR}: unknown flag '--{name}' is ignored by ipu_keras."
            f"{_suggestion(name, KNOWN_FLAGS, '--')}")


def _words(text):
    try:
        return shlex.split(text)
    except ValueError:
        raise FlagsError(
            f"{ENV_VAR} expected balanced quotes around values, as in "
            f"--executable_cache_path='/tmp/my cache'. Received: {ENV_VAR}={text!r}. Close "
            "the quote or remove it.") from None


def _not_a_flag(word, text):
    hint = _suggestion(word.lstrip("-"), KNOWN_FLAGS, "--") if word.strip("-=") else ""
    return FlagsError(
        f"{ENV_VAR}: '{word}' is not a flag; expected --name or --name=value, separated by "
        f"spaces. Received: {ENV_VAR}={text!r}.{hint}")


def _missing_value(name, following, text):
    joined = following if following and not following.startswith("-") else "VALUE"
    return FlagsError(
        f"{ENV_VAR}: --{name} expected a value, as --{name}=VALUE. Received: "
        f"{ENV_VAR}={text!r}. Write --{name}={joined}.")


def _parse(text):
    """(flags, unknown flag names) of `text`; raises FlagsError if it is malformed."""
    text = text or ""
    words = _words(text)
    flags, unknown = {}, []
    for i, word in enumerate(words):
        name, sep, value = word[2:].partition("=")
        if not word.startswith("--") or not name:
            raise _not_a_flag(word, text)
        if name not in KNOWN_FLAGS:
            unknown.append(name)
        elif not sep and name not in SWITCHES:
            raise _missing_value(name, words[i + 1] if i + 1 < len(words) else "", text)
        flags[name] = value if sep else True
    return flags, unknown


def parse_poplar_flags(text):
    """Parses a `TF_POPLAR_FLAGS`-style string.

    Args:
        text: Flags separated by whitespace, each `--name` or `--name=value`;
            values may be shell-quoted.

    Returns:
        dict: name -> value text, or `True` for a flag without a value. A flag
        given twice keeps its last value.

    Raises:
        FlagsError: for an unbalanced quote, a word that is not a flag, or a known
            flag that takes a value given without one.

    Warns:
        UserWarning: for each unknown flag (with a suggestion when one is close).
    """
    flags, unknown = _parse(text)
    for name in unknown:
        warnings.warn(_unknown_flag_message(name), stacklevel=2)
    return flags


def poplar_flags(environ=None):
    """Returns the flags set in the `TF_POPLAR_FLAGS` environment variable.

    Args:
        environ: Mapping to read instead of `os.environ` (for tests).

    Returns:
        dict: name -> value text, or `True` for a flag without a value; `{}` if the
        variable is unset or empty.

    Raises:
        FlagsError: if the variable is malformed (see `parse_poplar_flags`).

    Warns:
        UserWarning: once per process for each unknown flag.
    """
    environ = os.environ if environ is None else environ
    flags, unknown = _parse(environ.get(ENV_VAR, ""))
    for name in unknown:
        _warn_once((ENV_VAR, name), _unknown_flag_message(name))
    return flags


def flag_as_bool(value, default=False):
    """Interprets a flag value as a boolean.

    Args:
        value: A value from `poplar_flags()`: `True`, text, or `None` (unset).
        default: Returned when the value is `None` or not boolean-looking text
            (e.g. "auto").

    Returns:
        bool: the value.
    """
    if value is True or value is False:
        return value
    if isinstance(value, str):
        if value.strip().lower() in _TRUE:
            return True
        if value.strip().lower() in _FALSE:
            return False
    return default


def get_flag(name, default=None, environ=None):
    """Returns one flag of `TF_POPLAR_FLAGS`, or `default` when it is not set.

    Args:
        name: Flag name without the leading dashes, e.g. "executable_cache_path".
        default: Value returned when the flag is absent.
        environ: Mapping to read instead of `os.environ` (for tests).

    Returns:
        The flag's text, `True` for a flag without a value, or `default`.

    Raises:
        FlagsError: if the variable is malformed; unknown flags warn once.
    """
    return poplar_flags(environ).get(name, default)


def use_ipu_model(environ=None):
    """Whether `TF_POPLAR_FLAGS` has `--use_ipu_model`: IPU TensorFlow's switch from IPU
    hardware to its IPU Model, the CPU simulator that reports out-of-memory tiles but
    does not stop on them (`compiler/passes/memory.py`, `check_memory`)."""
    return flag_as_bool(get_flag("use_ipu_model", environ=environ))


ENGINE_OPTIONS_READ = {
    "autoReport.all": "bool",
    "autoReport.directory": "path",
    "debug.allowOutOfMemory": "bool",
}
"""The Poplar engine options ipu_keras reads, with the kind of value each takes."""

ENGINE_OPTIONS_IGNORED = frozenset({
    "autoReport.executionProfileProgramRunCount", "autoReport.outputArchive",
    "autoReport.outputDebugInfo", "autoReport.outputExecutionProfile",
    "autoReport.outputGraphProfile", "autoReport.outputLoweredVars",
    "autoReport.outputSerializedGraph", "autoReport.streamAtEachRun",
    "debug.instrument", "debug.instrumentCompute", "debug.instrumentControlFlow",
    "debug.instrumentExternalExchange", "debug.computeInstrumentationLevel",
    "debug.retainDebugInformation", "debug.verify", "debug.runtimeVerify",
    "debug.nanOverflowException", "debug.outputAllSymbols", "opt.maxCompilationThreads",
    "opt.maxLinkerThreads", "opt.enableSwSyncs", "opt.useAutoloader",
    "profiler.format", "profiler.includeFlopEstimates", "profiler.replicaToProfile",
    "target.deterministicWorkers", "target.hostSyncTimeout",
    "target.syncReplicasIndependently",
})
"""Poplar engine options that mean nothing to the simulator: accepted without a word."""

_ENGINE_EXAMPLE = '\'{"autoReport.all": "true", "autoReport.directory": "./report"}\''


def engine_options(environ=None):
    """The JSON object in `POPLAR_ENGINE_OPTIONS` ({} if unset or empty).

    Args:
        environ: Mapping to read instead of `os.environ` (for tests).

    Raises:
        FlagsError: if the text is not a JSON object, or an option ipu_keras reads has a
            value of the wrong kind.

    Warns:
        UserWarning: once per process for each option that is neither read by ipu_keras
            nor one of Poplar's (`ENGINE_OPTIONS_IGNORED`), with a suggestion.
    """
    environ = os.environ if environ is None else environ
    text = environ.get(ENGINE_OPTIONS_VAR, "").strip()
    if not text:
        return {}
    try:
        options = json.loads(text)
    except ValueError:
        options = None
    if not isinstance(options, dict):
        raise FlagsError(
            f"{ENGINE_OPTIONS_VAR} expected a JSON object such as {_ENGINE_EXAMPLE}. "
            f"Received: {ENGINE_OPTIONS_VAR}={text!r}")
    for name, value in options.items():
        kind = ENGINE_OPTIONS_READ.get(name)
        if kind is not None:
            _check_engine_option(name, kind, value)
        elif name not in ENGINE_OPTIONS_IGNORED:
            hint = _suggestion(name, list(ENGINE_OPTIONS_READ) + sorted(ENGINE_OPTIONS_IGNORED))
            _warn_once((ENGINE_OPTIONS_VAR, name),
                       f"{ENGINE_OPTIONS_VAR}: unknown option '{name}' is ignored by "
                       f"ipu_keras.{hint}")
    return options


def _check_engine_option(name, kind, value):
    if kind == "bool":
        ok = isinstance(value, bool) or (
            isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE)
        expected = '"true" or "false"'
    else:
        ok = isinstance(value, str) and bool(value.strip())
        expected = "a directory path (a non-empty string)"
    if not ok:
        raise FlagsError(
            f"{ENGINE_OPTIONS_VAR}: option '{name}' expected {expected}. Received: "
            f"{name}={value!r}")


__all__ = ["ENGINE_OPTIONS_IGNORED", "ENGINE_OPTIONS_READ", "ENGINE_OPTIONS_VAR", "ENV_VAR",
           "KNOWN_FLAGS", "SWITCHES", "engine_options", "flag_as_bool", "forget_warnings",
           "get_flag", "parse_poplar_flags", "poplar_flags"]
