"""The generated docs: `docs/supported_ops.md` from the op registry (every TensorFlow op type
the tracer imports, the op family that imports it and the IR ops its importer emits) and
`docs/tolerances.md` from `tolerances.ROWS`.

`python -m ipu_keras._src.conformance.docs [DIRECTORY]` rewrites both; `render_supported_ops()`
returns the first's text (tests/conformance/test_docs.py and test_tolerances.py check the
files are current). Needs
no TensorFlow: the IR ops an importer emits are read from its bytecode, i.e. the
first argument of each `b.emit(...)` call (a constant, a closure variable or a
parameter default), `b.const(...)` as `const`, an op looked up in a module-level
dict by the TensorFlow type, and, followed recursively, the `ipu_keras._src.ops` helper
functions it calls. An importer that picks its op at run time from a local variable
is credited with every op name among its constants: the list may be a superset.
"""
import dis
import inspect
import pathlib
import sys

from ipu_keras._src.conformance import tolerances
from ipu_keras._src.ops import registry

DOCS_DIR = pathlib.Path(__file__).resolve().parents[3] / "docs"
DOCS_PATH = DOCS_DIR / "supported_ops.md"
TOLERANCES_PATH = DOCS_DIR / "tolerances.md"
_LOADS = ("LOAD_CONST", "LOAD_DEREF", "LOAD_FAST", "LOAD_CLOSURE")


def _closure(fn):
    names = fn.__code__.co_freevars
    cells = fn.__closure__ or ()
    values = {}
    for name, cell in zip(names, cells):
        try:
            values[name] = cell.cell_contents
        except ValueError:  # an empty cell
            pass
    return values


def _defaults(fn):
    return {name: p.default for name, p in inspect.signature(fn).parameters.items()
            if p.default is not inspect.Parameter.empty}


def _codes(code):
    """A code object and the code of the functions and comprehensions nested in it."""
    yield code
    for const in code.co_consts:
        if inspect.iscode(const):
            yield from _codes(const)


def _is_ops_function(value):
    return inspect.isfunction(value) and value.__module__.startswith("ipu_keras._src.ops.")


def _emitted(fn, tf_type, ops, seen):
    """The IR ops `fn` may emit importing `tf_type` (see the module docstring)."""
    if fn in seen:
        return set()
    seen.add(fn)
    closure, defaults, found = _closure(fn), _defaults(fn), set()
    instructions = [i for code in _codes(fn.__code__) for i in dis.get_instructions(code)]
    for before, after in zip(instructions, instructions[1:]):
        if before.opname in ("LOAD_METHOD", "LOAD_ATTR") and before.argval == "const":
            found.add("const")
        if before.opname not in ("LOAD_METHOD", "LOAD_ATTR") or before.argval != "emit":
            continue
        if after.opname == "LOAD_CONST":
            found.add(after.argval)
        elif after.argval in closure or after.argval in defaults:
            found.add({**defaults, **closure}[after.argval])
        else:  # a local variable: any op name the function mentions
            found |= {c for c in fn.__code__.co_consts if isinstance(c, str) and c in ops}
    for i in instructions:
        value = fn.__globals__.get(i.argval) if i.opname == "LOAD_GLOBAL" else None
        if _is_ops_function(value):
            found |= _emitted(value, tf_type, ops, seen)
        elif isinstance(value, dict) and isinstance(value.get(tf_type), str):
            found.add(value[tf_type])  # an op looked up by TensorFlow type
    for value in closure.values():
        if _is_ops_function(value):
            found |= _emitted(value, tf_type, ops, seen)
    return {op for op in found if op in ops}


def op_table():
    """`{family module: [(TensorFlow op type, sorted IR ops), ...]}`, sorted."""
    ops = registry.all_ops()
    table = {}
    for tf_type in registry.supported_tf_ops():
        importer = registry.get_importer(tf_type)
        emitted = sorted(_emitted(importer, tf_type, ops, set()))
        module = importer.__module__
        if module == registry.__name__:  # `tf_direct`: the family of the op it emits
            module = ops[emitted[0]].module
        table.setdefault(module, []).append((tf_type, emitted))
    return dict(sorted(table.items()))


def _summary(module_name):
    doc = inspect.getdoc(sys.modules[module_name]) or ""
    return doc.split("\n\n")[0].replace("\n", " ")


def render_supported_ops():
    """The text of docs/supported_ops.md."""
    table = op_table()
    tf_count = sum(len(rows) for rows in table.values())
    lines = [
        "# Supported TensorFlow ops",
        "",
        "Generated from the op registry by `python -m ipu_keras._src.conformance.docs`; do not",
        "edit by hand (`tests/conformance/test_docs.py` checks that it is current).",
        "",
        f"{tf_count} TensorFlow op types import to {len(registry.all_ops())} IR ops in "
        f"{len(table)} op families.",
        "A TensorFlow op outside this list raises `ipu_keras.errors.UnsupportedOpError`",
        "naming the op and its Keras layer; `ipu_keras.supported_ops()` lists the same",
        "types at run time. \"IR ops\" are the ops an importer may emit (none: the op",
        "passes its input through).",
    ]
    for module, rows in table.items():
        path = module.replace(".", "/") + ".py"
        lines += ["", f"## {module.rsplit('.', 1)[-1]} (`{path}`)", "", _summary(module), "",
                  "| TensorFlow op | IR ops |", "|---|---|"]
        lines += [f"| `{tf_type}` | {', '.join(f'`{op}`' for op in emitted) or '—'} |"
                  for tf_type, emitted in rows]
    return "\n".join(lines) + "\n"


def main(argv):
    directory = pathlib.Path(argv[0]) if argv else DOCS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    for path, render in ((DOCS_PATH, render_supported_ops), (TOLERANCES_PATH, tolerances.render)):
        (directory / path.name).write_text(render(), encoding="utf-8")
        print(f"Wrote {directory / path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
