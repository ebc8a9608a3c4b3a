"""`compile_for_ipu`: the one entry point from a traced IR graph to an `Executable`.

Both callers (`_executor.py` for `ipu_compiler.compile` and `IPUStrategy.run`, and
`keras/program.py` for Keras steps) come through here. It owns what surrounds the
compiler: reading the active `IPUConfig` (target, planner options, code size),
the executable cache (`IPUConfig.executable_cache_path`, else
`TF_POPLAR_FLAGS=--executable_cache_path`, its size limit
`--executable_cache_max_size`; files by `compiler/cache.py`: an entry that cannot be
used is recompiled and replaced, with one warning per entry and reason), the
progress (`--show_progress_bar`, `progress.py`: the compile stage of the caller's
`WorkProgress`, or of its own), the reports
(`POPLAR_ENGINE_OPTIONS` autoReport or `profiling.enable_reports`, written by
`ipu_keras/_src/reports/`) and the tensor map file (`--tensor_map_file_path`). The
compiler itself (`compiler/pipeline.py`) knows none of these.

A process launched as one instance of a distributed run (`ipu-keras run`, which sets
`IPU_KERAS_NUM_REPLICAS`) is warned once when its device runs another number of replicas
than its share: the script forgot `ipu_keras.distributed.set_ipu_config`.

When reports are on, the graph is compiled with out-of-memory deferred so that a
report of a model that does not fit is still written; the error is raised after.
"""
import logging
import os
import warnings

from ipu_keras._src.device import config as ipu_config
from ipu_keras._src import flags
from ipu_keras._src import reports
from ipu_keras._src.gc_pause import collection_paused
from ipu_keras._src.driver.progress import WorkProgress
from ipu_keras._src.compiler import cache
from ipu_keras._src.compiler.passes.memory import allow_out_of_memory
from ipu_keras._src.compiler.pipeline import compile_graph
from ipu_keras.errors import ExecutableFormatError, OutOfTileMemoryError

logger = logging.getLogger("ipu_keras")


def cache_directory(cfg):
    """The executable cache directory: the IPUConfig option, else the flag; '' for none."""
    path = cfg.executable_cache_path or flags.get_flag("executable_cache_path", "")
    return "" if path is True else str(path)


def compile_options(cfg):
    """The options of `compile_graph` that the config and environment decide."""
    return {
        "compile_ipu_code": bool(cfg.ipu_model.compile_ipu_code),
        "matmul_options": dict(cfg.matmuls.poplar_options),
        "conv_options": dict(cfg.convolutions.poplar_options),
        "allow_oom": allow_out_of_memory(),
        "allow_recompute": bool(cfg.allow_recompute),
        "ipu_model": flags.use_ipu_model(),
    }


@collection_paused()
def compile_for_ipu(graph, cfg=None, name="", progress=None):
    """Compiles `graph` for the device `cfg` describes, through the executable cache.

    Args:
        graph: The traced IR graph.
        cfg: An `IPUConfig`; None for the active one (`config.get_active_config()`).
        name: A name for logs, progress and the report directory (e.g. the function's).
        progress: The `WorkProgress` of the program's first call (tracing, compiling,
            first execution), which shows the compile as one of its stages; None for one
            of the compile's own.

    Returns:
        Executable: compiled now or loaded from the cache. Its `info["cache"]` says
        which ("hit", "miss" or "off") and, with a cache, its `key`.

    Raises:
        OutOfTileMemoryError: if the graph does not fit (unless out-of-memory is allowed).
    """
    cfg = ipu_config.get_active_config() if cfg is None else cfg
    target = cfg.target()
    options = compile_options(cfg)
    directory = cache_directory(cfg)
    max_size = cache_max_size() if directory else None
    report_dir = reports.reports_directory()
    map_file = flags.get_flag("tensor_map_file_path", "")
    reports.check_outputs(report_dir, map_file)
    key = bound = None
    if directory or report_dir or map_file:
        bound = cache.binding(graph, target.to_dict(), options)
        key = bound["key"]
    executable = _cached(directory, bound, name) if directory else None
    status = "hit" if executable is not None else ("miss" if directory else "off")
    if executable is None:
        executable = _compile(graph, target, options, progress or WorkProgress(name),
                              defer_oom=bool(report_dir))
        if directory:
            _store(directory, bound, executable, max_size)
    executable.info["cache"] = {"status": status, "key": key}
    _say_replicas(target.num_ipus, executable.target["num_ipus"])
    _check_instance_replicas(target.num_ipus, executable.target["num_ipus"])
    if report_dir:
        reports.write_compiled(executable, report_dir, name, key)
    if map_file and map_file is not True:
        reports.write_tensor_map_file(map_file, executable, name, key)
    _raise_deferred_oom(executable, options)
    _say_ipu_model_oom(executable, name)
    return executable


def _compile(graph, target, options, progress, defer_oom):
    with progress.compiling() as stage:
        return compile_graph(graph, target, options["compile_ipu_code"],
                             matmul_options=options["matmul_options"],
                             conv_options=options["conv_options"],
                             allow_oom=options["allow_oom"] or defer_oom,
                             allow_recompute=options["allow_recompute"],
                             ipu_model=options["ipu_model"],
                             on_pass=lambda pass_name, seconds: stage.advance(1, pass_name))


_SAID_REPLICAS = set()


def _say_replicas(device_ipus, replica_ipus):
    """Says once per (device, graph) size how many replicas the device runs."""
    replicas = device_ipus // replica_ipus
    if replicas > 1 and (device_ipus, replica_ipus) not in _SAID_REPLICAS:
        _SAID_REPLICAS.add((device_ipus, replica_ipus))
        logger.info(
            "The device has %d IPUs and the graph uses %d (its shards): %d replicas of it "
            "run, each on its own share of the infeeds.", device_ipus, replica_ipus,
            replicas)


_SAID_INSTANCE = []
NUM_REPLICAS_ENV = "IPU_KERAS_NUM_REPLICAS"
"""`process_group.NUM_REPLICAS_ENV`, read here without importing the runtime (and with it
TensorFlow) in a process that was not launched as an instance."""


def _check_instance_replicas(device_ipus, replica_ipus):
    """Warns once if a launched instance runs other than its share of the replicas."""
    if _SAID_INSTANCE or NUM_REPLICAS_ENV not in os.environ:
        return
    from ipu_keras._src.runtime import process_group

    group = process_group.init()
    replicas = device_ipus // replica_ipus
    if replicas == group.local_replicas:
        return
    _SAID_INSTANCE.append(replicas)
    plural = "s" if replicas != 1 else ""
    warnings.warn(
        f"This process is instance {group.rank} of {group.size} of a distributed run of "
        f"{group.total_replicas} replicas ({process_group.NUM_REPLICAS_ENV}="
        f"{group.total_replicas}), so it was expected to run {group.local_replicas} replicas, "
        f"but its IPUConfig gives it {device_ipus} IPU(s), which runs {replicas} replica{plural}"
        f" of this {replica_ipus}-IPU graph. Received: device_ipus={device_ipus}, "
        f"local_replicas={group.local_replicas}. Call "
        f"`ipu_keras.distributed.set_ipu_config(config, ipus_per_replica={replica_ipus})` "
        "(PopDist's `popdist.tensorflow.set_ipu_config`) before "
        "`config.configure_ipu_system()`; as it is, the run trains on "
        f"{replicas * group.size} replicas, not {group.total_replicas}.", stacklevel=3)


def _raise_deferred_oom(executable, options):
    error = executable.memory.get("out_of_memory")
    if error and not options["allow_oom"]:
        raise OutOfTileMemoryError(**error)


def _say_ipu_model_oom(executable, name):
    """Warns that the IPU Model runs a program whose tiles are out of memory (compiled
    with `--use_ipu_model`, it does not stop on them)."""
    tiles = executable.memory.get("tiles_out_of_memory")
    if not tiles or executable.memory.get("out_of_memory"):
        return
    logger.warning(
        "%s: %d tile(s) out of memory, the busiest (tile %d) using %d bytes where tiles "
        "only have %d; the IPU Model (--use_ipu_model) runs it, IPU hardware would not.",
        name or "program", len(tiles), executable.memory["max_tile"],
        executable.memory["max_tile_bytes"], executable.target["bytes_per_tile"])


def cache_max_size():
    """The size limit of the executable cache in bytes (`--executable_cache_max_size`,
    else `cache.DEFAULT_MAX_SIZE`; 0: no limit).

    Raises:
        ConfigurationError: if the flag's value is not a size.
    """
    value = flags.get_flag("executable_cache_max_size")
    return cache.DEFAULT_MAX_SIZE if value is None else cache.parse_size(value)


_REFUSED = set()
"""(entry, reason) of the refused cache entries already warned about."""


def _cached(directory, bound, name):
    path = cache.entry_path(directory, bound["key"])
    try:
        executable = cache.load(directory, bound)
    except ExecutableFormatError as e:
        say = logger.debug if (path, str(e)) in _REFUSED else logger.warning
        _REFUSED.add((path, str(e)))
        say("The executable cache entry %s of '%s' cannot be used (damaged, altered or "
            "not compiled for this graph: %s); it is being recompiled and replaced.",
            path, name or "graph", e)
        return None
    if executable is not None:
        logger.info("Loaded executable from cache %s for '%s'.", path, name or "graph")
    return executable


def _store(directory, bound, executable, max_size):
    try:
        path = cache.store(directory, bound, executable)
        removed = cache.sweep(directory, max_size)
    except OSError as e:
        logger.warning("Could not write the executable cache entry in '%s': %s. The "
                       "executable was compiled and is used, but it is not cached; expected a "
                       "writable directory with free space. Received: executable_cache_path=%r",
                       directory, e, directory)
        return
    logger.debug("Stored executable in cache %s; removed %s.", path, removed or "nothing")


__all__ = ["cache_directory", "cache_max_size", "compile_for_ipu", "compile_options"]
