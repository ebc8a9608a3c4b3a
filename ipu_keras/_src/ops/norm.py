"""Op family 'norm': fused batch normalisation and its gradient.

Owns the IR ops `batch_norm` (training or inference, with TensorFlow's five outputs:
y, running mean, running variance, saved batch mean, saved batch variance) and
`batch_norm_grad` (x, scale and offset gradients), with the importers of
FusedBatchNorm, FusedBatchNormV2, FusedBatchNormV3 and their gradients. The reserve
outputs only the GPU uses are empty constants. Keras 3's BatchNormalization does not
emit these ops (it builds batch norm from Mean, SquaredDifference and Rsqrt, which
other families import); tf.compat.v1 and hand-written `tf.raw_ops` code does.

Semantics follow TensorFlow's CPU kernels: statistics over every axis but the channel
axis in the scale dtype (float32 for float16 inputs), the saved variance is the biased
one, the running variance the Bessel-corrected one, blended with the incoming running
statistics by `exponential_avg_factor` when it is not 1.
"""
import numpy as np

from ipu_keras._src.ops.registry import Work, register_op, tf_import

TF_TYPES = (
    "FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3", "FusedBatchNormGrad",
    "FusedBatchNormGradV2", "FusedBatchNormGradV3",
)
"""The TensorFlow op types this module imports."""

IR_OPS = ("batch_norm", "batch_norm_grad")
"""The IR ops this module registers."""


def _channel_axis(rank, data_format):
    return 1 if str(data_format).startswith("NC") else rank - 1


def _layout(x, data_format):
    """(reduction axes, shape a per-channel vector broadcasts as, elements per channel)."""
    channel = _channel_axis(x.ndim, data_format)
    axes = tuple(i for i in range(x.ndim) if i != channel)
    shape = [-1 if i == channel else 1 for i in range(x.ndim)]
    return axes, shape, x.size // max(1, x.shape[channel])


def _batch_norm(x, scale, offset, mean, variance, *, epsilon, factor=1.0, training=True,
                data_format="NHWC"):
    axes, shape, n = _layout(x, data_format)
    xw = x.astype(scale.dtype, copy=False)
    if not training:
        y = (xw - mean.reshape(shape)) * (scale / np.sqrt(variance + epsilon)).reshape(shape)
        y = (y + offset.reshape(shape)).astype(x.dtype)
        return y, mean.copy(), variance.copy(), mean.copy(), variance.copy()
    batch_mean = np.sum(xw, axis=axes) * scale.dtype.type(1 / n)
    centered = xw - batch_mean.reshape(shape)
    batch_var = np.sum(np.square(centered), axis=axes) * scale.dtype.type(1 / n)
    y = centered * (scale / np.sqrt(batch_var + epsilon)).reshape(shape) + offset.reshape(shape)
    running_mean, running_var = batch_mean, batch_var * scale.dtype.type(n / max(1, n - 1))
    if factor != 1:
        running_mean = (1 - factor) * mean + factor * running_mean
        running_var = (1 - factor) * variance + factor * running_var
    dtype = scale.dtype
    return (y.astype(x.dtype), running_mean.astype(dtype), running_var.astype(dtype),
            batch_mean, batch_var)


def _batch_norm_grad(dy, x, scale, mean, variance, *, epsilon, training=True,
                     data_format="NHWC"):
    axes, shape, n = _layout(x, data_format)
    dyw, xw = dy.astype(scale.dtype, copy=False), x.astype(scale.dtype, copy=False)
    centered = xw - mean.reshape(shape)
    inv = 1 / np.sqrt(variance + epsilon)
    doffset = np.sum(dyw, axis=axes)
    dscale = np.sum(dyw * centered, axis=axes) * inv
    if training:
        mean_dy = (doffset * scale.dtype.type(1 / n)).reshape(shape)
        mean_dy_xhat = (dscale * inv * scale.dtype.type(1 / n)).reshape(shape)
        dx = (scale * inv).reshape(shape) * (dyw - mean_dy - centered * mean_dy_xhat)
    else:
        dx = dyw * (scale * inv).reshape(shape)
    return dx.astype(x.dtype), dscale.astype(scale.dtype), doffset.astype(scale.dtype)


def _check(x, scale, data_format):
    channels = x.shape[_channel_axis(x.rank, data_format)] if x.rank else None
    if x.rank < 2 or scale.shape != (channels,):
        raise ValueError(f"batch_norm expected a scale with one entry per channel of its "
                         f"input. Received: x={x}, scale={scale}, data_format={data_format}")
    return scale


def _batch_norm_shape(in_types, *, data_format="NHWC", **_):
    x, scale = in_types[:2]
    stat = _check(x, scale, data_format)
    return [x, stat, stat, stat, stat]


def _batch_norm_grad_shape(in_types, *, data_format="NHWC", **_):
    dy, x, scale = in_types[:3]
    stat = _check(x, scale, data_format)
    if dy.shape != x.shape:
        raise ValueError(f"batch_norm_grad expected a gradient shaped like x. "
                         f"Received: gradient={dy}, x={x}")
    return [x, stat, stat]


def _cost(per_element):
    def cost(in_types, out_types, *, training=True, **_):
        return Work("vector", per_element * (2 if training else 1) * out_types[0].size)

    return cost


register_op("batch_norm", shape=_batch_norm_shape, kernel=_batch_norm, cost=_cost(3),
            mapping="elementwise", tile_rule="channel", chain="norm", function=True)
register_op("batch_norm_grad", shape=_batch_norm_grad_shape, kernel=_batch_norm_grad,
            cost=_cost(4), mapping="elementwise", tile_rule="channel", chain="norm_grad",
            function=True)


def _params(node):
    return {
        "epsilon": float(node.attr("epsilon", 1e-4)),
        "training": bool(node.attr("is_training", True)),
        "data_format": str(node.attr("data_format", "NHWC")),
    }


def _empty(b, like):
    """An unused reserve output: empty, in the statistics dtype."""
    return b.const(np.zeros((0,), like.type.dtype))


@tf_import("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
def _import_batch_norm(node, b):
    params = _params(node)
    factor = float(node.attr("exponential_avg_factor", 1.0))
    outputs = list(b.emit("batch_norm", node.inputs[:5], factor=factor, **params))
    return outputs + ([_empty(b, node.inputs[1])] if node.type == "FusedBatchNormV3" else [])


@tf_import("FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3")
def _import_batch_norm_grad(node, b):
    grads = list(b.emit("batch_norm_grad", node.inputs[:5], **_params(node)))
    return grads + [_empty(b, node.inputs[2]), _empty(b, node.inputs[2])]
