"""The base of the addons layers: serialization registration and refused arguments.

`IPULayer._check_unsupported` refuses an argument that the original keeps only so that its
signature matches the Keras layer it replaces; `serializable` registers a class under the
`ipu_keras_addons` package so that `.keras` files load it back.
"""
import keras

from ipu_keras.errors import AddonsArgumentError, AddonsUnsupportedArgumentError

PACKAGE = "ipu_keras_addons"


def serializable(cls):
    """Registers `cls` for `keras.saving` under the addons package."""
    return keras.saving.register_keras_serializable(package=PACKAGE)(cls)


def argument_error(layer, expected, **received):
    """An `AddonsArgumentError` in Keras wording: what was expected and what was received."""
    (name, value), = received.items()
    return AddonsArgumentError(
        f"{layer} expected {expected}. Received: {name}={value!r}")


class IPULayer(keras.layers.Layer):
    """A Keras layer that refuses the arguments it keeps only for API consistency."""

    def _check_unsupported(self, arg, arg_name, method="__init__"):
        scalar = arg is None or isinstance(arg, (bool, int, float, str))
        if not scalar or arg:
            shown = repr(arg) if scalar else f"<{type(arg).__name__}>"
            raise AddonsUnsupportedArgumentError(
                f"ipu_keras_addons.keras.layers.{type(self).__name__} does not support "
                f"the argument {arg_name}, kept only for API consistency with "
                f"keras.layers.{type(self).__name__}.{method}: leave it unset. "
                f"Received: {arg_name}={shown}")
