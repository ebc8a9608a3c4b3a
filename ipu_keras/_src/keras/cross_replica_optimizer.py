"""`CrossReplicaOptimizer`: averages gradients over the replicas before applying them.

Its methods run inside traced user code; they are plain Python, so AutoGraph is told not
to convert them (it mis-resolved calls on this `__getattr__`-forwarding class)."""
import inspect

import tensorflow as tf

from ipu_keras._src.tracer.marked import cross_replica_mean


class CrossReplicaOptimizer:
    """Wraps an optimizer so that each gradient is the mean over all replicas.

    With every replica applying the same mean gradient from equal weights, the weights
    stay equal: data-parallel training. Every other attribute is the wrapped optimizer's.

    Args:
        opt: The optimizer to wrap (a Keras optimizer).
        name: Accepted for the original's signature.
    """

    _reduce = staticmethod(cross_replica_mean)

    def __init__(self, opt, name="CrossReplicaOptimizer"):
        self._opt = opt
        self._name = name

    @tf.autograph.experimental.do_not_convert
    def __getattr__(self, name):
        if name.startswith("__") or name == "_opt":
            raise AttributeError(name)
        return getattr(self._opt, name)

    @tf.autograph.experimental.do_not_convert
    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        reduced = [(None if g is None else self._reduce(g), v) for g, v in grads_and_vars]
        return self._opt.apply_gradients(reduced, *args, **kwargs)

    @tf.autograph.experimental.do_not_convert
    def minimize(self, loss, *args, **kwargs):
        """A TensorFlow 1 optimizer's `minimize`, through this wrapper's `apply_gradients`
        (so the gradients are averaged over the replicas, as the original's TF1 class)."""
        if not isinstance(self._opt, tf.compat.v1.train.Optimizer):
            return self._opt.minimize(loss, *args, **kwargs)
        arguments = inspect.signature(tf.compat.v1.train.Optimizer.minimize).bind(
            self._opt, loss, *args, **kwargs).arguments
        del arguments["self"]
        global_step, name = arguments.pop("global_step", None), arguments.pop("name", None)
        grads_and_vars = self._opt.compute_gradients(**arguments)
        return self.apply_gradients(grads_and_vars, global_step=global_step, name=name)
