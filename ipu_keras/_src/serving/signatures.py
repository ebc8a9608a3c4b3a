"""The input signatures of an `ipu.serving` export, checked with the SDK's rules.

Owns which source describes each function's inputs (an explicit `*_signature` argument,
an `input_dataset`'s `element_spec`, or the `input_signature` of a `tf.function`), the
errors for each way that can go wrong (the SDK's wording, our error classes which are
still `ValueError`/`TypeError`), and the renaming of every `tf.TensorSpec` to the Python
parameter it feeds: those names become the SavedModel signature's input keys.
"""
import inspect
import os
import shutil

import tensorflow as tf

from ipu_keras.errors import ServingError, ServingTypeError


def check_export_dir(export_dir, purge_export_dir):
    """Refuses a non-empty `export_dir`, or empties it when `purge_export_dir`."""
    if not isinstance(export_dir, (str, os.PathLike)) or not str(export_dir):
        raise ServingTypeError(
            f"ipu.serving expected `export_dir` to be a directory path. Received: "
            f"export_dir={export_dir!r}")
    export_dir = os.fspath(export_dir)
    if os.path.exists(export_dir) and not os.path.isdir(export_dir):
        raise ServingError(
            f'Directory "{export_dir}" is not a directory: ipu.serving expected `export_dir` '
            f"to be a new or empty directory. Received: export_dir={export_dir!r}, a file.")
    if os.path.isdir(export_dir) and os.listdir(export_dir):
        if not purge_export_dir:
            raise ServingError(
                f'Directory "{export_dir}" is not empty. Please specify an empty directory '
                f"(or pass purge_export_dir=True to empty it first). Received: "
                f"export_dir={export_dir!r} holding {sorted(os.listdir(export_dir))[:5]}.")
        shutil.rmtree(export_dir)
    return export_dir


def _is_tf_function(fn):
    return isinstance(fn, tf.types.experimental.PolymorphicFunction)


def _require_tf_function(fn, fn_name, dataset_possible=True):
    """The `input_signature` of `fn`, which must be a tf.function that has one."""
    alternatives = f"`{fn_name}_signature`" + (" or `input_dataset`" if dataset_possible
                                               else "")
    if not _is_tf_function(fn):
        raise ServingError(
            f"`input_signature` deduction from given `{fn_name}` is not possible. Please mark "
            f"it as tf.function with `input_signature` parameter set or provide "
            f"{alternatives}. Received: {fn_name}={fn!r}")
    if fn.input_signature is None:
        raise ServingError(
            f"Empty `input_signature` inside provided tf.function `{fn_name}`. Please specify "
            f"it or provide {alternatives}. Received: {fn_name}={fn!r}")


def _check_spec_list(name, signature):
    if not isinstance(signature, (tuple, list)):
        raise ServingTypeError(
            f"`{name}` must be an instance of tuple or list. Received: {type(signature)}")
    if not signature:
        raise ServingError(f"`{name}` must be not empty. Received: {name}={signature!r}")
    for index, spec in enumerate(signature):
        if not isinstance(spec, tf.TensorSpec):
            raise ServingTypeError(
                f"`{name}[{index}]` is not an instance of TensorSpec. Received: {spec!r}")


def check_sources(predict_step, predict_step_signature=None, input_dataset=None,
                  preprocessing_step=None, preprocessing_step_signature=None,
                  postprocessing_step=None, postprocessing_step_signature=None):
    """Checks that each function's input signature can be found, one source each.

    Without preprocessing, the exported inputs are `predict_step`'s: from
    `predict_step_signature` or `input_dataset` (not both), else its tf.function
    signature. With preprocessing, the exported inputs are `preprocessing_step`'s
    (`preprocessing_step_signature` or `input_dataset`, else its tf.function signature)
    and `predict_step` needs a signature of its own. Postprocessing needs one too.
    """
    if input_dataset is not None and not isinstance(input_dataset, tf.data.Dataset):
        raise ServingTypeError(
            f"If `input_dataset` is provided, it should be an instance of tf.Dataset. "
            f"Received: {type(input_dataset)}")
    if preprocessing_step is None:
        if input_dataset is not None and predict_step_signature is not None:
            raise ServingError(
                "Both `predict_step_signature` and `input_dataset` cannot be provided. "
                "Please pass only one of them.")
        if input_dataset is None and predict_step_signature is None:
            _require_tf_function(predict_step, "predict_step")
    else:
        if preprocessing_step_signature is not None and input_dataset is not None:
            raise ServingError(
                "Both `preprocessing_step_signature` and `input_dataset` cannot be provided. "
                "Please pass only one of them.")
        if preprocessing_step_signature is None and input_dataset is None:
            _require_tf_function(preprocessing_step, "preprocessing_step")
        if predict_step_signature is None:
            _require_tf_function(predict_step, "predict_step", dataset_possible=False)
    if postprocessing_step is not None and postprocessing_step_signature is None:
        _require_tf_function(postprocessing_step, "postprocessing_step",
                             dataset_possible=False)
    for name, value in (("predict_step_signature", predict_step_signature),
                        ("preprocessing_step_signature", preprocessing_step_signature),
                        ("postprocessing_step_signature", postprocessing_step_signature)):
        if value is not None:
            _check_spec_list(name, value)


def parameter_names(fn):
    """The names of `fn`'s parameters (of the Python function behind a tf.function)."""
    target = getattr(fn, "python_function", fn)
    try:
        parameters = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return None
    names = []
    for p in parameters:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            return None   # *args: the count is the signature's
        names.append(p.name)
    return names


def prepare(fn, fn_name, signature=None, input_dataset=None, leading=()):
    """The `tf.TensorSpec`s of `fn`'s fed inputs, each named after its parameter.

    Args:
        fn: The function (Python or tf.function).
        fn_name: Its name in messages ("predict_step", ...).
        signature: An explicit list of specs, else `input_dataset`'s element spec, else the
            tf.function's `input_signature`.
        input_dataset: A `tf.data.Dataset` (its element: a tensor or a tuple of them).
        leading: Tensors passed before the fed inputs (a pipeline's `inputs`): their
            parameters are not part of the result.
    """
    if signature is None and input_dataset is not None:
        signature = tf.nest.flatten(input_dataset.element_spec)
    elif signature is None and _is_tf_function(fn):
        signature = fn.input_signature
        signature = tf.nest.flatten(signature) if signature is not None else None
    if signature is None:
        raise ServingError(f"Missing input_signature for `{fn_name}`. Received: {fn!r}")
    signature = list(signature)
    names = parameter_names(fn)
    if names is None:
        names = [spec.name or f"input_{i}" for i, spec in enumerate(signature)]
        names = names[len(leading):] if len(names) > len(leading) else names
    else:
        names = names[len(leading):]
    if leading and len(signature) == len(names) + len(leading):
        signature = signature[len(leading):]   # a signature that names the leading inputs too
    if len(signature) != len(names):
        raise ServingError(
            f"Length of input_signature does not match the number of `{fn_name}` arguments. "
            f"Received: input_signature={signature}, arguments={names}")
    return [tf.TensorSpec(s.shape, s.dtype, name=n) for s, n in zip(signature, names)]


def check_output_names(output_names):
    """`output_names` as a list (a string is one name), or None."""
    if output_names is None:
        return None
    if isinstance(output_names, str):
        return [output_names]
    if not isinstance(output_names, list) or not all(isinstance(n, str) for n in output_names):
        raise ServingTypeError(
            f"output_names must be either a string or a list of strings. Received: "
            f"{output_names!r} of type {type(output_names)}")
    if len(set(output_names)) != len(output_names):
        raise ServingError(f"output_names must be unique. Received: {output_names}")
    return output_names


def check_iterations(iterations, what="iterations"):
    """`iterations` as a positive int (a Python or numpy integer)."""
    try:
        valid = int(iterations) == iterations and int(iterations) >= 1
    except (TypeError, ValueError):
        valid = False
    if isinstance(iterations, bool) or not valid:
        raise ServingError(
            f"ipu.serving expected `{what}` to be a positive integer (the batches one run of "
            f"the engine reads). Received: {what}={iterations!r}")
    return int(iterations)
