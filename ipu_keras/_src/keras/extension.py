"""IPU behaviour for ordinary Keras models created inside `IPUStrategy().scope()`.

This module owns the one place where plain Keras models become IPU models, the way
Graphcore's Keras did it (`KerasExtension`, `_patch_keras_extension`): every Keras model
runs `TensorFlowTrainer.__init__` when it is created (Sequential, functional, subclassed,
`keras.applications`); `install()` wraps that constructor once so that, while an
`IPUStrategy` scope is active, the new instance's class is swapped for a subclass with
the registered extension in front. The extension for `keras.Model` is `ScopeExtension`,
which is `IPUTrainerMixin` plus the scope's rules, so a model made in the scope has every
method the mixin has (whatever other modules mix into it) and runs fit/evaluate/predict
and the `*_on_batch` methods on the simulated IPU exactly as `ipu_keras.Model` does.

The swapped class keeps the original's name and module, so `isinstance`, summaries and
saving see the original Keras class. Models created outside a scope are never touched.
A model created in the scope keeps its IPU behaviour when used outside it, as in IPU
TensorFlow (whose Keras re-entered the model's strategy); that use is logged once.
The scope stack lives here (not in `ipu_strategy`) so that this layer needs nothing above it.
"""
import logging
import threading

import keras
from keras.src.backend.tensorflow import trainer as tf_trainer

from ipu_keras._src.keras.trainer import IPUTrainerMixin

logger = logging.getLogger("ipu_keras")

_state = threading.local()
_EXTENSIONS = {}  # Keras class -> extension class put in front of it
_EXTENDED = {}  # (Keras class, extension) -> the generated subclass
_install_lock = threading.Lock()
_original_init = None


def _stack():
    if not hasattr(_state, "stack"):
        _state.stack = []
    return _state.stack


def current_strategy():
    """The innermost active `IPUStrategy` of this thread, or None."""
    stack = _stack()
    return stack[-1] if stack else None


def enter_scope(strategy):
    """Makes `strategy` the current one until `exit_scope`; installs the Keras hook."""
    install()
    _stack().append(strategy)


def exit_scope(strategy):
    stack = _stack()
    assert stack and stack[-1] is strategy, "IPUStrategy scopes must nest"
    stack.pop()


class ScopeExtension(IPUTrainerMixin):
    """What a Keras model created in an `IPUStrategy` scope gets in front of its class."""

    _ipu_strategy = None
    _ipu_outside_logged = False

    def make_train_function(self, force=False):
        self._check_ipu_mode()
        return super().make_train_function(force)

    def make_test_function(self, force=False):
        self._check_ipu_mode()
        return super().make_test_function(force)

    def make_predict_function(self, force=False):
        self._check_ipu_mode()
        return super().make_predict_function(force)

    def _check_ipu_mode(self):
        if self.run_eagerly:
            raise RuntimeError(
                "Keras models cannot run eagerly when using `IPUStrategy`. Set "
                "`run_eagerly=False` when calling `compile`."
            )
        if current_strategy() is None and not self._ipu_outside_logged:
            self._ipu_outside_logged = True
            logger.warning(
                "The model '%s' was created inside an IPUStrategy scope and is used outside "
                "it: as with IPU TensorFlow, it keeps running on the (simulated) IPU of the "
                "strategy it was created in.", self.name)


def register_extension(keras_class, extension):
    """Puts `extension` in front of `keras_class` (and its subclasses) created in a scope."""
    _EXTENSIONS[keras_class] = extension


def extended_class(cls):
    """The subclass of `cls` with its registered extension in front (or None: no extension)."""
    if issubclass(cls, IPUTrainerMixin):
        return None  # already an IPU model (ipu_keras.Model or already patched)
    extension = next((_EXTENSIONS[base] for base in cls.__mro__ if base in _EXTENSIONS), None)
    if extension is None:
        return None
    key = (cls, extension)
    if key not in _EXTENDED:
        namespace = {"__module__": cls.__module__, "__qualname__": cls.__qualname__,
                     "__doc__": cls.__doc__}
        _EXTENDED[key] = type(cls.__name__, (extension, cls), namespace)
    return _EXTENDED[key]


def patch(instance, strategy):
    """Swaps `instance` to its extended class and binds it to `strategy` (if registered)."""
    cls = extended_class(type(instance))
    if cls is not None:
        instance.__class__ = cls
        instance._ipu_strategy = strategy


def _trainer_init(self, *args, **kwargs):
    _original_init(self, *args, **kwargs)
    strategy = current_strategy()
    if strategy is not None:
        strategy._patch_keras_extension(self)


def install():
    """Wraps Keras' trainer constructor once (idempotent; only ever called by a scope)."""
    global _original_init
    with _install_lock:
        if _original_init is None:
            _original_init = tf_trainer.TensorFlowTrainer.__init__
            tf_trainer.TensorFlowTrainer.__init__ = _trainer_init


register_extension(keras.Model, ScopeExtension)
