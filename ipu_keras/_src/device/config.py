"""`IPUConfig`: the nested, type-checked option tree of Graphcore's IPU TensorFlow.

The whole tree is declared once, in `_SPEC`, as nested dicts of `_Option`s; the
node class builds every category and option from it, so adding an option is one
line. Setting an unknown name raises `AttributeError` with a "Did you mean ...?"
suggestion; setting a value of the wrong type raises `ConfigurationError`.

`IPUConfig.configure_ipu_system()` makes a snapshot of the config the process-wide
active one; `get_active_config()` returns it (a default config if none was set).
This module imports no TensorFlow or Keras.
"""
import copy
import difflib
import enum
import numbers
import threading

from ipu_keras.errors import ConfigurationError
from ipu_keras._src.device import targets as _targets


class DeviceConnectionType(str, enum.Enum):
    """When the (simulated) device is attached, as in Graphcore's API.

    ALWAYS attaches at configuration; ON_DEMAND when the first executable runs;
    PRE_COMPILE and NEVER compile without a device (the simulator still runs,
    since it needs no hardware). The simulator treats all four alike.
    """

    ALWAYS = "ALWAYS"
    ON_DEMAND = "ON_DEMAND"
    PRE_COMPILE = "PRE_COMPILE"
    NEVER = "NEVER"


class SelectionOrder(str, enum.Enum):
    """Order in which IPUs of a multi-IPU device are used, as in Graphcore's API."""

    AUTO = "AUTO"
    ZIGZAG = "ZIGZAG"
    SNAKE = "SNAKE"
    HOOF = "HOOF"


# ---------------------------------------------------------------------------
# Value types: each is a name shown in errors, a predicate, a normaliser and a hint.


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_float(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


class _Type:
    def __init__(self, name, check, normalise=lambda v: v, hint=""):
        self.name = name
        self.check = check
        self.normalise = normalise
        self.hint = hint


BOOL = _Type("bool", lambda v: isinstance(v, bool))
INT = _Type("int", _is_int, int)
FLOAT = _Type("float", _is_float, float)
STR = _Type(
    "str", lambda v: isinstance(v, str), lambda v: v.value if isinstance(v, enum.Enum) else v)
INT_OR_INT_LIST = _Type(
    "int or list of ints",
    lambda v: _is_int(v) or (isinstance(v, (list, tuple)) and all(_is_int(x) for x in v)),
    lambda v: int(v) if _is_int(v) else [int(x) for x in v],
)
STR_DICT = _Type(
    "dict of str to str",
    lambda v: isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str)
                                          for k, x in v.items()),
    dict,
    hint=" Poplar option values are strings, e.g. {'availableMemoryProportion': '0.3'}",
)


class _Option:
    """One leaf of the tree: type, default, allowed values and a one-line doc."""

    def __init__(self, type_, default, doc, choices=None, minimum=None):
        self.type = type_
        self.default = default
        self.doc = doc
        self.choices = choices
        self.minimum = minimum

    def validate(self, path, value):
        """Returns the normalised value, or raises `ConfigurationError`."""
        leaf = path.rsplit(".", 1)[-1]
        if not self.type.check(value):
            raise ConfigurationError(
                f"IPUConfig option '{path}' expected {self.type.name}. "
                f"Received: {leaf}={value!r}" + (f".{self.type.hint}" if self.type.hint else ""))
        value = self.type.normalise(value)
        if self.choices is not None:
            # Enum-like strings match case-insensitively and are stored as spelled here.
            value = next((c for c in self.choices if c.lower() == value.lower()), value)
            if value not in self.choices:
                raise ConfigurationError(
                    f"IPUConfig option '{path}' expected one of {list(self.choices)}. "
                    f"Received: {leaf}={value!r}")
        if self.minimum is not None:
            values = value if isinstance(value, list) else [value]
            if any(v < self.minimum for v in values):
                raise ConfigurationError(
                    f"IPUConfig option '{path}' expected values >= {self.minimum}. "
                    f"Received: {leaf}={value!r}")
        return value


_POPLAR_OPTIONS_DOC = (
    "Poplar planner options, e.g. {'availableMemoryProportion': '0.6', "
    "'partialsType': 'half'}; values are strings.")

_SPEC = {
    "auto_select_ipus": _Option(
        INT_OR_INT_LIST, 0, "Number of IPUs to acquire (0: none requested; 1 is used).",
        minimum=0),
    "select_ipus": _Option(
        INT_OR_INT_LIST, [], "Device ids to acquire; exclusive with auto_select_ipus.",
        minimum=0),
    "ipu_model": {
        "compile_ipu_code": _Option(
            BOOL, True, "Compile code for the tiles, so memory includes code size."),
        "tiles_per_ipu": _Option(
            INT, 0, "Tiles per IPU; 0 means the version's standard count.", minimum=0),
        "version": _Option(
            STR, "ipu2", "IPU version to simulate.", choices=_targets.VERSIONS),
        "strict_tile_mode": _Option(
            BOOL, False, "Run every compute set tile by tile and check it against the "
            "vectorised run (slow; for tests on small targets)."),
    },
    "matmuls": {
        "poplar_options": _Option(STR_DICT, {}, _POPLAR_OPTIONS_DOC),
    },
    "convolutions": {
        "poplar_options": _Option(STR_DICT, {}, _POPLAR_OPTIONS_DOC),
    },
    "floating_point_behaviour": {
        "inv": _Option(BOOL, False, "Trap on invalid operations (0/0, inf-inf, ...): the "
                       "execution raises FloatingPointTrapError naming the op and layer."),
        "div0": _Option(BOOL, False, "Trap on division by zero (x/0, log(0))."),
        "oflo": _Option(BOOL, False, "Trap on overflow (float16 and float32)."),
        "nanoo": _Option(BOOL, False, "Produce NaN on overflow instead of saturating "
                         "(accepted; the simulator gives inf, as TensorFlow does)."),
        "esr": _Option(BOOL, False, "Enable stochastic rounding (accepted; the simulator "
                       "rounds to nearest)."),
    },
    "allow_recompute": _Option(BOOL, False, "Recompute activations instead of keeping them."),
    "selection_order": _Option(
        STR, "AUTO", "Order of IPUs in a multi-IPU device.",
        choices=tuple(m.value for m in SelectionOrder)),
    "device_connection": {
        "type": _Option(
            STR, "ALWAYS", "When the device is attached.",
            choices=tuple(m.value for m in DeviceConnectionType)),
        "version": _Option(
            STR, "", "IPU version to compile for without a device ('' = ipu_model.version)."),
        "enable_remote_buffers": _Option(
            BOOL, False, "Allow remote buffers (streaming memory) without a device."),
    },
    "executable_cache_path": _Option(
        STR, "", "Directory of the executable cache ('' = no cache)."),
}


class _Node:
    """One category of the tree. Attributes are its options and sub-categories."""

    __slots__ = ("_path", "_spec", "_values")

    def __init__(self, spec, path):
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_spec", spec)
        values = {}
        for name, item in spec.items():
            child_path = f"{path}.{name}" if path else name
            if isinstance(item, dict):
                values[name] = _Node(item, child_path)
            else:
                values[name] = copy.deepcopy(item.default)
        object.__setattr__(self, "_values", values)

    def _display(self):
        return f"IPUConfig.{self._path}" if self._path else "IPUConfig"

    def __getattr__(self, name):
        # Only called when normal lookup fails.
        if name.startswith("__") or name in _Node.__slots__:
            raise AttributeError(name)
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        raise AttributeError(self._unknown(name))

    def __setattr__(self, name, value):
        item = self._spec.get(name)
        if item is None:
            raise AttributeError(self._unknown(name))
        path = f"{self._path}.{name}" if self._path else name
        if isinstance(item, dict):
            raise AttributeError(
                f"'{path}' is a category of IPUConfig options, not an option; set its options "
                f"instead (one of {sorted(item)}). Received: {name}={value!r}")
        self._values[name] = item.validate(path, value)

    def __delattr__(self, name):
        raise AttributeError(f"IPUConfig options cannot be deleted. Received: {name!r}")

    def __deepcopy__(self, memo):
        new = object.__new__(type(self))
        object.__setattr__(new, "_path", self._path)
        object.__setattr__(new, "_spec", self._spec)
        object.__setattr__(new, "_values", copy.deepcopy(self._values, memo))
        return new

    def __copy__(self):
        return self.__deepcopy__({})

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._spec))

    def _unknown(self, name):
        msg = f"'{self._display()}' has no option '{name}'."
        close = difflib.get_close_matches(name, list(self._spec), n=1)
        if close:
            return msg + f" Did you mean '{close[0]}'?"
        # The name may be a valid option of another category.
        elsewhere = [p for p in _leaf_paths(_SPEC) if p.rsplit(".", 1)[-1] == name]
        if elsewhere:
            return msg + f" Did you mean 'IPUConfig.{elsewhere[0]}'?"
        return msg + f" Valid names: {sorted(self._spec)}."

    def to_dict(self):
        """Returns the options under this node as a nested, JSON-able dict."""
        return {
            name: value.to_dict() if isinstance(value, _Node) else copy.deepcopy(value)
            for name, value in self._values.items()
        }

    def _load(self, d):
        if not isinstance(d, dict):
            raise ConfigurationError(
                f"'{self._display()}' expected a dict of options. Received: {d!r}")
        for name, value in d.items():
            if isinstance(self._spec.get(name), dict):
                getattr(self, name)._load(value)
            else:
                setattr(self, name, value)

    def __eq__(self, other):
        return isinstance(other, _Node) and self.to_dict() == other.to_dict()

    __hash__ = None

    def __repr__(self):
        lines = [f"{self._display()}("]
        for path, value in _flatten(self):
            lines.append(f"  {path}={value!r},")
        return "\n".join(lines + [")"])


def _leaf_paths(spec, prefix=""):
    for name, item in spec.items():
        path = f"{prefix}{name}"
        if isinstance(item, dict):
            yield from _leaf_paths(item, path + ".")
        else:
            yield path


def _flatten(node):
    """Yields (dotted path, value) for every option under a node, in spec order."""
    for name, value in node._values.items():
        if isinstance(value, _Node):
            yield from _flatten(value)
        else:
            yield (f"{node._path}.{name}" if node._path else name), value


class IPUConfig(_Node):
    """The IPU system configuration, as in Graphcore's `ipu.config.IPUConfig`.

    Options are attributes, grouped in categories:

    >>> config = IPUConfig()
    >>> config.auto_select_ipus = 2
    >>> config.ipu_model.tiles_per_ipu = 4
    >>> config.matmuls.poplar_options = {"availableMemoryProportion": "0.3"}
    >>> config.configure_ipu_system()

    Unknown names raise `AttributeError` with a suggestion; values of the wrong
    type raise `ConfigurationError`. `int` is accepted where a float is expected,
    `bool` is not accepted where an int is.
    """

    __slots__ = ()

    def __init__(self):
        super().__init__(_SPEC, "")

    @property
    def num_ipus(self):
        """int: IPUs the configuration asks for (at least 1).

        `auto_select_ipus` if set (its first entry when it is a list: Graphcore's API
        configures several devices with a list; the simulator runs the first), else
        the number of `select_ipus` (1 for a single device id).
        """
        auto = self.auto_select_ipus
        if isinstance(auto, list):
            auto = auto[0] if auto else 0
        if auto:
            return max(1, auto)
        select = self.select_ipus
        return max(1, len(select) if isinstance(select, list) else 1)

    def target(self):
        """Returns the simulated target this configuration describes.

        Returns:
            Target: `get_target(ipu_model.version, ipu_model.tiles_per_ipu, num_ipus)`.

        Raises:
            ConfigurationError: if the options do not describe a valid target.
        """
        version, tiles = self.ipu_model.version, self.ipu_model.tiles_per_ipu
        full = _targets.standard_tiles_per_ipu(version)
        if tiles > full:
            raise ConfigurationError(
                f"IPUConfig option 'ipu_model.tiles_per_ipu' expected 0 (the standard count) "
                f"or at most {full}, the tiles of an '{version}'. "
                f"Received: tiles_per_ipu={tiles!r}")
        return _targets.get_target(version, tiles, self.num_ipus)

    def validate(self):
        """Checks the options together (what single assignments cannot check).

        Raises:
            ConfigurationError: if options contradict each other.
        """
        auto, select = self.auto_select_ipus, self.select_ipus
        if auto not in (0, []) and select != []:
            raise ConfigurationError(
                "IPUConfig expected only one of auto_select_ipus and select_ipus to be set. "
                f"Received: auto_select_ipus={auto!r}, select_ipus={select!r}")
        for count in auto if isinstance(auto, list) else [auto]:
            _check_device_size(count)
        self.target()

    def configure_ipu_system(self, device="cpu"):
        """Makes a snapshot of this configuration the process-wide active one.

        Later changes to this object have no effect until it is configured again,
        as with Graphcore's API.

        Args:
            device: Accepted for compatibility with Graphcore's API; ignored.

        Raises:
            ConfigurationError: if the configuration is not valid.
        """
        del device
        self.validate()
        _set_active(self.copy())

    def copy(self):
        """Returns an independent copy of this configuration."""
        return copy.deepcopy(self)

    def __reduce__(self):
        return (IPUConfig.from_dict, (self.to_dict(),))

    @classmethod
    def from_dict(cls, d):
        """Builds a configuration from a (possibly partial) nested dict of options.

        Args:
            d: A dict as returned by `to_dict()`; options left out keep defaults.

        Returns:
            IPUConfig: the configuration.

        Raises:
            AttributeError: if a name is unknown.
            ConfigurationError: if a value has the wrong type.
        """
        config = cls()
        config._load(d)
        return config


MAX_IPUS = 64
"""The largest multi-IPU device (an IPU-POD64)."""


def _check_device_size(count):
    """A device is 1, 2, 4, ... or MAX_IPUS IPUs (0 means none requested)."""
    if count and (count > MAX_IPUS or count & (count - 1)):
        raise ConfigurationError(
            f"Unsupported number of IPUs requested - could not find an IPU device with "
            f"{count} IPUs. IPUConfig option 'auto_select_ipus' expected a power of two "
            f"of at most {MAX_IPUS} (1, 2, 4, 8, 16, 32 or 64). Received: "
            f"auto_select_ipus={count}. Request the next power of two (a graph of 3 shards "
            f"needs 4 IPUs).")


_lock = threading.Lock()
_active = None


def _set_active(config):
    global _active
    with _lock:
        _active = config


def configure_ipu_system(config, device="cpu"):
    """Makes `config` the active configuration; same as `config.configure_ipu_system()`.

    Kept for code written against the older `ipu.utils.configure_ipu_system(config)`.

    Args:
        config: An `IPUConfig`.
        device: Accepted for compatibility; ignored.

    Raises:
        ConfigurationError: if `config` is not an `IPUConfig` or is not valid.
    """
    if not isinstance(config, IPUConfig):
        raise ConfigurationError(
            f"configure_ipu_system() expected an IPUConfig. Received: config={config!r}")
    config.configure_ipu_system(device)


def get_active_config():
    """Returns the active configuration.

    Returns:
        IPUConfig: the one last passed to `configure_ipu_system()`, or a default
        `IPUConfig()` if none was configured. Treat it as read-only.
    """
    with _lock:
        if _active is None:
            return IPUConfig()
        return _active


def is_configured():
    """Returns True if `configure_ipu_system()` has been called (and not reset)."""
    with _lock:
        return _active is not None


def reset_ipu_configuration():
    """Forgets the active configuration, as Graphcore's `reset_ipu_configuration()`."""
    _set_active(None)


__all__ = [
    "DeviceConnectionType", "IPUConfig", "SelectionOrder", "configure_ipu_system",
    "get_active_config", "is_configured", "reset_ipu_configuration",
]
