"""Running a signature graph on the simulated IPU, and what a run reports.

Owns the path from a `SignatureGraph` to results: the `IPUConfig` the IPU options
describe (`--num_ipus`, `--matmul_amp`, `--conv_amp`, `--*_partial_type`), tracing the
graph with the project's tracer (`ipu_keras._src.tracer`), compiling it (`compile_for_ipu`),
optionally inside an on-device loop of `batch_per_step` micro-batches (the embedded
runtime's executable), and running executables on the engine with the figures a run
prints: simulated device time, its split into cycle kinds and the fullest tile.
"""
import dataclasses

import numpy as np
import tensorflow as tf

from ipu_keras import config as ipu_config
from ipu_keras._src.driver.compile import compile_for_ipu
from ipu_keras._src.device.executable import CYCLE_KINDS
from ipu_keras._src.runtime import Session
from ipu_keras._src.tracer import trace
from ipu_keras_addons.saved_model_tool import model


@dataclasses.dataclass
class IPUOptions:
    """The IPU options shared by `run` and `convert ipu` (defaults of the original)."""

    num_ipus: int = 1
    matmul_amp: float = 0.6
    conv_amp: float = 0.6
    matmul_partial_type: str = "float"
    conv_partial_type: str = "float"

    def config(self):
        """The `IPUConfig` these options describe."""
        cfg = ipu_config.IPUConfig()
        cfg.auto_select_ipus = int(self.num_ipus)
        cfg.matmuls.poplar_options = {"availableMemoryProportion": str(float(self.matmul_amp)),
                                      "partialsType": str(self.matmul_partial_type)}
        cfg.convolutions.poplar_options = {
            "availableMemoryProportion": str(float(self.conv_amp)),
            "partialsType": str(self.conv_partial_type)}
        return cfg


def with_device_for(options, mapping):
    """`options` with enough IPUs for `mapping` (node -> (shard, stage)): the highest shard
    + 1 rounded up to a power of two, as the compiler requires (multi-IPU device, issue 10)."""
    shards = 1
    while shards < max([0] + [shard + 1 for shard, _ in (mapping or {}).values()]):
        shards *= 2
    return dataclasses.replace(options, num_ipus=max(int(options.num_ipus), shards))


@dataclasses.dataclass
class RunResult:
    """What `run` prints: outputs by key, and the simulated device's figures."""

    outputs: dict
    cycles: dict
    executions: int
    target: dict
    memory: dict
    embedded: bool = False

    @property
    def device_seconds(self):
        return sum(self.cycles.values()) / self.target["clock_hz"]

    def summary_lines(self):
        """The lines `run` prints after the results."""
        if not self.executions:
            return ["No node is placed on the IPU (no_ipu_placement): TensorFlow ran the "
                    "graph on the host."]
        t, total = self.target, max(sum(self.cycles.values()), 1)
        split = ", ".join(f"{k} {100 * self.cycles[k] / total:.1f}%" for k in CYCLE_KINDS)
        source = "embedded executable" if self.embedded else "compiled now"
        return [
            f"Simulated device: {t['name']}, {t['num_ipus']} IPU(s) x {t['tiles_per_ipu']} "
            f"tiles ({source})",
            f"Device time: {self.device_seconds * 1e6:.2f} us in {self.executions} "
            f"execution(s), {sum(self.cycles.values()):,} cycles ({split})",
            f"Fullest tile: {self.memory['max_tile']} with {self.memory['max_tile_bytes']:,} "
            f"of {t['bytes_per_tile']:,} bytes",
        ]


def host_result(outputs):
    """The RunResult of a graph that ran on the host only."""
    return RunResult(outputs, dict.fromkeys(CYCLE_KINDS, 0), 0, {}, {})


def trace_signature(sig, input_shapes, placement=None, batch_per_step=0):
    """The traced IR of `sig` (inputs in sorted key order), looped when batch_per_step > 0.

    The project's tracer (`ipu_keras._src.tracer.trace`) traces the function that imports the
    graph, node runs made under their placement scopes (`model.importing_body`). With a
    loop, each input gets a leading axis of `batch_per_step` micro-batches and the graph
    runs once per micro-batch inside one on-device loop (`tf.map_fn`).
    """
    keys = sorted(sig.inputs)
    body = model.importing_body(sig, placement=placement)
    lead = [batch_per_step] if batch_per_step > 0 else []
    examples = [np.zeros(lead + list(input_shapes[k]), sig.inputs[k][1].dtype.as_numpy_dtype)
                for k in keys]
    if batch_per_step > 0:
        body = _looped(body, sig, input_shapes)
    return trace(body, examples)


def _looped(body, sig, input_shapes):
    outs = sorted(sig.outputs)
    # The loop's output lists need static element shapes: those of one micro-batch.
    step = model.graph_function(sig, input_shapes).structured_outputs
    specs = tuple(tf.TensorSpec(step[k].shape, step[k].dtype) for k in outs)

    def loop(*stacked):
        mapped = tf.map_fn(lambda xs: tuple(body(*xs)[k] for k in outs), tuple(stacked),
                           fn_output_signature=specs)
        return dict(zip(outs, mapped))

    return loop


def compile_signature(sig, input_shapes, options, placement=None, batch_per_step=0):
    """Traces and compiles `sig` for the device `options` describe; returns the Executable."""
    traced = trace_signature(sig, input_shapes, placement, batch_per_step)
    return compile_for_ipu(traced.graph, options.config(), "saved_model_signature")


def execute(executable, sig, arrays, batch_size=None, batch_per_step=0):
    """Runs `executable` on `arrays` (input key -> array); returns a `RunResult`.

    Without a loop the executable runs once. With `batch_per_step` > 0 the inputs are cut
    into micro-batches of `batch_size`, `batch_per_step` of them per execution (the last
    execution padded with zeros, whose outputs are dropped).
    """
    keys, outs = sorted(sig.inputs), sorted(sig.outputs)
    session = Session(executable, [], [], [])
    cycles = dict.fromkeys(CYCLE_KINDS, 0)
    looped = batch_per_step > 0
    chunks = (_chunks(arrays, keys, batch_size, batch_per_step) if looped
              else [[arrays[k] for k in keys]])
    results = []
    for chunk in chunks:
        out = session.run(chunk)
        for kind, count in session.last_cycles.items():
            cycles[kind] += count
        results.append([o.reshape((-1,) + o.shape[2:]) for o in out] if looped else out)
    if looped:
        n = arrays[keys[0]].shape[0]
        outputs = {k: np.concatenate([r[i] for r in results])[:n] for i, k in enumerate(outs)}
    else:
        outputs = dict(zip(outs, results[0]))
    # The device's IPUs (the executable's target holds the IPUs of one replica).
    target = dict(executable.target,
                  num_ipus=executable.info.get("device_ipus", executable.target["num_ipus"]))
    return RunResult(outputs, cycles, len(results), target, executable.memory)


def _chunks(arrays, keys, batch_size, batch_per_step):
    n = next(iter(arrays.values())).shape[0]
    per_execution = batch_size * batch_per_step
    for start in range(0, n, per_execution):
        chunk = []
        for k in keys:
            part = arrays[k][start:start + per_execution]
            pad = per_execution - part.shape[0]
            if pad:
                part = np.concatenate([part, np.zeros((pad,) + part.shape[1:], part.dtype)])
            chunk.append(part.reshape((batch_per_step, batch_size) + part.shape[1:]))
        yield chunk

