"""Per-step callbacks: `model.set_asynchronous_callbacks(True)`.

Keras calls `on_*_batch_end` once per execution of `steps_per_execution` steps. With
asynchronous callbacks on, the user's callbacks are wrapped in `StepReplay`, which
forwards every hook unchanged except the batch ends: those it replays once per step
of the execution, with that step's own logs brought back through the outfeed. Keras'
own History and progress bar stay outside the wrapper, so they behave as in Keras.
"""
import keras

_FORWARDED = (
    "on_epoch_begin", "on_epoch_end", "on_train_begin", "on_train_end", "on_test_begin",
    "on_test_end", "on_predict_begin", "on_predict_end", "on_train_batch_begin",
    "on_test_batch_begin", "on_predict_batch_begin",
)


class StepReplay(keras.callbacks.Callback):
    def __init__(self, callbacks, model):
        super().__init__()
        self.inner = keras.callbacks.CallbackList(callbacks, model=model)
        self._begin = {"train": 0, "test": 0, "predict": 0}

    def set_model(self, model):
        super().set_model(model)
        self.inner.set_model(model)

    def set_params(self, params):
        super().set_params(params)
        self.inner.set_params(params)

    def _replay(self, kind, logs):
        function = getattr(self.model, f"{kind}_function")
        outputs = getattr(function, "step_outputs", None) or [logs]
        hook = getattr(self.inner, f"on_{kind}_batch_end")
        for k, step_logs in enumerate(outputs):
            hook(self._begin[kind] + k, {"outputs": step_logs} if kind == "predict" else
                 step_logs)

    def on_train_batch_end(self, batch, logs=None):
        self._replay("train", logs)

    def on_test_batch_end(self, batch, logs=None):
        self._replay("test", logs)

    def on_predict_batch_end(self, batch, logs=None):
        self._replay("predict", logs)


def _forward(name):
    def hook(self, *args, **kwargs):
        if name.endswith("_batch_begin"):
            self._begin[name[3:-12]] = args[0] if args else kwargs.get("batch", 0)
        return getattr(self.inner, name)(*args, **kwargs)

    hook.__name__ = name
    return hook


for _name in _FORWARDED:
    setattr(StepReplay, _name, _forward(_name))
