"""Op family 'rnn': PopLibs' fused LSTM and GRU layers, forward and backward.

* `popnn_lstm(x, kernel, recurrent, bias, h0, c0) {activation, recurrent_activation}`
  -> (outputs [T, B, U], h [B, U], c [B, U]) over time-major x [T, B, F], with Keras'
  weight layout and gate order (i, f, c, o);
* `popnn_gru(x, kernel, recurrent, bias, h0) {activation, recurrent_activation,
  reset_after}` -> (outputs, h), gates (z, r, h), bias [3U] or, with `reset_after`,
  [2, 3U] (input and recurrent biases);
* `popnn_lstm_grad` / `popnn_gru_grad` take the forward op's inputs followed by the
  gradients of its outputs and return the gradients of the inputs (backpropagation
  through time). The backward op recomputes the forward pass inside itself (PopLibs
  keeps the forward pass's intermediates instead: the simulator's backward op costs the
  recomputation, and no intermediates are live between the passes).

The kernels compute in float64 and round each output once to the input dtype (PopLibs
keeps float32 partials). The activations are those the layers accept (tanh, relu,
softmax, sigmoid, hard_sigmoid), as Keras 3 defines them.

What the ops change against the generic graph: the generic layer is a while loop of
about twenty ops per step, each a compute set, plus the stacks its gradient keeps; the
fused op is one superstep per step of the recurrence, whose cost is that step's gate
matmuls on the AMP spread over the tiles of its output sequence, with a row of the state
exchanged to each tile and a sync (a `Work` with `steps`, charged by
`compiler/passes/lower.py`); the backward op sweeps twice (recompute, then backpropagate).
The TensorFlow side is `ipu_keras_addons`' `PopnnLSTM` / `PopnnGRU`, calls marked
"PopnnLSTMLayer" / "PopnnGRULayer" (`tracer/marked.py`) whose bodies are their loops.
"""
import numpy as np

from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops.registry import Work, register_op, tf_import

ACTIVATIONS = ("tanh", "relu", "softmax", "sigmoid", "hard_sigmoid")
TF_TYPES = ("PopnnLSTMLayer", "PopnnLSTMLayerBackprop", "PopnnGRULayer",
            "PopnnGRULayerBackprop")


def _act(name, x):
    if name == "tanh":
        return np.tanh(x)
    if name == "relu":
        return np.maximum(x, 0.0)
    if name == "sigmoid":
        return 1.0 / (1.0 + np.exp(-x))
    if name == "hard_sigmoid":
        return np.clip(x + 3.0, 0.0, 6.0) / 6.0
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _act_grad(name, x, dy):
    """d act(x) / dx applied to the upstream gradient `dy`."""
    y = _act(name, x)
    if name == "tanh":
        return dy * (1.0 - y * y)
    if name == "relu":
        return dy * (x > 0)
    if name == "sigmoid":
        return dy * y * (1.0 - y)
    if name == "hard_sigmoid":
        return dy * ((x > -3.0) & (x < 3.0)) / 6.0
    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))


# -- LSTM ------------------------------------------------------------------------------------

def _lstm_forward(x, kernel, recurrent, bias, h, c, act, ract):
    """Outputs and per-step values (pre-activations, cell states) for the backward."""
    proj = x @ kernel + bias
    outs, pres, cells = [], [], [c]
    for t in range(len(x)):
        z = proj[t] + h @ recurrent
        i, f, g, o = np.split(z, 4, axis=-1)
        c = _act(ract, f) * c + _act(ract, i) * _act(act, g)
        h = _act(ract, o) * _act(act, c)
        outs.append(h)
        pres.append((i, f, g, o))
        cells.append(c)
    return np.stack(outs), h, c, pres, cells


def _lstm(x, kernel, recurrent, bias, h0, c0, *, activation, recurrent_activation):
    args = [a.astype(np.float64) for a in (x, kernel, recurrent, bias, h0, c0)]
    outs, h, c, _, _ = _lstm_forward(*args, activation, recurrent_activation)
    return tuple(v.astype(x.dtype) for v in (outs, h, c))


def _lstm_grad(x, kernel, recurrent, bias, h0, c0, d_outs, d_h, d_c, *, activation,
               recurrent_activation, wrt):
    x64, k, r, b, h0_, c0_ = (a.astype(np.float64) for a in (x, kernel, recurrent, bias,
                                                            h0, c0))
    outs, _, _, pres, cells = _lstm_forward(x64, k, r, b, h0_, c0_, activation,
                                            recurrent_activation)
    act, ract = activation, recurrent_activation
    dh_next, dc_next = d_h.astype(np.float64), d_c.astype(np.float64)
    d_outs = d_outs.astype(np.float64)
    dproj = np.zeros(x.shape[:2] + (k.shape[1],))
    d_rec = np.zeros_like(r)
    for t in range(len(x) - 1, -1, -1):
        i, f, g, o = pres[t]
        c_prev, c = cells[t], cells[t + 1]
        h_prev = outs[t - 1] if t else h0_
        dh = d_outs[t] + dh_next
        do = _act_grad(ract, o, dh * _act(act, c))
        dc = dc_next + _act_grad(act, c, dh * _act(ract, o))
        di = _act_grad(ract, i, dc * _act(act, g))
        dg = _act_grad(act, g, dc * _act(ract, i))
        df = _act_grad(ract, f, dc * c_prev)
        dc_next = dc * _act(ract, f)
        dz = np.concatenate([di, df, dg, do], axis=-1)
        d_rec += h_prev.T @ dz
        dh_next = dz @ r.T
        dproj[t] = dz
    grads = [dproj @ k.T, np.einsum("tbf,tbg->fg", x64, dproj), d_rec,
             dproj.sum(axis=(0, 1)), dh_next, dc_next]
    inputs = (x, kernel, recurrent, bias, h0, c0)
    return tuple(grads[i].astype(inputs[i].dtype) for i in wrt)


# -- GRU -------------------------------------------------------------------------------------

def _gru_forward(x, kernel, recurrent, bias, h, act, ract, reset_after):
    u = h.shape[-1]
    proj = x @ kernel + (bias[0] if reset_after else bias)
    outs, saved = [], []
    for t in range(len(x)):
        xz, xr, xh = np.split(proj[t], 3, axis=-1)
        if reset_after:
            rz, rr, rh = np.split(h @ recurrent + bias[1], 3, axis=-1)
            z_pre, r_pre = xz + rz, xr + rr
            r = _act(ract, r_pre)
            cand_pre = xh + r * rh
        else:
            rz, rr = np.split(h @ recurrent[:, :2 * u], 2, axis=-1)
            z_pre, r_pre = xz + rz, xr + rr
            r = _act(ract, r_pre)
            rh = None
            cand_pre = xh + (r * h) @ recurrent[:, 2 * u:]
        z, cand = _act(ract, z_pre), _act(act, cand_pre)
        saved.append((h, z_pre, r_pre, cand_pre, rh))
        h = z * h + (1.0 - z) * cand
        outs.append(h)
    return np.stack(outs), h, saved


def _gru(x, kernel, recurrent, bias, h0, *, activation, recurrent_activation, reset_after):
    args = [a.astype(np.float64) for a in (x, kernel, recurrent, bias, h0)]
    outs, h, _ = _gru_forward(*args, activation, recurrent_activation, reset_after)
    return outs.astype(x.dtype), h.astype(x.dtype)


def _gru_grad(x, kernel, recurrent, bias, h0, d_outs, d_h, *, activation,
              recurrent_activation, reset_after, wrt):
    x64, k, r, b, h0_ = (a.astype(np.float64) for a in (x, kernel, recurrent, bias, h0))
    _, _, saved = _gru_forward(x64, k, r, b, h0_, activation, recurrent_activation,
                               reset_after)
    act, ract, u = activation, recurrent_activation, h0.shape[-1]
    d_outs, dh_next = d_outs.astype(np.float64), d_h.astype(np.float64)
    dproj = np.zeros(x.shape[:2] + (k.shape[1],))
    d_rec, d_bias = np.zeros_like(r), np.zeros_like(b)
    for t in range(len(x) - 1, -1, -1):
        h, z_pre, r_pre, cand_pre, rh = saved[t]
        z, rr, cand = _act(ract, z_pre), _act(ract, r_pre), _act(act, cand_pre)
        dh = d_outs[t] + dh_next
        dz = _act_grad(ract, z_pre, dh * (h - cand))
        dcand = _act_grad(act, cand_pre, dh * (1.0 - z))
        dh_prev = dh * z
        if reset_after:
            dr = _act_grad(ract, r_pre, dcand * rh)
            dinner = np.concatenate([dz, dr, dcand * rr], axis=-1)
            d_rec += h.T @ dinner
            d_bias[1] += dinner.sum(axis=0)
            dh_prev += dinner @ r.T
        else:
            d_rh = dcand @ r[:, 2 * u:].T
            d_rec[:, 2 * u:] += (rr * h).T @ dcand
            dr = _act_grad(ract, r_pre, d_rh * h)
            dh_prev += d_rh * rr
            dinner = np.concatenate([dz, dr], axis=-1)
            d_rec[:, :2 * u] += h.T @ dinner
            dh_prev += dinner @ r[:, :2 * u].T
        dproj[t] = np.concatenate([dz, dr, dcand], axis=-1)
        dh_next = dh_prev
    if reset_after:
        d_bias[0] = dproj.sum(axis=(0, 1))
    else:
        d_bias = dproj.sum(axis=(0, 1))
    grads = [dproj @ k.T, np.einsum("tbf,tbg->fg", x64, dproj), d_rec, d_bias, dh_next]
    inputs = (x, kernel, recurrent, bias, h0)
    return tuple(grads[i].astype(inputs[i].dtype) for i in wrt)


# -- shapes, costs, registration ---------------------------------------------------------------

def _check(op, in_types, gates, activation, recurrent_activation):
    x, kernel, recurrent = in_types[:3]
    for name in (activation, recurrent_activation):
        if name not in ACTIVATIONS:
            raise ValueError(f"{op} expected an activation in {ACTIVATIONS}. "
                             f"Received: {name!r}")
    if len(x.shape) != 3 or kernel.shape[0] != x.shape[2] or kernel.shape[1] % gates:
        raise ValueError(f"{op} expected inputs [T, B, F] and a kernel [F, {gates}U]. "
                         f"Received: x={x}, kernel={kernel}")
    units = kernel.shape[1] // gates
    if recurrent.shape != (units, gates * units):
        raise ValueError(f"{op} expected a recurrent kernel [{units}, {gates * units}]. "
                         f"Received: {recurrent}")
    steps, batch, _ = x.shape
    return TensorType((steps, batch, units), x.dtype), TensorType((batch, units), x.dtype)


def _lstm_shape(in_types, *, activation, recurrent_activation):
    outs, state = _check("popnn_lstm", in_types, 4, activation, recurrent_activation)
    return [outs, state, state]


def _gru_shape(in_types, *, activation, recurrent_activation, reset_after):
    outs, state = _check("popnn_gru", in_types, 3, activation, recurrent_activation)
    return [outs, state]


def _grad_shape(in_types, **params):
    return [in_types[i] for i in params["wrt"]]


def _macs(in_types):
    """Multiply-accumulates of one pass: every step's gate matmuls [B, F + U] x [., gU]."""
    x, kernel, recurrent = in_types[:3]
    steps, batch, features = x.shape
    return steps * batch * (features + recurrent.shape[0]) * kernel.shape[1]


def _recurrence(in_types, passes, macs):
    """`passes` sweeps over the T steps; before each step every tile working on the gate
    matmuls receives the row of the state h the previous step produced for the example
    whose gates it computes (U values: the batch's gates are spread over more tiles than
    there are examples)."""
    x, _, recurrent = in_types[:3]
    steps = x.shape[0]
    carried = recurrent.shape[0] * x.itemsize
    return Work("amp", macs, steps=passes * steps, carried=carried)


def _forward_cost(in_types, out_types, **_):
    return _recurrence(in_types, 1, _macs(in_types))


def _backward_cost(in_types, out_types, **_):
    # The forward sweep recomputed, then the backward sweep: input and weight gradients.
    return _recurrence(in_types, 2, 3 * _macs(in_types))


# IPU TensorFlow runs each layer, forward and backward, as a cached Poplar function
# (outline_instructions.cc: LstmLayerFwd/Bwd, GRULayerFwd/Bwd; registry.py's `function`).
register_op("popnn_lstm", shape=_lstm_shape, kernel=_lstm, cost=_forward_cost,
            mapping="linear", function=True)
register_op("popnn_lstm_grad", shape=_grad_shape, kernel=_lstm_grad, cost=_backward_cost,
            mapping="linear", function=True)
register_op("popnn_gru", shape=_gru_shape, kernel=_gru, cost=_forward_cost, mapping="linear",
            function=True)
register_op("popnn_gru_grad", shape=_grad_shape, kernel=_gru_grad, cost=_backward_cost,
            mapping="linear", function=True)


def _importer(op, cell_params):
    def importer(node, b, **params):
        kept = {k: params[k] for k in ("activation", "recurrent_activation") + cell_params}
        if op.endswith("_grad"):
            kept["wrt"] = tuple(int(i) for i in params["wrt"])
        outs = b.emit(op, node.inputs, **kept)
        return list(outs) if isinstance(outs, tuple) else [outs]

    return importer


for _tf_type, _op, _cell in (("PopnnLSTMLayer", "popnn_lstm", ()),
                             ("PopnnLSTMLayerBackprop", "popnn_lstm_grad", ()),
                             ("PopnnGRULayer", "popnn_gru", ("reset_after",)),
                             ("PopnnGRULayerBackprop", "popnn_gru_grad", ("reset_after",))):
    tf_import(_tf_type)(_importer(_op, _cell))

__all__ = ["ACTIVATIONS", "TF_TYPES"]
