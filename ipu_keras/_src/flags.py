"""`TF_POPLAR_FLAGS`: the environment switches of Graphcore's IPU TensorFlow.

`poplar_flags()` reads the variable each time it is called (it is cheap), so a
test or a notebook can change it between runs. Flags keep their text values;
`flag_as_bool()` interprets the boolean-looking ones. Unknown flags warn, they do
not fail: the original ignores flags it does not use, and so do we.

Example: `TF_POPLAR_FLAGS="--use_ipu_model --executable_cache_path=/tmp/x"` gives
`{"use_ipu_model": True, "executable_cache_path": "/tmp/x"}`.
"""
import difflib
import os
import shlex
import warnings

ENV_VAR = "TF_POPLAR_FLAGS"

KNOWN_FLAGS = {
    "use_ipu_model": "Run on the IPU Model (the simulator is always used here).",
    "executable_cache_path": "Directory in which compiled executables are cached.",
    "show_progress_bar": "Compilation progress bar: true, false or auto.",
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


def parse_poplar_flags(text):
    """Parses a `TF_POPLAR_FLAGS`-style string.

    Args:
        text: Flags separated by whitespace, each `--name` or `--name=value`;
            values may be shell-quoted.

    Returns:
        dict: name -> value text, or `True` for a flag without a value. A flag
        given twice keeps its last value.

    Warns:
        UserWarning: for an unknown flag (with a suggestion when one is close) or
        a word that is not a flag; neither stops parsing.
    """
    flags = {}
    try:
        words = shlex.split(text or "")
    except ValueError:  # unbalanced quotes: fall back to plain whitespace
        words = (text or "").split()
    for word in words:
        if not word.startswith("--") or len(word) == 2:
            warnings.warn(
                f"{ENV_VAR}: ignoring '{word}', which is not a flag; expected --name or "
                f"--name=value. Received: {ENV_VAR}={text!r}", stacklevel=2)
            continue
        name, sep, value = word[2:].partition("=")
        if name not in KNOWN_FLAGS:
            close = difflib.get_close_matches(name, list(KNOWN_FLAGS), n=1)
            hint = f" Did you mean '--{close[0]}'?" if close else ""
            warnings.warn(
                f"{ENV_VAR}: unknown flag '--{name}' is ignored by ipu_keras.{hint}",
                stacklevel=2)
        flags[name] = value if sep else True
    return flags


def poplar_flags(environ=None):
    """Returns the flags set in the `TF_POPLAR_FLAGS` environment variable.

    Args:
        environ: Mapping to read instead of `os.environ` (for tests).

    Returns:
        dict: name -> value text, or `True` for a flag without a value; `{}` if the
        variable is unset or empty.
    """
    environ = os.environ if environ is None else environ
    return parse_poplar_flags(environ.get(ENV_VAR, ""))


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
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unknown flags warn from poplar_flags() only
        return poplar_flags(environ).get(name, default)


__all__ = ["ENV_VAR", "KNOWN_FLAGS", "flag_as_bool", "get_flag", "parse_poplar_flags",
           "poplar_flags"]
