"""`--input_exprs` values read as data: Python literals and a few numpy constructors.

TensorFlow 1's `saved_model_cli` evaluated each expression with `eval`, which runs any
code (`().__class__.__base__.__subclasses__()` reaches `os.system` whatever the globals).
Here an expression is parsed with `ast` and only these forms are computed:

* literals: numbers, strings, `True`/`False`/`None`, and lists, tuples and dicts of them;
* arithmetic on numbers and constructed arrays: unary `+`/`-`, and `+ - * / // %` and
  `**` (a number as exponent, of at most `MAX_EXPONENT` in magnitude);
* the constructors `np.array`, `np.asarray`, `np.ones`, `np.zeros`, `np.full`,
  `np.arange`, `np.linspace`, `np.eye`, `np.identity`, and `np.random.rand`, `randn`,
  `randint`, `random`, `random_sample`, `uniform`, `normal`, `standard_normal`, with
  literal arguments (`numpy` works as well as `np`);
* numpy dtypes as values (`np.float32`, `np.int64`, ...), e.g. `dtype=np.float16`;
* the array methods `.astype(dtype)` and `.reshape(shape)` on a constructed array.

Anything else (names, other attributes or calls, comprehensions, lambdas, subscripts)
is refused with `SavedModelInputError` before anything is computed, and so is an array of
more than `MAX_ELEMENTS` elements.
"""
import ast
import math
import operator

import numpy as np

from ipu_keras.errors import SavedModelInputError

MAX_ELEMENTS = 1 << 26
"""The most elements an expression may build (512 MiB of float64)."""
MAX_EXPONENT = 1024
MAX_POWER_BITS = 1 << 16
"""An integer power of more bits than this is refused (nested powers grow without bound)."""

_CONSTRUCTORS = {
    name: getattr(np, name) for name in (
        "array", "asarray", "ones", "zeros", "full", "arange", "linspace", "eye", "identity")
}
_RANDOM = {
    name: getattr(np.random, name) for name in (
        "rand", "randn", "randint", "random", "random_sample", "uniform", "normal",
        "standard_normal")
}
_DTYPES = {name: getattr(np, name) for name in (
    "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128")}
_METHODS = ("astype", "reshape")
_NUMPY = ("np", "numpy")
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
           ast.Pow: operator.pow}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_ALLOWED = ("np.array/asarray/ones/zeros/full/arange/linspace/eye/identity, "
            "np.random.rand/randn/randint/random/random_sample/uniform/normal/standard_normal, "
            "numpy dtypes, .astype() and .reshape()")


class _Refused(Exception):
    """What an expression contains that is not allowed (turned into the designed error)."""


def evaluate(key, text):
    """The value of `text`, the expression given for input `key` (module docstring).

    Raises:
        SavedModelInputError: the expression is not of the allowed forms, builds too large
            an array, or its constructor raised.
    """
    try:
        tree = ast.parse(text.strip(), mode="eval")
        return _value(tree.body)
    except SyntaxError as e:
        reason = f"is not a Python expression ({e.msg})"
    except _Refused as e:
        reason = str(e)
    except (ArithmeticError, TypeError, ValueError) as e:  # the constructor's own complaint
        reason = f"raised {e!r}"
    raise SavedModelInputError(
        f"--input_exprs expected, for input '{key}', a Python literal or one of: {_ALLOWED}. "
        f"Received: {text!r}, which {reason}. Expressions are read as data, never run as "
        "code.") from None


def _value(node):
    if isinstance(node, ast.Constant) and isinstance(
            node.value, (int, float, complex, str, bool, type(None))):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_value(item) for item in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {_value(k): _value(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_number(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _arithmetic(type(node.op), _number(node.left), _number(node.right))
    if isinstance(node, ast.Attribute):
        return _dtype(node)
    if isinstance(node, ast.Call):
        return _call(node)
    raise _Refused(f"contains {_describe(node)} (a {type(node).__name__}), which is not allowed")


def _number(node):
    """An operand of arithmetic: a number, or an array a constructor built."""
    value = _value(node)
    if isinstance(value, bool) or not isinstance(value, (int, float, complex, np.ndarray,
                                                          np.generic)):
        raise _Refused(f"does arithmetic on {type(value).__name__} {value!r}, not a number")
    return value


def _arithmetic(op, left, right):
    if op is ast.Pow and (not isinstance(right, (int, float)) or abs(right) > MAX_EXPONENT
                          or isinstance(left, int) and abs(right) * max(
                              left.bit_length(), 1) > MAX_POWER_BITS):
        raise _Refused(f"raises to a power too large to compute, or not a number "
                       f"({_short(left)} ** {_short(right)})")
    shape = np.broadcast_shapes(np.shape(left), np.shape(right))
    if math.prod(shape) > MAX_ELEMENTS:
        raise _Refused(f"broadcasts to shape {shape}, more than {MAX_ELEMENTS} elements")
    return _BINARY[op](left, right)


def _short(value):
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _dotted(node):
    """'np.random.rand' for that attribute chain of names, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id] + parts[::-1])


def _dtype(node):
    name = _dotted(node)
    head, _, leaf = (name or "").partition(".")
    if head in _NUMPY and leaf in _DTYPES:
        return _DTYPES[leaf]
    raise _Refused(f"names {name or _describe(node)}, which is not a numpy dtype")


def _call(node):
    args = [_value(a) for a in node.args if not isinstance(a, ast.Starred)]
    if len(args) != len(node.args) or any(k.arg is None for k in node.keywords):
        raise _Refused("unpacks arguments with * or **")
    kwargs = {k.arg: _value(k.value) for k in node.keywords}
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in _METHODS and isinstance(
            func.value, ast.Call):
        array = _call(func.value)
        result = getattr(np.asarray(array), func.attr)(*args, **kwargs)
        return _checked(result)
    name = _dotted(func) or ""
    head, _, rest = name.partition(".")
    if head in _NUMPY and rest in _CONSTRUCTORS:
        constructor = _CONSTRUCTORS[rest]
    elif head in _NUMPY and rest.startswith("random.") and rest[7:] in _RANDOM:
        constructor = _RANDOM[rest[7:]]
    else:
        raise _Refused(f"calls {name or _describe(func)}, which is not an allowed constructor")
    _check_size(rest, args, kwargs)
    return _checked(constructor(*args, **kwargs))


def _first(index, keyword):
    """The argument at `index`, or named `keyword`; None if not given."""
    return lambda args, kwargs: kwargs.get(keyword, args[index] if len(args) > index else None)


def _arange_length(args, kwargs):
    numbers = [a for a in args[:3] if isinstance(a, (int, float)) and not isinstance(a, bool)]
    if len(numbers) != len(args[:3]) or not numbers:
        return None
    start, stop = (0, numbers[0]) if len(numbers) == 1 else numbers[:2]
    step = numbers[2] if len(numbers) > 2 else kwargs.get("step", 1)
    return math.ceil((stop - start) / step) if step else 0


_SHAPE_OF = {   # constructor -> the shape (or length) it is asked for, from its arguments
    "ones": _first(0, "shape"), "zeros": _first(0, "shape"), "full": _first(0, "shape"),
    "eye": lambda a, k: (a[0] if a else k.get("N"),
                         (a[1] if len(a) > 1 else k.get("M")) or (a[0] if a else k.get("N"))),
    "identity": lambda a, k: ((a[0],) * 2 if a else (k.get("n"),) * 2),
    "linspace": lambda a, k: k.get("num", a[2] if len(a) > 2 else 50),
    "arange": _arange_length,
    "random.rand": lambda a, k: a, "random.randn": lambda a, k: a,
    "random.random": _first(0, "size"), "random.random_sample": _first(0, "size"),
    "random.standard_normal": _first(0, "size"), "random.uniform": _first(2, "size"),
    "random.normal": _first(2, "size"), "random.randint": _first(2, "size"),
}


def _check_size(name, args, kwargs):
    """Refuses a request for more than MAX_ELEMENTS elements before it is allocated."""
    shape = _SHAPE_OF[name](args, kwargs) if name in _SHAPE_OF else None
    dims = shape if isinstance(shape, (list, tuple)) else [shape]
    if shape is None or not all(isinstance(d, (int, float)) and not isinstance(d, bool)
                                for d in dims):
        return   # nothing asked, or numpy refuses it with its own message
    if math.prod(max(int(d), 0) for d in dims) > MAX_ELEMENTS:
        raise _Refused(f"asks for shape {shape}, more than {MAX_ELEMENTS} elements")


def _checked(value):
    if np.size(value) > MAX_ELEMENTS:
        raise _Refused(f"builds {np.size(value)} elements, more than {MAX_ELEMENTS}")
    return value


def _describe(node):
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."
