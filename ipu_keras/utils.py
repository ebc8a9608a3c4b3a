"""Small helpers of the IPU API, and its configuration functions before `IPUConfig`.

`create_ipu_config`, `auto_select_ipus`, `set_ipu_model_options` & co. (SDK <= 2.3) build an
`IpuOptions` over an `IPUConfig`; each warns once that it is deprecated.
"""

import tensorflow as tf

from ipu_keras._src import compat, flags
from ipu_keras import config as ipu_config_module
from ipu_keras.errors import ConfigurationError
from ipu_keras._src.tf1 import in_graph_mode, move_initialization_to_cpu

IPUConfig = ipu_config_module.IPUConfig
"""`ipu.utils.IPUConfig` is `ipu.config.IPUConfig`, as the SDK's `utils` re-exported it."""


def running_on_ipu_model():
    """Whether `TF_POPLAR_FLAGS` has `--use_ipu_model`, as in IPU TensorFlow. Every device
    of ipu_keras is simulated; the flag makes it behave as Graphcore's IPU Model rather
    than IPU hardware: a program whose tiles are out of memory compiles and runs."""
    return flags.use_ipu_model()


def reset_ipu_seed(seed, device="/device:IPU:0", cpu_seed=None):
    """Sets the seed of random ops; the simulator's random numbers follow TensorFlow's."""
    del device
    tf.random.set_seed(seed if cpu_seed is None else cpu_seed)


def move_variable_initialization_to_cpu(graph=None):
    """Places the initialisers of the graph's variables on the CPU.

    Call it after building a TensorFlow 1 graph and before
    `tf.compat.v1.global_variables_initializer()`. Eagerly there is nothing to move:
    variables are initialised on the host.

    Args:
        graph: The graph; None for the default graph.
    """
    if graph is None and not in_graph_mode():
        return
    move_initialization_to_cpu(graph or tf.compat.v1.get_default_graph())


# --- The configuration API before IPUConfig (SDK <= 2.3; removed in SDK 2.4) ---------------

_CURRENT = "ipu.config.IPUConfig"


class IpuOptions:
    """What `create_ipu_config` returns: the old options object, mapped onto an `IPUConfig`.

    The `set_*`/`auto_select_ipus` functions take it, set the matching `IPUConfig` options
    and return it, as the original functions did with their protobuf;
    `configure_ipu_system(opts)` configures the system with `opts.ipu_config`.
    """

    def __init__(self, ipu_config):
        self.ipu_config = ipu_config

    def __repr__(self):
        return f"IpuOptions({self.ipu_config!r})"


def _options(opts, function):
    if not isinstance(opts, IpuOptions):
        raise ConfigurationError(
            f"{function} expected the options returned by create_ipu_config(). Received: "
            f"opts={opts!r}. With an IPUConfig, set its attributes instead.")
    return opts.ipu_config


@compat.deprecated_function("ipu.utils.create_ipu_config", f"{_CURRENT}()", "2.1", "2.4")
def create_ipu_config(profiling=False, enable_ipu_events=False, use_poplar_text_report=False,
                      use_poplar_cbor_report=False, profile_execution=None,
                      enable_poplar_serialized_graph=False, report_every_nth_execution=0,
                      max_report_size=0x10000000, report_directory="", scheduler_selection="",
                      always_rearrange_copies_on_the_host=False, merge_infeed_io_copies=False,
                      disable_graph_outlining=False, max_scheduler_lookahead_depth=5,
                      max_scheduler_search_space_size=64, prefetch_data_streams=True,
                      selection_order=None, enable_experimental_remote_buffer_embedding=False):
    """Creates the pre-IPUConfig options object (an `IpuOptions` over a new `IPUConfig`).

    Profiling, report and scheduler arguments are accepted and have no effect: reports
    come from `ipu_keras.profiling`. `selection_order` maps onto
    `IPUConfig.selection_order`.
    """
    del (profiling, enable_ipu_events, use_poplar_text_report, use_poplar_cbor_report,
         profile_execution, enable_poplar_serialized_graph, report_every_nth_execution,
         max_report_size, report_directory, scheduler_selection,
         always_rearrange_copies_on_the_host, merge_infeed_io_copies, disable_graph_outlining,
         max_scheduler_lookahead_depth, max_scheduler_search_space_size, prefetch_data_streams,
         enable_experimental_remote_buffer_embedding)
    cfg = ipu_config_module.IPUConfig()
    if selection_order is not None:
        cfg.selection_order = getattr(selection_order, "value", selection_order)
    return IpuOptions(cfg)


@compat.deprecated_function("ipu.utils.auto_select_ipus", f"{_CURRENT}.auto_select_ipus",
                            "2.1", "2.4")
def auto_select_ipus(opts, num_ipus):
    """Asks for `num_ipus` IPUs (an int, or a list of ints for several devices)."""
    _options(opts, "auto_select_ipus").auto_select_ipus = num_ipus
    return opts


@compat.deprecated_function("ipu.utils.select_ipus", f"{_CURRENT}.select_ipus", "2.1", "2.4")
def select_ipus(opts, indices):
    """Asks for the IPU devices with these ids."""
    _options(opts, "select_ipus").select_ipus = indices
    return opts


@compat.deprecated_function("ipu.utils.set_ipu_model_options", f"{_CURRENT}.ipu_model",
                            "2.1", "2.4")
def set_ipu_model_options(opts, compile_ipu_code=True, tiles_per_ipu=None,
                          ipu_model_version=None):
    """Sets the IPU Model (the simulated device): code compilation, tiles, version."""
    model = _options(opts, "set_ipu_model_options").ipu_model
    model.compile_ipu_code = compile_ipu_code
    if tiles_per_ipu is not None:
        model.tiles_per_ipu = tiles_per_ipu
    if ipu_model_version is not None:
        model.version = ipu_model_version
    return opts


@compat.deprecated_function("ipu.utils.set_matmul_options",
                            f"{_CURRENT}.matmuls.poplar_options", "2.1", "2.4")
def set_matmul_options(opts, matmul_options=None, clear_pass_type=False):
    """Sets the Poplar options of matrix multiplications."""
    del clear_pass_type
    _options(opts, "set_matmul_options").matmuls.poplar_options = dict(matmul_options or {})
    return opts


@compat.deprecated_function("ipu.utils.set_convolution_options",
                            f"{_CURRENT}.convolutions.poplar_options", "2.1", "2.4")
def set_convolution_options(opts, convolution_options=None):
    """Sets the Poplar options of convolutions."""
    cfg = _options(opts, "set_convolution_options")
    cfg.convolutions.poplar_options = dict(convolution_options or {})
    return opts


@compat.deprecated_function("ipu.utils.set_floating_point_behaviour_options",
                            f"{_CURRENT}.floating_point_behaviour", "2.1", "2.4")
def set_floating_point_behaviour_options(opts, inv=True, div0=True, oflo=True, esr=True,
                                         nanoo=True):
    """Sets the floating-point exception and stochastic rounding flags."""
    behaviour = _options(opts, "set_floating_point_behaviour_options").floating_point_behaviour
    behaviour.inv, behaviour.div0, behaviour.oflo = inv, div0, oflo
    behaviour.esr, behaviour.nanoo = esr, nanoo
    return opts


@compat.deprecated_function("ipu.utils.set_recomputation_options",
                            f"{_CURRENT}.allow_recompute", "2.1", "2.4")
def set_recomputation_options(opts, allow_recompute=True):
    """Sets whether activations may be recomputed instead of kept."""
    _options(opts, "set_recomputation_options").allow_recompute = allow_recompute
    return opts


def configure_ipu_system(config, device="cpu", reset_configuration=True):
    """Configures the IPU system with an `IPUConfig`, or with the old options object.

    Args:
        config: An `IPUConfig`, or (deprecated, SDK <= 2.3) what `create_ipu_config`
            returned.
        device: Accepted for compatibility; ignored.
        reset_configuration: Accepted for compatibility; the new configuration always
            replaces the old one.
    """
    del reset_configuration
    if isinstance(config, IpuOptions):
        compat.warn_once("ipu.utils.configure_ipu_system(create_ipu_config())",
                         f"{_CURRENT}().configure_ipu_system()")
        config = config.ipu_config
    ipu_config_module.configure_ipu_system(config, device)


compat.declare("ipu.utils.configure_ipu_system(create_ipu_config())", compat.DEPRECATED,
               f"works; warns once, use `{_CURRENT}().configure_ipu_system()`", "2.1", "2.4")
compat.declare("ipu.utils.configure_ipu_system(IPUConfig)", compat.SUPPORTED,
               "same as `IPUConfig.configure_ipu_system()`", "2.1")
for _name in ("set_compilation_options", "set_optimization_options", "set_norm_options",
              "set_pooling_options", "set_report_options", "set_serialization_options",
              "set_io_tile_options", "set_gcl_options", "set_ipu_connection_type",
              "set_experimental_multi_replica_distribution_options",
              "extract_compile_reports", "extract_execute_reports"):
    compat.declare(f"ipu.utils.{_name}", compat.NOT_SUPPORTED,
                   "Poplar engine, report and connection options have no simulator meaning",
                   "2.1", "2.4")
compat.declare("ipu.utils.reset_ipu_seed", compat.SUPPORTED, "seeds TensorFlow's random ops",
               "2.1")
compat.declare("ipu.utils.running_on_ipu_model", compat.SUPPORTED,
               "True with --use_ipu_model, which runs programs out of tile memory", "2.1")
compat.declare("ipu.utils.move_variable_initialization_to_cpu", compat.SUPPORTED,
               "places TF1 initialisers on the CPU; eagerly a no-op", "2.1")
