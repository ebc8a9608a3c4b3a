"""The SDK 2.0-2.1 constructor arguments of `ipu.keras.Model` and `ipu.keras.Sequential`.

`LegacyModelArguments` sits in front of both classes: it takes
`gradient_accumulation_count` (and the removed `gradient_accumulation_dtype`) out of
the constructor's arguments and forwards the count to
`set_gradient_accumulation_options(gradient_accumulation_steps_per_replica=n)`,
warning once that the argument is deprecated.
"""
from ipu_keras._src import compat

_NEW = "model.set_gradient_accumulation_options(gradient_accumulation_steps_per_replica=n)"

_DTYPE_NEW = "nothing (the accumulators take the dtype of the gradients)"

for _cls in ("Model", "Sequential"):
    compat.declare(f"ipu.keras.{_cls}(gradient_accumulation_count=)", compat.DEPRECATED,
                   f"forwards to `{_NEW}`; warns once", "2.0", "2.2")
    compat.declare(f"ipu.keras.{_cls}(gradient_accumulation_dtype=)", compat.DEPRECATED,
                   "accepted and ignored; warns once", "2.0", "2.2")


class LegacyModelArguments:
    """Mixed in front of `ipu_keras.Model`/`Sequential`: accepts the SDK 2.1 arguments."""

    def __init__(self, *args, **kwargs):
        count = kwargs.pop("gradient_accumulation_count", None)
        dtype = kwargs.pop("gradient_accumulation_dtype", None)
        super().__init__(*args, **kwargs)
        if dtype is not None:
            compat.warn_once(f"ipu.keras.{_public(self)}(gradient_accumulation_dtype=)",
                             _DTYPE_NEW)
        if count is not None:
            compat.warn_once(f"ipu.keras.{_public(self)}(gradient_accumulation_count=)",
                             _NEW)
            self.set_gradient_accumulation_options(
                gradient_accumulation_steps_per_replica=count)


def _public(model):
    import keras

    return "Sequential" if isinstance(model, keras.Sequential) else "Model"
