"""Every exception a user of ipu_keras can see.

One class per failure mode, each with a message that says what was expected,
what was received and what to do about it (Keras wording:
"... expected X. Received: name=value"). Internal invariants may use `assert`;
user mistakes never do.
"""


class IPUError(Exception):
    """Base class of all ipu_keras errors."""


class UnsupportedOpError(IPUError, NotImplementedError):
    """A TensorFlow op in the traced function has no IPU importer."""

    def __init__(self, op_type, node_name, layer=None, hint=None):
        self.op_type = op_type
        self.node_name = node_name
        self.layer = layer
        where = f" in Keras layer '{layer}'" if layer else ""
        msg = (
            f"The TensorFlow op '{op_type}' (node '{node_name}'){where} is not supported "
            f"on the simulated IPU. Received: op_type={op_type}. "
            "Call ipu_keras.supported_ops() to list the TensorFlow ops that can be compiled"
        )
        if hint:
            msg += f"; {hint}"
        super().__init__(msg + ".")


class StaticShapeRequiredError(IPUError, ValueError):
    """A shape or a shape-like operand is not known at compile time."""


class OutOfTileMemoryError(IPUError, MemoryError):
    """A tile needs more memory than the target gives it."""

    def __init__(self, tile, bytes_used, bytes_available, details=""):
        self.tile = tile
        self.bytes_used = bytes_used
        self.bytes_available = bytes_available
        msg = (
            f"Out of memory on tile {tile}: {bytes_used} bytes used but tiles only have "
            f"{bytes_available} bytes of memory"
        )
        super().__init__(msg + (f"\n{details}" if details else ""))


class ExecutableFormatError(IPUError, ValueError):
    """A serialised executable is truncated, altered or not an executable at all."""


class FeedError(IPUError, ValueError):
    """An infeed or outfeed was used in a way that does not match its definition."""


class InfeedExhaustedError(IPUError, EOFError):
    """The device asked the infeed for more elements than its dataset holds."""


class ConfigurationError(IPUError, ValueError):
    """An IPUConfig option has a value of the wrong type or out of range."""


class CompilationError(IPUError, RuntimeError):
    """The compiler found a graph it cannot turn into an executable."""


class StrictModeMismatch(IPUError, AssertionError):
    """In strict tile mode, a tile's slice differs from the vectorised run (a mapping,
    exchange or dependency rule is wrong)."""


# -- ipu_saved_model_cli (issue 13) ---------------------------------------------------------
class SavedModelError(IPUError, ValueError):
    """A SavedModel directory, tag set or signature key does not exist or cannot be read."""


class SavedModelInputError(IPUError, ValueError):
    """An input given to `ipu_saved_model_cli run` does not match the signature (key, dtype,
    shape), or comes in a format that is refused (pickle)."""


class OutputExistsError(IPUError, FileExistsError):
    """An output file or directory exists and `--overwrite` was not given."""


class ConversionConfigError(IPUError, ValueError):
    """A `convert ipu` option or `--config_file` entry is malformed (JSON, type, range)."""


class NodeMatchError(IPUError, ValueError):
    """A regular expression of a conversion option matches no node of the graph."""
