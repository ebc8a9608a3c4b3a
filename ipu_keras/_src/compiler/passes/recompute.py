"""The `recompute` pass: IPU TensorFlow's recomputation (`IPUConfig.allow_recompute`).

With recomputation on, some forward values are not kept until the backward pass reads
them: the equations that made them run again, as new equations (copies with fresh
values, their node under `recomputation/`), just before the backward readers, which are
rewired to the copies. The originals' values then die after the forward pass; the
copies charge their cycles again (the lowering costs them like any step) and compute the
same numbers (the same kernels on the same operands). What may run again is the op's
`recompute` fact: "again" for a compute op; "never" for what draws random numbers
(Graphcore stashes stateful ops' outputs); a `recomputation_checkpoint` is kept and
recomputation starts from it. Engine ops (variables, feeds, control flow, constants)
are never copied.

Graphcore's rules (github.com/graphcore/tensorflow @ b2127bb, compiler/plugin/poplar/
driver/passes, and `pipelining_ops.RecomputationMode`):

* Pipelines (a loop with `Equation.pipeline`, training): each stage is a recomputation
  point. The mode `Auto` means RecomputeThenBackpropagate under the Grouped and
  Interleaved schedules, RecomputeAndBackpropagateInterleaved under Sequential
  (`GetPipelineRecomputationMode`); RecomputeThenBackpropagate is refused under
  Sequential and RecomputeAndBackpropagateInterleaved under Interleaved.
  - RecomputeThenBackpropagate (`pipeline_recomputation_stage_inserter.cc`): every stage
    but the last runs its whole forward stage again, from its inputs, right before its
    backward stage (stateful ops' outputs stashed). Checkpoints play no part. The rerun
    shares the forward stage's code ("better code reuse", `RecomputationMode`): its
    copies are marked `recomputation/shared/` and the memory plan counts no code or
    vertex state for them.
  - RecomputeAndBackpropagateInterleaved (`pipeline_recomputation.cc`): a stage's
    backward pass recomputes the forward values it reads from the stage's inputs and
    checkpoints (a checkpointed value is kept, whether the backward pass reads it or
    the checkpoint's output), each recomputed op placed just before its first reader
    (the interleaving); the last stage recomputes only what lies before its checkpoints (none
    without checkpoints: its backward follows its forward).
* Everywhere but in a weight update (a conditional's branches here), a cast of a
  parameter (a graph input or a variable) read by several equations is cloned before
  each reader (`recompute_casts.cc`): the op's "per_use" fact.

* Outside pipelines, a forward conv whose output only a batch norm (of batch statistics)
  and that norm's gradient read is recomputed with the norm before the gradient, and
  with the relu or sigmoid after the norm when that non-linearity's gradient and a
  backward conv read it (`recompute_instructions.cc`, ConvNormNL and ConvNorm): the ops'
  `chain` fact. The norm must be a fused one (FusedBatchNorm*, as tf.compat.v1 code and
  Graphcore's own layers make): Keras 3's BatchNormalization builds the norm from Mean,
  SquaredDifference and Rsqrt, which no chain matches, as on the IPU.

Not modelled: recomputation suggestions (deprecated in SDK 2.2). Outside pipelines
Graphcore removes checkpoints (`recomputation_checkpoint_remover.cc`): here they stay
as views, which cost nothing.
"""
import dataclasses

from ipu_keras._src.compiler.passes.rewrite import substitute
from ipu_keras._src.compiler.passes.stages import RECOMPUTED_MARKER, SHARED_MARKER, is_backward
from ipu_keras._src.ir.graph import Graph, Source, Value
from ipu_keras._src.ops.registry import get_op
from ipu_keras.errors import PipelineError

THEN = "RecomputeThenBackpropagate"
INTERLEAVED = "RecomputeAndBackpropagateInterleaved"
_SUPPORTED = {THEN: ("Grouped", "Interleaved"), INTERLEAVED: ("Grouped", "Sequential")}


def recompute(graph, allow_recompute=False):
    """`graph` with recomputation applied if `allow_recompute` (else `graph` itself).

    Raises:
        PipelineError: if a pipeline's recomputation mode does not suit its schedule.
    """
    return _rewrite(graph, update=False) if allow_recompute else graph


def recomputation_mode(pipeline):
    """The mode a pipeline (`Equation.pipeline`) recomputes with, `Auto` resolved."""
    schedule, mode = pipeline["schedule"], pipeline.get("recomputation", "Auto")
    if mode == "Auto":
        return INTERLEAVED if schedule == "Sequential" else THEN
    if schedule not in _SUPPORTED[mode]:
        raise PipelineError(
            f"The {schedule} pipeline schedule does not support the {mode} recomputation "
            f"mode (supported by {' and '.join(_SUPPORTED[mode])}). Received: "
            f"recomputation_mode={mode}, pipeline_schedule={schedule}.")
    return mode


def _rewrite(graph, update, pipeline=False):
    equations = []
    for eqn in graph.equations:
        if eqn.subgraphs():
            role = get_op(eqn.op).role
            piped = role == "loop" and bool(eqn.pipeline)
            params = {k: _rewrite(v, update or role == "branch", piped and k == "body")
                      if isinstance(v, Graph) else v for k, v in eqn.params.items()}
            if piped:
                params["body"] = recompute_stages(params["body"],
                                                  recomputation_mode(eqn.pipeline))
            eqn = dataclasses.replace(eqn, params=params)
        equations.append(eqn)
    graph = graph.replace(equations=equations)
    if not pipeline:   # a pipeline's stages are apart in Graphcore's HLO: no chain spans them
        graph = recompute_chains(graph)
    return graph if update else recompute_casts(graph)


# -- pipeline stages --------------------------------------------------------------------


def recompute_stages(body, mode):
    """A pipeline loop body whose stages' backward passes recompute their activations."""
    eqns = body.equations
    staged = [e for e in eqns if e.stage is not None]
    if not any(is_backward(e) for e in staged):
        return body                      # inference: nothing is kept for a backward pass
    last = max(e.stage for e in staged)
    plan = _Plan(eqns)
    for k in sorted({e.stage for e in staged}):
        if mode == THEN and k == last:
            continue
        plan.stage(k, mode, last=k == last)
    return body.replace(equations=plan.equations())


class _Plan:
    """The copies to insert (at which position) and the backward readers to rewire."""

    def __init__(self, eqns):
        self.eqns = eqns
        self.producer = {v.id: i for i, e in enumerate(eqns) for v in e.outputs}
        self.inserts = []           # (position, original index, copy)
        self.rewired = {}           # index of a backward equation -> {old id: new value}

    def stage(self, k, mode, last):
        bwd = [i for i, e in enumerate(self.eqns) if e.stage == k and is_backward(e)]
        if not bwd:
            return
        fwd = {i for i, e in enumerate(self.eqns[:min(bwd)])    # before its backward pass
               if e.stage == k and not is_backward(e)}
        again = ("again", "per_use") + (("checkpoint",) if mode == THEN else ())
        allowed = {i for i in fwd if get_op(self.eqns[i].op).role == "compute"
                   and get_op(self.eqns[i].op).recompute in again
                   and not self.eqns[i].subgraphs()}
        if last:
            allowed &= self._before_checkpoints(fwd)
        if mode != THEN:    # a checkpoint views its operand: what made it is kept too
            allowed -= {self.producer.get(e.inputs[0].id) for e in self._checkpoints(fwd)}
        if mode == THEN:
            roots = {v.id for j, e in enumerate(self.eqns) if j not in fwd for v in e.inputs}
        else:
            roots = {v.id for j in bwd for v in self.eqns[j].inputs}
        cluster = self._cluster(roots, allowed)
        if cluster:
            self.copy(cluster, bwd, mode)

    def _checkpoints(self, fwd):
        return [self.eqns[i] for i in sorted(fwd)
                if get_op(self.eqns[i].op).recompute == "checkpoint"]

    def _before_checkpoints(self, fwd):
        """The forward equations that reach a checkpoint of the stage."""
        return self._ancestors({v.id for e in self._checkpoints(fwd) for v in e.inputs}, fwd)

    def _ancestors(self, ids, within):
        found, todo = set(), list(ids)
        while todo:
            i = self.producer.get(todo.pop())
            if i is not None and i in within and i not in found:
                found.add(i)
                todo.extend(v.id for v in self.eqns[i].inputs)
        return found

    def _cluster(self, roots, allowed):
        """The allowed equations behind `roots`, stopping at what is kept (the stage's
        inputs, checkpoints, stateful ops, engine ops)."""
        return self._ancestors({r for r in roots if self.producer.get(r) in allowed},
                               allowed)

    def copy(self, cluster, bwd, mode):
        """Copies of the equations `cluster` for the readers `bwd`, which are rewired to
        them: all before the first reader (THEN), or each before its own first reader."""
        order = sorted(cluster)
        new = {}
        copies = {}
        marker = SHARED_MARKER if mode == THEN else RECOMPUTED_MARKER
        for i in order:
            eqn = self.eqns[i]
            outputs = [Value(v.type, v.name) for v in eqn.outputs]
            copies[i] = dataclasses.replace(
                eqn, inputs=substitute(eqn.inputs, new), outputs=outputs,
                source=Source(marker + eqn.source.node, eqn.source.layer))
            new.update((old.id, out) for old, out in zip(eqn.outputs, outputs))
        for j in bwd:
            if any(v.id in new for v in self.eqns[j].inputs):
                self.rewired.setdefault(j, {}).update(
                    (v.id, new[v.id]) for v in self.eqns[j].inputs if v.id in new)
        start = min(bwd)
        positions = {}
        for i in reversed(order):
            if mode == THEN:
                positions[i] = start
                continue
            ids = {v.id for v in copies[i].outputs}
            readers = [j for j in bwd if any(v.id in ids for v in self._inputs(j))]
            readers += [positions[d] for d in order if d > i and d in positions
                        and any(v.id in ids for v in copies[d].inputs)]
            positions[i] = min(readers, default=start)
        self.inserts += [(positions[i], i, copies[i]) for i in order]

    def _inputs(self, j):
        return substitute(self.eqns[j].inputs, self.rewired.get(j, {}))

    def equations(self):
        at = {}
        for position, i, copy in sorted(self.inserts, key=lambda t: (t[0], t[1])):
            at.setdefault(position, []).append(copy)
        out = []
        for j, eqn in enumerate(self.eqns):
            out += at.get(j, [])
            if j in self.rewired:
                eqn = dataclasses.replace(eqn, inputs=self._inputs(j))
            out.append(eqn)
        return out


# -- Conv -> Norm -> non-linearity chains ------------------------------------------------


def recompute_chains(graph):
    """`graph` whose Conv -> Norm (-> non-linearity) chains are recomputed just before the
    backward pass reads them (IPU TensorFlow's RecomputeInstructions): a forward conv read
    only by a batch norm of batch statistics and that norm's gradient; the gradient then
    reads copies of the conv and the norm (its statistics), and, when the norm's output
    goes through a relu or sigmoid that its gradient and a backward conv read, those read
    a copy of the non-linearity too."""
    plan = _Plan(graph.equations)
    readers = {}
    for j, eqn in enumerate(graph.equations):
        for v in {v.id for v in eqn.inputs}:
            readers.setdefault(v, []).append(j)
    for i, eqn in enumerate(graph.equations):
        found = _chain_at(graph.equations, i, readers)
        if found:
            cluster, reading = found
            plan.copy(cluster, reading, INTERLEAVED)
    return graph if not plan.inserts else graph.replace(equations=plan.equations())


def _chain_at(eqns, i, readers):
    """(equations to recompute, their backward readers) of a chain starting at conv `i`."""
    conv = eqns[i]
    if not _is_conv(conv) or is_backward(conv) or len(conv.outputs) != 1:
        return None
    users = readers.get(conv.outputs[0].id, [])
    chain = {get_op(eqns[j].op).chain: j for j in users}
    if len(users) != 2 or set(chain) != {"norm", "norm_grad"}:
        return None
    norm, grad = chain["norm"], chain["norm_grad"]
    if not eqns[norm].params.get("training", True):
        return None
    cluster, reading = [i, norm], [grad]
    for j in readers.get(eqns[norm].outputs[0].id, []):
        if get_op(eqns[j].op).chain != "nonlinearity":
            continue
        after = [eqns[k] for k in readers.get(eqns[j].outputs[0].id, [])]
        back = [k for k, e in zip(readers.get(eqns[j].outputs[0].id, []), after)
                if get_op(e.op).chain == "nonlinearity_grad"
                or (_is_conv(e) and is_backward(e))]
        kinds = {get_op(eqns[k].op).chain or "conv" for k in back}
        if {"nonlinearity_grad", "conv"} <= kinds:
            cluster.append(j)
            reading += back
        break
    return cluster, reading


def _is_conv(eqn):
    """Whether `eqn` poses a convolution to the planner (a conv or its gradients)."""
    opdef = get_op(eqn.op)
    return opdef.plan == "conv"


# -- casts --------------------------------------------------------------------------------


def recompute_casts(graph):
    """`graph` whose casts of a parameter read by several equations are cloned before
    each reader but the first (IPU TensorFlow's RecomputeCasts)."""
    params = {v.id for v in graph.inputs} | {
        v.id for e in graph.equations if get_op(e.op).role == "variable_read" for v in e.outputs}
    readers = {}
    for j, eqn in enumerate(graph.equations):
        for v in {v.id for v in eqn.inputs}:
            readers.setdefault(v, []).append(j)
    clones = {}                 # reader index -> [(old value id, copy)]
    for eqn in graph.equations:
        if (get_op(eqn.op).recompute != "per_use" or len(eqn.outputs) != 1
                or eqn.inputs[0].id not in params):
            continue
        for j in readers.get(eqn.outputs[0].id, [])[1:]:
            out = Value(eqn.outputs[0].type, eqn.outputs[0].name)
            clones.setdefault(j, []).append((eqn.outputs[0].id, dataclasses.replace(
                eqn, outputs=[out],
                source=Source(RECOMPUTED_MARKER + eqn.source.node, eqn.source.layer))))
    if not clones:
        return graph
    out = []
    for j, eqn in enumerate(graph.equations):
        mapping = {}
        for old, copy in clones.get(j, []):
            out.append(copy)
            mapping[old] = copy.outputs[0]
        out.append(dataclasses.replace(eqn, inputs=substitute(eqn.inputs, mapping))
                   if mapping else eqn)
    return graph.replace(equations=out)
