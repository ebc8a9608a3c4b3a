"""The declarations behind `ipu_keras.compat`: the table of IPU TensorFlow names and the
deprecation decorators.

Modules at every level declare their names here: deprecated spellings through
`deprecated_class`, `deprecated_method` and `deprecated_function` (which also make the
name warn, once per process, with a `DeprecationWarning` naming the current spelling),
`warn_once` or `LegacySignature`; every other name through `declare`. This module
imports nothing of ipu_keras, so any module may declare; `ipu_keras.compat` collects
and renders the table.
"""
import functools
import importlib.util
import inspect
import os
import sys
import threading
import warnings

SDKS = ("2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "3.0", "3.1", "3.2", "3.3", "3.4")

SUPPORTED = "supported"
DEPRECATED = "deprecated alias"
PENDING = "pending"
NOT_SUPPORTED = "not supported"

_LIBRARY_DIRS = tuple(os.path.dirname(spec.origin) + os.sep for spec in (
    importlib.util.find_spec("ipu_keras"), importlib.util.find_spec("keras")) if spec)
_ROWS = {}
_warned = set()
_lock = threading.Lock()


def declare(name, status, how, since="2.1", until=None):
    """Records how ipu_keras answers the IPU TensorFlow name `name`.

    Args:
        name: The name as IPU code spells it, e.g. `ipu.ipu_strategy.IPUStrategy`.
        status: One of `SUPPORTED`, `DEPRECATED`, `PENDING`, `NOT_SUPPORTED`.
        how: What ipu_keras does with it (one line).
        since: The first SDK (of `SDKS`, or earlier) that had the name.
        until: The first SDK without it, or None if SDK 3.4 still has it.
    """
    _ROWS[name] = (name, status, how, since, until)


def declarations():
    """Name -> (name, status, how, since, until) of every name declared so far."""
    return _ROWS


def warn_once(old, new):
    """Warns with a DeprecationWarning, once per process, that `old` is now `new`."""
    with _lock:
        if old in _warned:
            return
        _warned.add(old)
    warnings.warn(f"`{old}` is deprecated: use `{new}` instead. It works as in its SDK "
                  "for now.", DeprecationWarning, stacklevel=user_stacklevel())


def user_stacklevel():
    """The `stacklevel` of the first frame outside ipu_keras and keras: the user's line.

    For a `warnings.warn` in the function that calls this one (level 1), however deep in
    ipu_keras' and Keras' frames the user's call reached it."""
    frame, level = sys._getframe(2), 2  # the caller of the warning function is level 2
    while frame is not None and frame.f_code.co_filename.startswith(_LIBRARY_DIRS):
        frame, level = frame.f_back, level + 1
    return level


def reset_warnings():
    """Forgets which names warned (for tests that check a warning appears once)."""
    with _lock:
        _warned.clear()


def deprecated_function(old, new, since, until):
    """Decorates a function kept under an old name: it warns once, then runs."""
    declare(old, DEPRECATED, f"works; warns once, use `{new}`", since, until)

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            warn_once(old, new)
            return fn(*args, **kwargs)

        return wrapper

    return decorate


deprecated_method = deprecated_function


def deprecated_class(old, new, since, until):
    """Decorates a class kept under an old name: constructing it warns once."""
    declare(old, DEPRECATED, f"works; warns once, use `{new}`", since, until)

    def decorate(cls):
        original = cls.__init__

        @functools.wraps(original)
        def __init__(self, *args, **kwargs):
            warn_once(old, new)
            original(self, *args, **kwargs)

        cls.__init__ = __init__
        return cls

    return decorate


class LegacySignature:
    """A constructor that also accepts the form of an older SDK, warning once per old argument.

    Each old argument is declared in the table as `owner(name=)`.

    Args:
        owner: The public name of the callable, e.g. `ipu.ipu_outfeed_queue.IPUOutfeedQueue`.
        current: A function with the current signature, `self` first (only its signature
            is used; set it as the constructor's `__signature__`).
        legacy: A function with the older signature, `self` first.
        renamed: Old argument name -> what to write instead (for the warning).
        is_legacy: `(args, kwargs) -> bool`: the call (`self` first) uses the older form.
        since: The first SDK of the older form (for the table).
        until: The first SDK without it (SDK 2.4 removed the feeds' old arguments).
    """

    def __init__(self, owner, current, legacy, renamed, is_legacy, since="2.1", until="2.4"):
        self.owner = owner
        self.current = inspect.signature(current)
        self.legacy = inspect.signature(legacy)
        self.renamed = renamed
        self.is_legacy = is_legacy
        for name, new in renamed.items():
            declare(f"{owner}({name}=)", DEPRECATED,
                    f"accepted and ignored; warns once, use `{new}`", since, until)

    def bind(self, args, kwargs):
        """The arguments by name, with defaults applied; old names warn once each."""
        old = self.is_legacy(args, kwargs) or any(k in self.renamed for k in kwargs)
        bound = (self.legacy if old else self.current).bind(*args, **kwargs)
        for name in bound.arguments:  # only the arguments the call gave
            if name in self.renamed:
                warn_once(f"{self.owner}({name}=)", self.renamed[name])
        bound.apply_defaults()
        return bound.arguments
