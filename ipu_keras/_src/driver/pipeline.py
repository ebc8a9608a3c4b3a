"""The TensorFlow construction behind `pipelining_ops.pipeline` (checked options in).

Program: `repeat_count` runs of [a loop over the micro-batches of one run, then (in
training) one weight update from the accumulated gradients, then emptying the
buffers]. In each micro-batch the stages are called in order, stage k under
`pipeline_stage(k)` and `ipu_shard(device_mapping[k])`; a stage that reads a tensor
made outside it (other than a variable or a constant) is refused, as in the original.
Gradients and the outfeed sums live in `_Buffers`, device variables made when the
micro-batch body is first traced (their shapes are known only then).
"""
import contextlib
import json
import weakref

import tensorflow as tf

from ipu_keras.errors import PipelineError
from ipu_keras._src import placement


class OptimizerFunctionOutput:
    """What a pipeline's `optimizer_function` returns: the optimizer and the loss.

    Args:
        opt: A Keras optimizer, or a TensorFlow 1 `tf.compat.v1.train.Optimizer` (or
            anything with `apply_gradients`).
        loss: The loss tensor of the micro-batch.
        compute_gradients_args, compute_gradients_kwargs: Arguments of a TensorFlow 1
            optimizer's `compute_gradients(loss, ...)` (e.g. `var_list`).
        apply_gradients_args, apply_gradients_kwargs: Extra arguments of
            `apply_gradients`.
        variables: The variables to train; default: those the loss was computed from.
        tape: A `tf.GradientTape` (accepted; the pipeline records its own).
        gradient_capture_context, captured_gradient_outfeed: Accepted; not modelled.
    """

    def __init__(self, opt, loss, compute_gradients_args=(), compute_gradients_kwargs=None,
                 apply_gradients_args=(), apply_gradients_kwargs=None, variables=(),
                 tape=None, gradient_capture_context=None, captured_gradient_outfeed=None):
        if not hasattr(opt, "apply_gradients"):
            raise TypeError(
                "OptimizerFunctionOutput.opt must be a TensorFlow Optimizer or a Keras "
                f"optimizer. Received: opt={opt!r}")
        if not tf.is_tensor(loss):
            raise TypeError(f"OptimizerFunctionOutput.loss must be a tensor. Received: "
                            f"loss={loss!r}")
        if (compute_gradients_args or compute_gradients_kwargs) and not _is_v1(opt):
            raise ValueError(
                "OptimizerFunctionOutput expected no compute_gradients_args or "
                "compute_gradients_kwargs with a Keras optimizer. Received: "
                f"compute_gradients_args={compute_gradients_args!r}, "
                f"compute_gradients_kwargs={compute_gradients_kwargs!r}")
        self.opt = opt
        self.loss = loss
        self.compute_gradients_args = tuple(compute_gradients_args)
        self.compute_gradients_kwargs = dict(compute_gradients_kwargs or {})
        self.apply_gradients_args = tuple(apply_gradients_args)
        self.apply_gradients_kwargs = dict(apply_gradients_kwargs or {})
        self.variables = tuple(variables)
        self.tape = tape
        self.gradient_capture_context = gradient_capture_context
        self.captured_gradient_outfeed = captured_gradient_outfeed


def _is_v1(opt):
    """A TensorFlow 1 optimizer: gradients come from its own `compute_gradients`."""
    v1 = tf.compat.v1.train.Optimizer     # also through a CrossReplicaOptimizer wrapper
    return isinstance(opt, v1) or isinstance(getattr(opt, "_opt", None), v1)


class _Buffers:
    """Zero-initialised device variables, made on first use (shapes known at trace).

    `tf.function` traces a function that makes variables twice and refuses new ones
    the second time, so buffers of the same pipeline (the same code of its stages and
    optimizer function, the same feeds) and the same shapes are made once and kept in
    `_MADE`. They are empty between runs, so sharing them is safe.
    """

    def __init__(self, key, dtype=None):
        self.key = key
        self.dtype = dtype
        self.variables = []

    def make(self, like):
        key = (self.key, tuple((tuple(t.shape.as_list()), self._dtype(t).name) for t in like))
        with tf.init_scope():
            # A TensorFlow 1 graph keeps its own buffers (initialised with its variables).
            made = _MADE if tf.executing_eagerly() else _GRAPH_MADE.setdefault(
                tf.compat.v1.get_default_graph(), {})
            if key not in made:
                made[key] = [tf.compat.v1.Variable(tf.zeros(t.shape, self._dtype(t)),
                                                   trainable=False, use_resource=True,
                                                   name=f"pipeline_{self.key[-1]}")
                             for t in like]
        self.variables = made[key]
        return self.variables

    def _dtype(self, tensor):
        if self.dtype is None:
            return tensor.dtype
        return self.dtype(tensor) if callable(self.dtype) else tf.as_dtype(self.dtype)

    def clear(self):
        return [v.assign(tf.zeros_like(v)) for v in self.variables]


_MADE = {}
_GRAPH_MADE = weakref.WeakKeyDictionary()


def build(options, inputs, infeed_queue, outfeed_queue, optimizer_function,
          accumulation_dtype, outfeed_dtype, stage_options=None):
    """The pipeline's ops; returns the `tf.Operation` running them."""
    key = tuple(id(getattr(f, "__code__", f)) for f in options.stages + [optimizer_function])
    key += (id(infeed_queue), id(outfeed_queue))
    state = _State(options, inputs, infeed_queue, outfeed_queue, optimizer_function,
                   _Buffers(key + ("gradients",), accumulation_dtype),
                   _Buffers(key + ("outfeed",), outfeed_dtype))

    def run(r):
        with _pipeline_attributes(options, stage_options):
            done = tf.while_loop(lambda i: i < options.count, state.micro_batch,
                                 [tf.constant(0)])
        # Explicit order: a TensorFlow 1 graph adds no automatic control dependencies.
        with tf.control_dependencies(tf.nest.flatten(done)):
            effects = state.after_run()
        with tf.control_dependencies(effects + tf.nest.flatten(done)):
            return r + 1

    final = tf.while_loop(lambda r: r < options.repeat, run, [tf.constant(0)])
    with tf.control_dependencies(tf.nest.flatten(final)):
        return tf.no_op(name="pipeline")


def _pipeline_attributes(options, stage_options):
    """Stamps the schedule, depth and per-stage planner options on the micro-batch loop,
    for the compiler."""
    from tensorflow.core.framework import attr_value_pb2
    from tensorflow.python.framework import ops

    from ipu_keras._src.placement import (PIPELINE_ATTRS, PIPELINE_OPTIONS_ATTR,
                                          PIPELINE_RECOMPUTATION_ATTR)

    values = (int(options.schedule), options.count)
    attrs = {name: attr_value_pb2.AttrValue(i=v) for name, v in zip(PIPELINE_ATTRS, values)}
    attrs[PIPELINE_RECOMPUTATION_ATTR] = attr_value_pb2.AttrValue(i=options.recomputation)
    if stage_options:
        attrs[PIPELINE_OPTIONS_ATTR] = attr_value_pb2.AttrValue(
            s=json.dumps(stage_options, sort_keys=True).encode())
    return ops.get_default_graph()._attr_scope(attrs)


class _State:
    def __init__(self, options, inputs, infeed_queue, outfeed_queue, optimizer_function,
                 grads, sums):
        self.o = options
        self.inputs = inputs
        self.infeed = infeed_queue
        self.outfeed = outfeed_queue
        self.optimizer_function = optimizer_function
        self.grads, self.sums = grads, sums
        self.opt = self.variables = self.apply_args = None

    # -- one micro-batch ----------------------------------------------------------
    def micro_batch(self, i):
        args, kwargs = list(self.inputs), {}
        if self.infeed is not None:
            element = next(self.infeed)
            if isinstance(element, dict):
                kwargs = element
            else:
                args += list(element) if isinstance(element, (tuple, list)) else [element]
        effects = []
        if self.o.training:
            with tf.GradientTape() as tape:
                outputs = self.forward(args, kwargs)
                last_args, last_kwargs = _as_args(outputs)
                with self.stage_scope(len(self.o.stages) - 1):   # the loss: last stage
                    out = self.optimizer_function(*last_args, **last_kwargs)
            effects += self.accumulate(tape, out, i)
            outputs = self.outfed_training(outputs, out.loss)
        else:
            outputs = self.forward(args, kwargs)
        effects += self.send(outputs)
        with tf.control_dependencies(effects):
            return i + 1

    def forward(self, args, kwargs):
        for k, stage in enumerate(self.o.stages):
            with self.stage_scope(k):
                outputs = _call_stage(k, stage, args, kwargs)
            args, kwargs = _as_args(outputs)
        return outputs

    @contextlib.contextmanager
    def stage_scope(self, k):
        with placement.pipeline_stage(k), placement.ipu_shard(self.o.mapping[k]):
            yield

    def accumulate(self, tape, out, i):
        if not isinstance(out, OptimizerFunctionOutput):
            raise TypeError("The optimizer_function must return an OptimizerFunctionOutput. "
                            f"Received: {out!r}")
        grads, variables = self.gradients(tape, out)
        self.opt, self.variables = out.opt, variables
        self.apply_args = (out.apply_gradients_args, out.apply_gradients_kwargs)
        grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                 for g, v in zip(grads, variables)]
        buffers = self.grads.variables or self.grads.make(grads)
        updates = []
        for b, g in zip(buffers, grads):
            stage = placement.placement_of(g.op)[1]   # accumulate where the gradient is made
            scope = self.stage_scope(stage) if stage is not None else contextlib.nullcontext()
            with scope, tf.name_scope("gradients"):    # backward work of that stage
                updates.append(b.assign(self._reduce(b, tf.cast(g, b.dtype), i)))
        return updates

    @staticmethod
    def gradients(tape, out):
        """The micro-batch's gradients and their variables; a TensorFlow 1 optimizer's
        `compute_gradients` gives them, as in the original (unused variables dropped)."""
        if _is_v1(out.opt):
            pairs = out.opt.compute_gradients(out.loss, *out.compute_gradients_args,
                                              **out.compute_gradients_kwargs)
            pairs = [(g, v) for g, v in pairs if g is not None]
            variables = [v for _, v in pairs]
        else:
            variables = list(out.variables) or [v for v in tape.watched_variables()
                                                if v.trainable]
        if not variables:
            raise RuntimeError("No variables to optimize: the pipeline's loss depends on no "
                               "trainable variable. Received: OptimizerFunctionOutput.variables"
                               "=() and no variable read by the stages.")
        if _is_v1(out.opt):
            return [g for g, _ in pairs], variables
        return tape.gradient(out.loss, variables), variables

    def _reduce(self, buffer, grad, i):
        method = self.o.reduction.name
        if method == "SUM":
            return buffer + grad
        if method == "MEAN":
            return buffer + grad / self.o.count
        n = tf.cast(i, buffer.dtype)    # RUNNING_MEAN over micro-batches 0..i
        return buffer * (n / (n + 1)) + grad / (n + 1)

    def outfed_training(self, outputs, loss):
        """What a training pipeline outfeeds: the loss alone (`outfeed_loss`), else the
        last stage's unmasked outputs as a list (one output too), as the original."""
        if self.o.outfeed_loss:
            return loss
        outputs = _as_list(outputs)
        if self.o.mask is not None:
            if len(self.o.mask) != len(outputs):
                raise PipelineError(
                    f"The last computational stage has {len(outputs)} outputs, but the "
                    f"`outfeed_mask` has elements {len(self.o.mask)} - these need to match in "
                    f"size. Received: outfeed_mask={self.o.mask!r}")
            outputs = [t for t, drop in zip(outputs, self.o.mask) if not drop]
        return outputs

    def send(self, outputs):
        """Enqueues (or accumulates) one micro-batch's results. In inference a dict or a
        tensor is enqueued as it is and other structures as a list; accumulated results
        are enqueued as a list (the loss alone with `outfeed_loss`), as the original."""
        if isinstance(outputs, tf.Operation):
            return []
        flat = [t for t in tf.nest.flatten(outputs) if t is not None]
        if not flat:
            return []
        if not isinstance(outputs, (dict, tf.Tensor)):
            outputs = _as_list(outputs)
        if self.outfeed is None:
            raise PipelineError(
                "The last computational stage has tensor outputs: "
                f"{[t.name for t in flat]}, but no outfeed_queue has been provided. "
                "Received: outfeed_queue=None")
        if self.o.accumulate:
            buffers = self.sums.variables or self.sums.make(flat)
            return [b.assign_add(tf.cast(t, b.dtype)) for b, t in zip(buffers, flat)]
        return [self.outfeed.enqueue(outputs)]

    # -- once per run -------------------------------------------------------------
    def after_run(self):
        effects = []
        if self.o.accumulate and self.sums.variables:
            totals = [v.read_value() for v in self.sums.variables]
            effects.append(self.outfeed.enqueue(totals[0] if self.o.outfeed_loss else totals))
            with tf.control_dependencies(effects):
                effects += self.sums.clear()
        if self.o.training:
            if not getattr(self.opt, "built", True):
                with tf.init_scope():
                    self.opt.build(self.variables)
            grads = [b.read_value() for b in self.grads.variables]
            args, kwargs = self.apply_args
            applied = self.opt.apply_gradients(zip(grads, self.variables), *args, **kwargs)
            deps = [x for x in [applied] if isinstance(x, (tf.Operation, tf.Tensor))]
            with tf.control_dependencies(deps + grads):
                effects += self.grads.clear()
        return effects


def _as_list(values):
    return list(values) if isinstance(values, (list, tuple)) else [values]


def _as_args(outputs):
    if isinstance(outputs, dict):
        return [], dict(outputs)
    if isinstance(outputs, (list, tuple)):
        return list(outputs), {}
    return ([] if outputs is None else [outputs]), {}


def _call_stage(k, stage, args, kwargs):
    """Calls stage `k`; refuses tensors it reads from outside (not passed to it)."""
    graph = tf.compat.v1.get_default_graph()
    before = len(graph.get_operations())
    outputs = stage(*args, **kwargs)
    given = {t.ref() for t in tf.nest.flatten((args, kwargs)) if tf.is_tensor(t)}
    new_ops = graph.get_operations()[before:]
    made = {op._id for op in new_ops}
    for op in new_ops:
        outside = [t for t in op.inputs if t.op._id not in made]
        if op.type == "Placeholder":
            outside.append(op.outputs[0])
        for t in outside:
            chain = _capture_chain(t)
            if len(chain) == 1 and op.type == "Placeholder" and t is op.outputs[0]:
                continue    # a placeholder that captures nothing (a loop carry)
            if not _may_capture(chain, given):
                raise PipelineError(
                    f"Trying to capture the tensor {getattr(chain[-1], 'name', t.name)} which "
                    "is not a resource. This tensor needs to be passed as part of the `input` "
                    f"or `infeed_queue` of the pipeline. Received: computational stage {k} "
                    "reading a tensor made outside it.")
    return outputs


def _capture_chain(tensor):
    """`tensor`, then what it captures, then what that captures, out to the source."""
    chain = [tensor]
    while True:
        graph = getattr(chain[-1], "graph", None)
        captures = {i.ref(): e for e, i in getattr(graph, "captures", ())}
        source = captures.get(chain[-1].ref())
        if source is None:
            return chain
        chain.append(source)


def _may_capture(chain, given):
    """Variables (resources), constants and the stage's own arguments may be read."""
    source = chain[-1]
    if any(t.ref() in given for t in chain) or source.dtype == tf.resource:
        return True
    try:
        return source.op.type == "Const"
    except AttributeError:      # an eager tensor: a constant of the program
        return True
