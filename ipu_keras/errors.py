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

    def __init__(self, tile, bytes_used, bytes_available, details="", ipu=None):
        self.tile = tile
        self.ipu = ipu
        self.bytes_used = bytes_used
        self.bytes_available = bytes_available
        msg = (
            f"Out of memory on tile {tile}: {bytes_used} bytes used but tiles only have "
            f"{bytes_available} bytes of memory"
        )
        if ipu is not None:
            msg += f" (tile {tile} is on IPU {ipu})"
        super().__init__(msg + (f"\n{details}" if details else ""))


class ExecutableFormatError(IPUError, ValueError):
    """A serialised executable is truncated, altered or not an executable at all."""


class UnsupportedDTypeError(IPUError, TypeError):
    """A value of a dtype the IPU does not have (complex, string, object) reaches the device."""


class FeedError(IPUError, ValueError):
    """An infeed or outfeed was used in a way that does not match its definition."""


class InfeedExhaustedError(IPUError, EOFError):
    """The device asked the infeed for more elements than its dataset holds."""


class ConfigurationError(IPUError, ValueError):
    """An IPUConfig option has a value of the wrong type or out of range."""


class FlagsError(ConfigurationError):
    """`TF_POPLAR_FLAGS` or `POPLAR_ENGINE_OPTIONS` is malformed: an unbalanced quote, a
    word that is not a flag, a flag without its value, text that is not a JSON object, or
    an option value of the wrong kind. (An unknown flag or option only warns.)"""


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


class OutputWriteError(IPUError, OSError):
    """An output file or directory cannot be written (no permission, no space, not a
    directory): `ipu_saved_model_cli`'s outputs, the report directory, the tensor map
    file."""


class ConversionConfigError(IPUError, ValueError):
    """A `convert ipu` option or `--config_file` entry is malformed (JSON, type, range)."""


class NodeMatchError(IPUError, ValueError):
    """A regular expression of a conversion option matches no node of the graph."""

# --- issue 12: ipu_keras_addons layers and optimizers ---------------------------------------


class AddonsArgumentError(IPUError, ValueError):
    """An ipu_keras_addons layer or optimizer got an argument value it does not accept."""


class AddonsUnsupportedArgumentError(IPUError, NotImplementedError):
    """An argument kept only for Keras signature compatibility was given a value."""


# Gradient accumulation and the Keras pipelining API (issue 10, branch accumulation).
class GradientAccumulationError(IPUError):
    """A gradient accumulation optimizer is used where no accumulation window can run
    (outside `loops.repeat`, a loop count it does not divide, two in one loop, wrapped).

    Raised while the function is traced; it derives from `IPUError` alone so that
    TensorFlow's autograph re-raises it with its own type (and the user's frames)."""


class AccumulationStepsError(IPUError, RuntimeError):
    """`steps_per_execution` and the accumulation (or a pipeline's depth) do not fit, or a
    step that accumulation needs to own has been overridden."""


class PipelineStageAssignmentError(IPUError, ValueError):
    """A Keras model's pipeline stage assignment breaks the assignment rules."""

# -- fuzz (issue 8: randomized differential testing) --------------------------------------


class IndexOutOfRangeError(IPUError, IndexError):
    """An index or class label read at run time points outside the dimension it indexes
    (TensorFlow on the CPU rejects it too). `op` is the IR op whose kernel found it; the
    engine adds where that op comes from (TensorFlow node, Keras layer), and the execution
    that saw it leaves the variables as they were."""

    def __init__(self, message, op=None):
        super().__init__(message)
        self.op = op

# -- faults (issue 8): floating-point traps ---------------------------------------------------
class FloatingPointTrapError(IPUError, FloatingPointError):
    """An execution produced a value that an `IPUConfig.floating_point_behaviour` trap
    (`inv`, `div0` or `oflo`) is set to catch; the execution was abandoned."""

    _WHAT = {"inv": "an invalid operation (such as 0/0, inf-inf or log of a negative number)",
             "div0": "a division by zero (such as x/0 or log(0))",
             "oflo": "an overflow (a result beyond the largest finite value of its dtype)"}

    def __init__(self, flag, op, node="", layer="", detail=""):
        self.flag = flag
        self.op = op
        self.node = node
        self.layer = layer
        where = f" (TensorFlow node '{node}')" if node else ""
        where += f" in Keras layer '{layer}'" if layer else ""
        super().__init__(
            f"The IPU trapped a floating-point exception: {self._WHAT[flag]} in op '{op}'"
            f"{where}. With IPUConfig.floating_point_behaviour.{flag}=True every result was "
            f"expected to be free of it. Received: {detail or flag}. The execution was "
            "abandoned: weights and outfeeds are those of the last completed execution. Fix "
            "the values reaching that op, or set the flag to False to let inf and NaN "
            "propagate."
        )

# -- multi-IPU device, sharding and pipelining (issue 10, branch multi-ipu) ----------
class ShardingError(CompilationError, ValueError):
    """A graph's shards do not fit the device (they must divide its number of IPUs)."""


class PipelineError(IPUError, ValueError):
    """A pipeline's stages, device mapping, depth or outputs break a pipelining rule."""


# -- replication (issue 11) ---------------------------------------------------------------
class ReplicationError(IPUError):
    """Replicas could not run together: a collective that not every replica reached, or a
    replica group size that does not divide the replication factor."""


# -- ipu.serving (issue 31, item 4) ------------------------------------------------------
class ServingError(IPUError, ValueError):
    """An `ipu.serving` export or call got a value it cannot use: a non-empty export
    directory, a signature that cannot be deduced or does not match the function, output
    names of the wrong length, inputs that do not match the exported signature, or a
    directory that holds no IPU serving export."""


class ServingTypeError(IPUError, TypeError):
    """An `ipu.serving` argument has the wrong type: a signature that is not a tuple or list
    of `tf.TensorSpec`, an `input_dataset` that is not a `tf.data.Dataset`, `output_names`
    neither a string nor a list."""


# -- Graphcore's op functions, `ipu.ops.*` (issue 31) -------------------------------------
class OpArgumentError(IPUError, ValueError):
    """An argument of one of Graphcore's op functions (`normalization_ops`, `embedding_ops`)
    is not usable: a shape, axis, group count or factor that breaks the op's rule."""


class HostEmbeddingError(IPUError, RuntimeError):
    """A host embedding was looked up or updated while not registered (outside
    `HostEmbedding.register`), or registered twice under one name."""


# -- Keras model options, custom ops (issue 31) ------------------------------------------------
class ModelOptionError(IPUError, ValueError):
    """A Keras model option has a value ipu_keras cannot take: `steps_per_execution` that is
    not a positive integer (a Python or numpy int, or an integer scalar tensor), or a key or
    value of `set_infeed_queue_options` / `set_outfeed_queue_options` that Graphcore's Keras
    refused."""


class UnknownOptionError(ModelOptionError, TypeError):
    """An option name the callee does not have (`set_outfeed_queue_options(typo=...)`);
    a TypeError as for an unexpected keyword argument."""


class UnsupportedCustomOpError(IPUError, NotImplementedError):
    """`ipu.custom_ops` runs user C++ (a Poplar program and codelets, or a host callback)
    from a compiled library, which the numpy simulator cannot execute."""


class OutfeedIterationError(IPUError, RuntimeError):
    """`for x in outfeed_queue` where the SDK refused it: in a TF1 graph (iteration is
    eager only) or on a queue whose mode is not `IPUOutfeedMode.ALL`."""


# -- outlined functions and the embedded application runtime (issue 31) ------------------
class OutlinedFunctionError(IPUError, TypeError):
    """`functional_ops.outlined_function` was given something it cannot outline: a
    non-callable, an argument that is not tensor-like, a body returning no tensor."""


class EmbeddedRuntimeError(IPUError, ValueError):
    """The embedded application runtime was misused: an executable file that is not one,
    start or call inputs of the wrong number or shape, a stopped engine."""


class EmbeddedRuntimeDTypeError(EmbeddedRuntimeError, TypeError):
    """An embedded runtime call got an input of another dtype than the executable's."""
