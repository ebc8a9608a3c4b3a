"""The executable cache: compiled executables kept in a directory, shared by processes.

An entry is one file, `<key>.ipuexe`, written by `Executable.save` (a zip with a
SHA-256 checksum; never pickle). The key (`cache_key`) is the SHA-256 of the graph's
fingerprint (`ir/fingerprint.py`), the target, the compile options and the versions of
the package and of the executable format: whatever changes the program changes the
key, and nothing else does (the number of steps of a Keras execution is an input of the
executable, so `steps_per_execution` does not).

An entry is bound to what it was compiled for: it records its `binding` (the key and
the graph's fingerprint) and `load` refuses a file bound to anything else, so an entry
copied or renamed under another key is recompiled, never run as another graph's
program. Every way a load can fail (not a regular file, truncated, altered, unbound,
malformed; `Executable.load` checks the format and the program) is one
`ExecutableFormatError`, which the caller reports and answers by recompiling.

Writes are atomic: the executable is saved to a temporary file in the same directory
and moved into place with `os.replace`, so a reader sees either no entry or a
complete one, and two processes writing the same entry leave one of the two
(identical) files. Readers take no lock: an entry is replaced or removed as a whole,
and a file open for reading stays readable after it is removed.

After a store, `sweep` keeps the directory tidy under a lock file (`.lock`, from
`filelock`), so that two processes do not evict for each other: temporary files older
than `STALE_SECONDS` (left by a process killed while writing; a live writer's file is
younger) are removed, and while the entries exceed the size limit
(`--executable_cache_max_size`, default `DEFAULT_MAX_SIZE`) the least recently used
go, by modification time, which a hit renews. This module owns the files only; when to
use the cache and what to log is `ipu_keras/_src/driver/compile.py`'s business.
"""
import hashlib
import json
import os
import re
import tempfile
import time

import filelock

from ipu_keras._src.device.executable import FORMAT_VERSION, Executable
from ipu_keras._src.ir.fingerprint import fingerprint
from ipu_keras.errors import ConfigurationError
from ipu_keras.version import __version__

SUFFIX = ".ipuexe"
LOCK = ".lock"
STALE_SECONDS = 3600
"""A temporary file this old was left by a writer that died (saving takes seconds)."""
DEFAULT_MAX_SIZE = 1 << 30
"""The size limit of a cache directory's entries when the flag does not set one: 1 GiB,
some hundreds of executables of large models."""
LOCK_SECONDS = 10
_UNITS = {"": 1, "B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}


def binding(graph, target, options):
    """What an entry is compiled for: {"key": its cache key, "graph": the graph's
    fingerprint}.

    Args:
        graph: The IR graph, before the compiler's passes.
        target: The target as a dict (`Target.to_dict()`).
        options: JSON-able compile options (code, planner options, out-of-memory mode).
    """
    graph_fingerprint = fingerprint(graph)
    digest = hashlib.sha256(graph_fingerprint.encode())
    rest = {"target": target, "options": options, "ipu_keras": __version__,
            "format": FORMAT_VERSION}
    digest.update(json.dumps(rest, sort_keys=True, default=str).encode())
    return {"key": digest.hexdigest(), "graph": graph_fingerprint}


def cache_key(graph, target, options):
    """The cache key of compiling `graph` for `target` with `options`: 64 hex digits."""
    return binding(graph, target, options)["key"]


def entry_path(directory, key):
    """The file of the entry `key` in the cache `directory`."""
    return os.path.join(directory, key + SUFFIX)


def load(directory, bound):
    """The executable cached for `bound` (a `binding`), or None if there is no entry. A
    hit renews the entry's modification time, which eviction reads.

    Raises:
        ExecutableFormatError: if the entry cannot be used (module docstring).
    """
    path = entry_path(directory, bound["key"])
    try:
        executable = Executable.load(path, binding=bound)
    except FileNotFoundError:
        return None
    try:
        os.utime(path)
    except OSError:  # a read-only cache still serves its entries
        pass
    return executable


def store(directory, bound, executable):
    """Saves `executable` as the entry of `bound`, atomically; returns the entry's path."""
    os.makedirs(directory, exist_ok=True)
    path = entry_path(directory, bound["key"])
    handle, temporary = tempfile.mkstemp(prefix=f".{bound['key'][:16]}-", suffix=".tmp",
                                         dir=directory)
    os.close(handle)
    try:
        executable.save(temporary, binding=bound)
        os.chmod(temporary, 0o644)  # mkstemp makes it private; entries are shared
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
    return path


def sweep(directory, max_size=DEFAULT_MAX_SIZE):
    """Removes stale temporary files, then the least recently used entries while the
    entries take more than `max_size` bytes (0: no limit).

    Returns:
        list: the paths removed; [] when another process holds the lock for longer than
        `LOCK_SECONDS` (it is sweeping).

    Raises:
        OSError: if the lock file cannot be created.
    """
    try:
        with filelock.FileLock(os.path.join(directory, LOCK), timeout=LOCK_SECONDS):
            return _remove_stale(directory) + _evict(directory, max_size)
    except filelock.Timeout:
        return []


def _files(directory):
    """(name, stat) of the directory's files, skipping those gone meanwhile."""
    found = []
    for entry in os.scandir(directory):
        try:
            found.append((entry.name, entry.stat(follow_symlinks=False)))
        except FileNotFoundError:
            pass
    return found


def _remove(paths):
    removed = []
    for path in paths:
        try:
            os.remove(path)
            removed.append(path)
        except FileNotFoundError:
            pass
    return removed


def _remove_stale(directory):
    oldest = time.time() - STALE_SECONDS
    return _remove(os.path.join(directory, name) for name, info in _files(directory)
                   if name.startswith(".") and name.endswith(".tmp")
                   and info.st_mtime < oldest)


def _evict(directory, max_size):
    if not max_size:
        return []
    entries = sorted((info.st_mtime, info.st_size, name) for name, info in _files(directory)
                     if name.endswith(SUFFIX) and os.path.isfile(os.path.join(directory, name)))
    total = sum(size for _, size, _ in entries)
    victims = []
    for _, size, name in entries:
        if total <= max_size:
            break
        victims.append(os.path.join(directory, name))
        total -= size
    return _remove(victims)


def parse_size(value, flag="executable_cache_max_size"):
    """Bytes of a size flag's value: an integer with an optional unit B, KB, MB, GB or TB
    (binary multiples), e.g. "500MB" or "1.5GB"; 0 means no limit.

    Raises:
        ConfigurationError: if the value is not such a size.
    """
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?B?)\s*",
                         value if isinstance(value, str) else "", re.IGNORECASE)
    if match is None or match.group(2).upper() not in _UNITS:
        raise ConfigurationError(
            f"TF_POPLAR_FLAGS: --{flag} expected a size in bytes, optionally with a unit "
            f"(B, KB, MB, GB, TB), e.g. --{flag}=2GB; 0 for no limit. Received: "
            f"--{flag}{'' if value is True else '=' + str(value)}")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


__all__ = ["DEFAULT_MAX_SIZE", "STALE_SECONDS", "SUFFIX", "binding", "cache_key",
           "entry_path", "load", "parse_size", "store", "sweep"]
