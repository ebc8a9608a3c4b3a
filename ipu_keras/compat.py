"""The names of IPU TensorFlow across SDK 2.1-3.4, and how ipu_keras answers each.

Modules declare their names through `ipu_keras._src.compat` (re-exported here):
deprecated spellings through the decorators
`deprecated_class`, `deprecated_method` and `deprecated_function` (which also make
the name warn, once per process, with a `DeprecationWarning` naming the current
spelling) or `warn_once`; every other name through `declare`. `rows()` collects
the declarations of every declaring module and `markdown()` renders them as
`docs/compatibility.md` (`python -m ipu_keras.compat > docs/compatibility.md`; a
test checks that the file is current). This module imports nothing heavy.
"""
import importlib
import sys

from ipu_keras._src.compat import (  # noqa: F401 - the declaring API, re-exported
    DEPRECATED, NOT_SUPPORTED, PENDING, SDKS, SUPPORTED, LegacySignature, declarations,
    declare, deprecated_class, deprecated_function, deprecated_method, reset_warnings, warn_once,
)

# Every module that declares names; importing them fills the registry.
DECLARING_MODULES = (
    "ipu_keras._src.compat_names",
    "ipu_keras.ops.gen_ipu_ops",
    "ipu_keras.ipu_strategy",
    "ipu_keras.ipu_infeed_queue",
    "ipu_keras.ipu_outfeed_queue",
    "ipu_keras.ops.nn_ops",
    "ipu_keras.ops.rand_ops",
    "ipu_keras.ops.custom_ops",
    "ipu_keras.utils",
    "ipu_keras.keras.layers",
    "ipu_keras._src.keras.sdk21",
    "ipu_keras._src.keras.sdk20_pipeline",
)


def rows():
    """Every declared name as (name, status, how, since, until), sorted by name."""
    for module in DECLARING_MODULES:
        importlib.import_module(module)
    table = declarations()
    return [table[name] for name in sorted(table, key=str.lower)]


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
        "the SDK 2.6+ spelling of `ipu_keras.keras.`, and works as written: `import ipu_keras`",
        "makes `keras.ipu` and `tf.keras.ipu` that module (the one change ipu_keras makes to",
        "another package's namespace). A name other work is adding",
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
