"""`keras.ipu` and `tf.keras.ipu`: the SDK 2.6+ spelling of the IPU Keras API.

From SDK 2.6 Graphcore shipped its own Keras, whose namespace had an `ipu` module, so IPU
code writes `keras.ipu.PipelineStage` after `import keras` or `from tensorflow import
keras`, `tf.keras.ipu...`, `from keras.ipu.optimizers import ...`. `import ipu_keras`
calls `install()`, which makes `ipu_keras.keras` reachable under those names. This is the
one change ipu_keras makes to another package's namespace.

Nothing heavy is imported to do it (`import ipu_keras` stays cheap, Keras and TensorFlow
are not loaded):

* `keras`, and `keras._tf_keras.keras` (what `tf.keras` loads), get a module
  `__getattr__` answering `ipu` (PEP 562); the first `keras.ipu` imports
  `ipu_keras.keras`. Modules already imported get it at once; for the others a finder
  at the front of `sys.meta_path` adds it right after Keras' own code has run, then
  leaves the module's loader and spec as Keras' import made them.
* The same finder answers the imports `keras.ipu[.sub]` (and the `tensorflow.keras.ipu`
  spelling) with the modules of `ipu_keras.keras`, as aliases (no second copy): `import
  keras.ipu` and `from keras.ipu.optimizers import ALSOptimizer` work too.
"""
import importlib
import importlib.machinery
import sys
import threading

TARGET = "ipu_keras.keras"
# The modules `import keras`, `tf.keras` and `from tensorflow.keras import ...` give.
KERAS_MODULES = ("keras", "keras._tf_keras.keras")
ALIASES = tuple(f"{parent}.ipu" for parent in KERAS_MODULES + ("tensorflow.keras",))
_UNDER_ALIASES = tuple(f"{alias}." for alias in ALIASES)

_lock = threading.Lock()
_installed = False


def install():
    """Exposes `ipu_keras.keras` as `keras.ipu` and `tf.keras.ipu`; a second call does nothing."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
        sys.meta_path.insert(0, _KerasIPUFinder())
        for name in KERAS_MODULES:
            module = sys.modules.get(name)
            if isinstance(module, type(sys)):   # not None: an import blocked on purpose
                _answer_ipu(module)


def _answer_ipu(module):
    """Gives `module` a `__getattr__` that answers `ipu` (keeping any it had)."""
    previous = module.__dict__.get("__getattr__")
    if getattr(previous, "_ipu_keras_alias", False):
        return
    name = module.__name__

    def __getattr__(attribute):
        if attribute == "ipu":
            return importlib.import_module(f"{name}.ipu")   # through the finder's alias
        if previous is not None:
            return previous(attribute)
        raise AttributeError(f"module '{name}' has no attribute '{attribute}'")

    __getattr__._ipu_keras_alias = True
    module.__getattr__ = __getattr__


def _target_of(alias):
    """`keras.ipu.optimizers` -> the module `ipu_keras.keras.optimizers` stands for."""
    base = next(a for a in ALIASES if alias == a or alias.startswith(a + "."))
    module = importlib.import_module(TARGET)
    for part in alias[len(base) + 1:].split(".") if alias != base else ():
        inner = getattr(module, part, None)
        module = (inner if type(inner) is type(sys)
                  else importlib.import_module(f"{module.__name__}.{part}"))
    return module


class _KerasIPUFinder:
    """Answers the `keras.ipu` imports, and hooks `_answer_ipu` into Keras' own import."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in ALIASES or fullname.startswith(_UNDER_ALIASES):
            try:
                module = _target_of(fullname)
            except ImportError:
                return None
            return importlib.machinery.ModuleSpec(fullname, _AliasLoader(module),
                                                  is_package=hasattr(module, "__path__"))
        if fullname in KERAS_MODULES:
            spec = _spec_from_the_other_finders(self, fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _AfterKerasLoader(spec.loader)
            return spec
        return None


def _spec_from_the_other_finders(me, fullname, path, target):
    for finder in sys.meta_path:
        if finder is me or not hasattr(finder, "find_spec"):
            continue
        spec = finder.find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


class _AliasLoader:
    """Loads an alias name as an existing module, leaving that module's own spec alone."""

    def __init__(self, module):
        self.module = module
        self.spec = module.__spec__

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        module.__spec__ = self.spec   # the import system set the alias' spec on it


class _AfterKerasLoader:
    """Runs Keras' loader, then `_answer_ipu`; the module keeps Keras' loader and spec."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        _answer_ipu(module)

    def __getattr__(self, name):
        return getattr(self.loader, name)
