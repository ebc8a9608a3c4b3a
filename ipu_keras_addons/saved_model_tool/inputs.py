"""The inputs of `run`: `--inputs`, `--input_exprs` and `--input_examples`, checked.

The strings are parsed by TensorFlow's own `saved_model_cli` functions (same grammar,
same precedence: examples over expressions over files), but an expression is read as
data by `exprs.py` (literals and a few numpy constructors), never `eval`'d. Files are read with
`allow_pickle=False`: a pickle is refused with a designed error, never unpickled. Every
input is checked against the signature (known key, dtype of the same kind, rank and
static dimensions) before anything runs.
"""
import logging

import numpy as np
from tensorflow.python.tools import saved_model_cli as tf_cli

from ipu_keras.errors import SavedModelInputError
from ipu_keras_addons.saved_model_tool import exprs as expressions

logger = logging.getLogger("ipu_keras")


def _load_file(key, filename, variable):
    try:
        data = np.load(filename, allow_pickle=False)
    except FileNotFoundError:
        raise SavedModelInputError(
            f"--inputs expected an existing .npy or .npz file for input '{key}'. Received: "
            f"{key}={filename!r}.") from None
    except ValueError as e:
        raise SavedModelInputError(
            f"--inputs expected a .npy or .npz file for input '{key}'. Received: {filename!r}, "
            f"which needs pickle to load ({e}). Pickle files are refused because loading one "
            "can run arbitrary code; save the array with numpy.save or numpy.savez.") from None
    if isinstance(data, np.ndarray):
        if variable:
            logger.warning("Input file %s holds a single array; the name '%s' is ignored.",
                           filename, variable)
        return data
    with data:
        if variable is None:
            if len(data.files) != 1:
                raise SavedModelInputError(
                    f"--inputs expected '{filename}' to hold one array or a name in brackets. "
                    f"Received: arrays {data.files}. Use {key}={filename}[NAME].")
            return data[data.files[0]]
        if variable not in data.files:
            raise SavedModelInputError(
                f"--inputs expected '{filename}' to hold an array named '{variable}'. "
                f"Received: arrays {data.files}.")
        return data[variable]


def parse_inputs(inputs="", input_exprs="", input_examples=""):
    """The arrays the three options give, by input key (later options win, with a warning)."""
    feeds = {}
    try:
        files = tf_cli.preprocess_inputs_arg_string(inputs or "")
        examples = tf_cli.preprocess_input_examples_arg_string(input_examples or "")
    except (RuntimeError, ValueError) as e:  # TensorFlow's own messages for the grammar
        raise SavedModelInputError(f"ipu_saved_model_cli run: {e}") from None
    for key, (filename, variable) in files.items():
        feeds[key] = _load_file(key, filename, variable)
    exprs = _evaluate_exprs(input_exprs or "")
    for source, values in (("--input_exprs", exprs), ("--input_examples", examples)):
        for key, value in values.items():
            if key in feeds:
                logger.warning("Input '%s' is given more than once; the value of %s is used.",
                               key, source)
            feeds[key] = np.asarray(value)
    if not feeds:
        raise SavedModelInputError(
            "ipu_saved_model_cli run expected at least one of --inputs, --input_exprs or "
            "--input_examples. Received: none.")
    return feeds


def _evaluate_exprs(text):
    """`key=<expression>` pairs, each read by `exprs.evaluate` (literals, numpy constructors)."""
    values = {}
    for item in filter(None, text.split(";")):
        if "=" not in item:
            raise SavedModelInputError(
                f"--input_exprs expected '<input_key>=<expression>'. Received: {item!r}.")
        key, expr = item.split("=", 1)
        values[key] = expressions.evaluate(key, expr)
    return values


def check_inputs(feeds, specs):
    """Checks `feeds` against `specs` (key -> tf.TensorSpec); returns arrays of the spec dtype.

    Raises:
        SavedModelInputError: for an unknown or missing key, a dtype of another kind or a
            shape the signature does not accept.
    """
    unknown = sorted(set(feeds) - set(specs))
    if unknown:
        raise SavedModelInputError(
            f"ipu_saved_model_cli run expected input keys among {sorted(specs)}. Received: "
            f"unknown key(s) {unknown}. Run 'show' with --signature_def to list the inputs.")
    missing = sorted(set(specs) - set(feeds))
    if missing:
        raise SavedModelInputError(
            f"ipu_saved_model_cli run expected a value for every input {sorted(specs)}. "
            f"Received: none for {missing}.")
    checked = {}
    for key, spec in specs.items():
        array = np.asarray(feeds[key])
        dtype = np.dtype(spec.dtype.as_numpy_dtype)
        if array.dtype != dtype and not np.can_cast(array.dtype, dtype, "same_kind"):
            raise SavedModelInputError(
                f"Input '{key}' expected dtype {dtype.name} (or one that converts to it "
                f"without changing kind). Received: dtype={array.dtype.name}.")
        want = spec.shape
        if want.rank is not None and (array.ndim != want.rank or any(
                d is not None and d != n for d, n in zip(want.as_list(), array.shape))):
            raise SavedModelInputError(
                f"Input '{key}' expected shape {tuple(want.as_list())} (None: any size). "
                f"Received: shape={array.shape}.")
        checked[key] = array.astype(dtype, copy=False)
    return checked
