"""The executable cache: compiled executables kept in a directory, shared by processes.

An entry is one file, `<key>.ipuexe`, written by `Executable.save` (a zip with a
SHA-256 checksum; never pickle). The key (`cache_key`) is the SHA-256 of the graph's
canonical text (`ir/fingerprint.py`), the target, the compile options and the
versions of the package and of the executable format: whatever changes the program
changes the key, and nothing else does (the number of steps of a Keras execution is
an input of the executable, so `steps_per_execution` does not).

Writes are atomic: the executable is saved to a temporary file in the same directory
and moved into place with `os.replace`, so a reader sees either no entry or a
complete one, and two processes writing the same entry leave one of the two
(identical) files. A damaged entry (`ExecutableFormatError` on load) is reported to
the caller, which recompiles and stores it again. This module owns the files only;
when to use the cache and what to log is `ipu_keras/_src/driver/compile.py`'s business.
"""
import hashlib
import json
import os
import tempfile

from ipu_keras._src.device.executable import FORMAT_VERSION, Executable
from ipu_keras._src.ir.fingerprint import canonical_text
from ipu_keras.version import __version__

SUFFIX = ".ipuexe"


def cache_key(graph, target, options):
    """The cache key of compiling `graph` for `target` with `options`.

    Args:
        graph: The IR graph, before the compiler's passes.
        target: The target as a dict (`Target.to_dict()`).
        options: JSON-able compile options (code, planner options, out-of-memory mode).

    Returns:
        str: 64 hex digits.
    """
    digest = hashlib.sha256(canonical_text(graph).encode())
    rest = {"target": target, "options": options, "ipu_keras": __version__,
            "format": FORMAT_VERSION}
    digest.update(json.dumps(rest, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def entry_path(directory, key):
    """The file of the entry `key` in the cache `directory`."""
    return os.path.join(directory, key + SUFFIX)


def load(directory, key):
    """The cached executable, or None if there is no entry.

    Raises:
        ExecutableFormatError: if the entry is truncated or altered.
    """
    path = entry_path(directory, key)
    if not os.path.exists(path):
        return None
    return Executable.load(path)


def store(directory, key, executable):
    """Saves `executable` as the entry `key`, atomically; returns the entry's path."""
    os.makedirs(directory, exist_ok=True)
    path = entry_path(directory, key)
    handle, temporary = tempfile.mkstemp(prefix=f".{key[:16]}-", suffix=".tmp", dir=directory)
    os.close(handle)
    try:
        executable.save(temporary)
        os.chmod(temporary, 0o644)  # mkstemp makes it private; entries are shared
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
    return path


__all__ = ["SUFFIX", "cache_key", "entry_path", "load", "store"]
