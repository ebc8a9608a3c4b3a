"""The names of IPU TensorFlow across SDK 2.1-3.4, and how ipu_keras answers each.

Modules declare their names here: deprecated spellings through the decorators
`deprecated_class`, `deprecated_method` and `deprecated_function` (which also make
the name warn, once per process, with a `DeprecationWarning` naming the current
spelling) or `warn_once`; every other name through `declare`. `rows()` collects
the declarations of every declaring module and `markdown()` renders them as
`docs/compatibility.md` (`python -m ipu_keras.compat > docs/compatibility.md`; a
test checks that the file is current). This module imports nothing heavy.
"""
import functools
import importlib
import importlib.util
import inspect
import os
import sys
import threading
import warnings

SDKS = ("2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "3.0", "3.1", "3.2", "3.3", "3.4")

# Every module that declares names; importing them fills the registry.
DECLARING_MODULES = (
    "ipu_keras._src.compat_names",
    "ipu_keras.ops.gen_ipu_ops",
    "ipu_keras.ipu_strategy",
    "ipu_keras.ipu_infeed_queue",
    "ipu_keras.ipu_outfeed_queue",
    "ipu_keras.ops.nn_ops",
    "ipu_keras.ops.rand_ops",
    "ipu_keras.utils",
    "ipu_keras.keras.layers",
    "ipu_keras._src.keras.sdk21",
    "ipu_keras._src.keras.sdk20_pipeline",
)

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


def warn_once(old, new):
    """Warns with a DeprecationWarning, once per process, that `old` is now `new`."""
    with _lock:
        if old in _warned:
            return
        _warned.add(old)
    warnings.warn(f"`{old}` is deprecated: use `{new}` instead. It works as in its SDK "
                  "for now.", DeprecationWarning, stacklevel=_user_stacklevel())


def _user_stacklevel():
    """The `stacklevel` of the first frame outside ipu_keras and keras: the user's line."""
    frame, level = sys._getframe(2), 2  # the caller of warn_once is level 2
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


def rows():
    """Every declared name as (name, status, how, since, until), sorted by name."""
    for module in DECLARING_MODULES:
        importlib.import_module(module)
    return [_ROWS[name] for name in sorted(_ROWS, key=str.lower)]


def _range(since, until):
    """'2.1-3.4' style: from `since` to the last SDK before `until` (3.4 if None)."""
    last = SDKS[-1] if until is None else SDKS[max(0, SDKS.index(until) - 1)]
    return since if since == last else f"{since}-{last}"


def markdown():
    """`docs/compatibility.md`: the table of `rows()`."""
    lines = [
        "# Compatibility with IPU TensorFlow 2 (SDK 2.1-3.4)",
        "",
        "Generated from the declarations in the code (`ipu_keras/compat.py`); do not edit.",
        "Regenerate with `python -m ipu_keras.compat > docs/compatibility.md`.",
        "",
        "`ipu.` is `import ipu_keras as ipu` (where IPU code had",
        "`from tensorflow.python import ipu`); `keras.ipu.` (or `tensorflow.keras.ipu.`) is",
        "the SDK 2.6+ spelling, reached as `ipu_keras.keras.`. A name other work is adding",
        "turns from pending to supported as soon as the code has it (regenerate the table).",
        "A deprecated alias works as in its SDK and warns once with a `DeprecationWarning`",
        "naming the current spelling.",
        "",
        "| name | status | how | in SDKs |",
        "|---|---|---|---|",
    ]
    for name, status, how, since, until in rows():
        lines.append(f"| `{name}` | {status} | {how} | {_range(since, until)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    # Run as a script this file is `__main__`; the declarations go to `ipu_keras.compat`.
    from ipu_keras import compat as _registry

    sys.stdout.write(_registry.markdown())
