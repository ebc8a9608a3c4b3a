"""`ipu.keras.layers`: the IPU Keras layers' home before the addons package (SDK 2.1-3.0).

A name is looked up on first use: in `ipu_keras_addons.keras.layers` if that package has
it (the IPU layers: `Dropout`, `Embedding`, `LSTM`, `GroupNormalization`, ...), else in
`keras.layers` (names Keras has too). Either way the access warns once with a
DeprecationWarning naming the current spelling.
"""
import importlib

import keras

from ipu_keras._src import compat

_ADDONS = "ipu_keras_addons.keras.layers"

compat.declare("ipu.keras.layers.<name>", compat.DEPRECATED,
               f"forwards to `{_ADDONS}.<name>` where it exists, else `keras.layers.<name>`;"
               " warns once", "2.1", "3.1")


def _addons_layers():
    try:
        return importlib.import_module(_ADDONS)
    except ImportError:
        return None


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    addons = _addons_layers()
    if addons is not None and hasattr(addons, name):
        target, where = getattr(addons, name), _ADDONS
    elif hasattr(keras.layers, name):
        target, where = getattr(keras.layers, name), "keras.layers"
    else:
        raise AttributeError(
            f"module 'ipu_keras.keras.layers' has no attribute '{name}': neither "
            f"{_ADDONS} nor keras.layers has it.")
    compat.warn_once(f"ipu.keras.layers.{name}", f"{where}.{name}")
    return target
