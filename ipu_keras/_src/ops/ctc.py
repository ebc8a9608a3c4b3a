"""Op family 'ctc': PopLibs' CTC loss (the loss and its gradient in one pass) and CTC
beam search (below, with its own notes).

`ctc_loss(data, labels, label_length, data_length) {blank_index}` takes time-major logits
`data` [T, B, C], int32 `labels` [B, L] (padded), `label_length` [B] and `data_length` [B]
and returns `(loss [B], gradient [T, B, C])`: each example's negative log likelihood of
its labelling over its first `data_length` steps, and d loss_b / d data[t, b, :]
(softmax - the posterior of each class, zero past `data_length`). The numbers are
TensorFlow's `tf.nn.ctc_loss` (logits, time major; the gradient is its gradient),
computed by the forward-backward algorithm in log space, in float64, rounded once.

What the op changes against the generic graph: TensorFlow's dense CTC is a loop of about
twenty ops per time step whose states are kept for its backward pass; PopLibs runs one
op whose alpha/beta sweep yields the gradient as well, so the backward pass is only the
product `gradient * d loss` (`ctc_loss` work: the two sweeps over T x B x (2L + 1)
states plus the softmax over C). The TensorFlow side is `ipu_keras_addons`' `CTCLoss`,
a call marked "PopnnCTCLossWithLogits" (`tracer/marked.py`).
"""
import numpy as np

from ipu_keras._src.ir.types import TensorType
from ipu_keras._src.ops.registry import Work, register_op, tf_import

TF_TYPE = "PopnnCTCLossWithLogits"
"""The marked call's op type (the original's TensorFlow op)."""

SWEEP_WORK_PER_STATE = 12
"""Vector work per (time, example, extended label) state: two log-add-exps (a max, two
exps, a log and adds) in each of the alpha and beta sweeps, and the posterior."""


def _shape(in_types, *, blank_index):
    data, labels, label_length, data_length = in_types
    if len(data.shape) != 3 or data.dtype not in ("float16", "float32"):
        raise ValueError(f"ctc_loss expected float data of shape [T, B, C]. Received: {data}")
    steps, batch, classes = data.shape
    if len(labels.shape) != 2 or labels.shape[0] != batch or "int" not in labels.dtype:
        raise ValueError(f"ctc_loss expected int labels of shape [{batch}, L]. "
                         f"Received: {labels}")
    for name, t in (("label_length", label_length), ("data_length", data_length)):
        if t.shape != (batch,) or "int" not in t.dtype:
            raise ValueError(f"ctc_loss expected an int {name} of shape [{batch}]. "
                             f"Received: {t}")
    if not -classes <= blank_index < classes:
        raise ValueError(f"ctc_loss expected a blank_index among {classes} classes. "
                         f"Received: blank_index={blank_index}")
    return [TensorType((batch,), data.dtype), TensorType(data.shape, data.dtype)]


def _logsumexp(*terms):
    top = np.maximum.reduce(terms)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return safe + np.log(sum(np.exp(t - safe) for t in terms))


def _shift(a, by, fill=-np.inf):
    out = np.full_like(a, fill)
    out[..., by:] = a[..., :a.shape[-1] - by]
    return out


def _extended(labels, label_length, blank):
    """Labels with blanks around and between them [B, 2L + 1], which states are used, and
    where a transition may skip a blank (between two different labels)."""
    batch, length = labels.shape
    ext = np.full((batch, 2 * length + 1), blank, np.int64)
    ext[:, 1::2] = labels
    used = np.arange(2 * length + 1)[None, :] < 2 * label_length[:, None] + 1
    skip = np.zeros(ext.shape, bool)
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    return ext, used, skip


def _sweep(emit, used, skip, start, active):
    """Log-space forward variables: `emit` [T, B, S], `start` [B, S] masks the states a
    path may begin in, `active` [T, B] whether step t belongs to example b."""
    out = np.full(emit.shape, -np.inf)
    prev = np.full(emit.shape[1:], -np.inf)
    for t in range(emit.shape[0]):
        first = active[t] & ~(active[t - 1] if t else np.zeros_like(active[t]))
        moved = _logsumexp(prev, _shift(prev, 1), np.where(skip, _shift(prev, 2), -np.inf))
        here = np.where(first[:, None], np.where(start, 0.0, -np.inf), moved) + emit[t]
        here = np.where(used & active[t][:, None], here, -np.inf)
        out[t] = prev = np.where(active[t][:, None], here, prev)
    return out


def _kernel(data, labels, label_length, data_length, *, blank_index):
    steps, batch, classes = data.shape
    blank = blank_index % classes
    x = data.astype(np.float64)
    logp = x - _logsumexp(*np.moveaxis(x, -1, 0))[..., None]
    ext, used, skip = _extended(labels.astype(np.int64), label_length.astype(np.int64), blank)
    emit = np.take_along_axis(logp, np.broadcast_to(ext[None], (steps,) + ext.shape), axis=2)
    active = np.arange(steps)[:, None] < data_length[None, :]
    width = ext.shape[1]
    last = 2 * label_length.astype(np.int64)          # the final blank's state
    alpha = _sweep(emit, used, skip, np.arange(width)[None, :] < 2, active)
    beta = _beta(emit, used, skip, active, last)
    ends = alpha[np.maximum(data_length - 1, 0), np.arange(batch)]
    tail = np.take_along_axis(ends, np.stack([last, np.maximum(last - 1, 0)], 1), axis=1)
    tail[:, 1] = np.where(label_length > 0, tail[:, 1], -np.inf)
    log_likelihood = _logsumexp(tail[:, 0], tail[:, 1])
    posterior = np.exp(alpha + beta - emit - log_likelihood[None, :, None])
    posterior = np.where(np.isfinite(posterior), posterior, 0.0)
    occupancy = np.zeros_like(x)
    t_idx, b_idx, s_idx = np.nonzero(posterior)
    np.add.at(occupancy, (t_idx, b_idx, ext[b_idx, s_idx]), posterior[t_idx, b_idx, s_idx])
    gradient = np.where(active[..., None], np.exp(logp) - occupancy, 0.0)
    return (-log_likelihood).astype(data.dtype), gradient.astype(data.dtype)


def _beta(emit, used, skip, active, last):
    """Log-space backward variables [T, B, S], including the emission at t."""
    steps, batch, width = emit.shape
    out = np.full(emit.shape, -np.inf)
    nxt = np.full((batch, width), -np.inf)
    states = np.arange(width)[None, :]
    skip_from = np.zeros_like(skip)
    skip_from[:, :-2] = skip[:, 2:]            # state s may jump to s + 2
    for t in range(steps - 1, -1, -1):
        final = active[t] & ~(active[t + 1] if t + 1 < steps else np.zeros_like(active[t]))
        moved = _logsumexp(nxt, _shift(nxt[..., ::-1], 1)[..., ::-1],
                           np.where(skip_from, _shift(nxt[..., ::-1], 2)[..., ::-1], -np.inf))
        start = (states == last[:, None]) | (states == last[:, None] - 1)
        here = np.where(final[:, None], np.where(start, 0.0, -np.inf), moved) + emit[t]
        here = np.where(used & active[t][:, None], here, -np.inf)
        out[t] = nxt = np.where(active[t][:, None], here, nxt)
    return out


def _cost(in_types, out_types, *, blank_index):
    steps, batch, classes = in_types[0].shape
    width = 2 * in_types[1].shape[1] + 1
    return Work("vector", steps * batch * (SWEEP_WORK_PER_STATE * width + 4 * classes))


register_op("ctc_loss", shape=_shape, kernel=_kernel, cost=_cost, mapping="linear")


@tf_import(TF_TYPE)
def _import_ctc_loss(node, b, *, blank_index):
    return list(b.emit("ctc_loss", node.inputs, blank_index=int(blank_index)))





# -- beam search ------------------------------------------------------------------------------
#
# `ctc_beam_search(data, data_length) {blank_index, beam_width, top_paths}` decodes
# log probabilities [T, B, C] (normalised again at each step, as logits) into (negative log probabilities [B, P], lengths [B, P],
# labels [B, P, T] padded with the blank), P = top_paths. It is TensorFlow's CPU decoder
# (`tf.nn.ctc_beam_search_decoder`, no merging of repeats) step for step: a prefix trie
# whose entries keep blank-, label- and total log probabilities, a beam of the `beam_width` best entries by total, children grown from
# every entry of the last beam that could still enter it, in ascending class order.

BEAM_TF_TYPE = "PopnnCTCBeamSearchWithLogProbs"
"""The marked call's op type of the beam search (the original's TensorFlow op)."""

BEAM_WORK_PER_CANDIDATE = 8
"""Vector work per (step, beam entry, class) candidate: a log-add-exp and a compare."""


class _Entry:
    """A labelling prefix: its parent, last label, children by label, and the log
    probabilities [blank, label, total] of the previous (`old`) and current step."""

    __slots__ = ("parent", "label", "children", "old", "new")

    def __init__(self, parent, label):
        self.parent, self.label, self.children = parent, label, {}
        self.old = [-np.inf] * 3
        self.new = [-np.inf] * 3

    @property
    def active(self):
        return self.new[2] != -np.inf

    def labels(self):
        out, entry = [], self
        while entry.parent is not None:
            out.append(entry.label)
            entry = entry.parent
        return out[::-1]


def _log_add(a, b):
    if a == -np.inf:
        return b
    if b == -np.inf:
        return a
    hi, lo = (a, b) if a > b else (b, a)
    return float(np.float32(hi) + np.log1p(np.exp(np.float32(lo - hi))))


class _Beam:
    """The beam: at most `width` entries, the best by current total kept (TensorFlow's
    TopN: a new entry replaces the worst only if it is strictly better)."""

    def __init__(self, width):
        self.width, self.entries = width, []

    def push(self, entry):
        if len(self.entries) < self.width:
            self.entries.append(entry)
            return
        worst = self.bottom()
        if entry.new[2] > worst.new[2]:
            self.entries[self.entries.index(worst)] = entry

    def bottom(self):
        return min(self.entries, key=lambda e: e.new[2])

    def extract(self):
        entries = sorted(self.entries, key=lambda e: -e.new[2])
        self.entries = []
        return entries


def _step(beam, logp, blank, classes):
    branches = beam.extract()
    for b in branches:
        b.old = list(b.new)
    for b in branches:
        if b.parent is not None:
            if b.parent.active:
                prev = b.parent.old[0] if b.label == b.parent.label else b.parent.old[2]
                b.new[1] = _log_add(b.new[1], prev)
            b.new[1] += float(logp[b.label])
        b.new[0] = b.old[2] + float(logp[blank])
        b.new[2] = _log_add(b.new[0], b.new[1])
        beam.push(b)

    def candidate(p):
        return p[2] > -np.inf and (len(beam.entries) < beam.width or
                                   p[2] > beam.bottom().new[2])

    for b in branches:
        if not candidate(b.old):
            continue
        for label in classes:
            child = b.children.get(label)
            if child is None:
                child = b.children[label] = _Entry(b, label)
            if child.active:
                continue
            prev = b.old[0] if label == b.label else b.old[2]
            child.new = [-np.inf, float(logp[label]) + prev, 0.0]
            child.new[2] = child.new[1]
            if candidate(child.new):
                if len(beam.entries) == beam.width:
                    beam.bottom().new = [-np.inf] * 3
                beam.push(child)
            else:
                child.old, child.new = [-np.inf] * 3, [-np.inf] * 3


def _decode(logp, steps, blank, width, top_paths):
    """One example: the `top_paths` best labellings and their log probabilities."""
    root = _Entry(None, -1)
    root.new = [0.0, -np.inf, 0.0]
    beam = _Beam(width)
    beam.push(root)
    classes = [c for c in range(logp.shape[-1]) if c != blank]
    for t in range(steps):
        _step(beam, logp[t], blank, classes)
    best = beam.extract()
    if top_paths > len(best):
        raise ValueError(f"ctc_beam_search expected at most {len(best)} paths from the "
                         f"beam. Received: top_paths={top_paths}")
    return [(e.labels(), e.new[2]) for e in best[:top_paths]]


def _beam_shape(in_types, *, blank_index, beam_width, top_paths):
    data, data_length = in_types
    if len(data.shape) != 3 or data.dtype not in ("float16", "float32"):
        raise ValueError(f"ctc_beam_search expected float data of shape [T, B, C]. "
                         f"Received: {data}")
    if not 1 <= top_paths <= beam_width:
        raise ValueError(f"ctc_beam_search expected 1 <= top_paths <= beam_width. "
                         f"Received: top_paths={top_paths}, beam_width={beam_width}")
    steps, batch, _ = data.shape
    return [TensorType((batch, top_paths), data.dtype),
            TensorType((batch, top_paths), "int32"),
            TensorType((batch, top_paths, steps), "int32")]


def _beam_kernel(data, data_length, *, blank_index, beam_width, top_paths):
    steps, batch, classes = data.shape
    blank = blank_index % classes
    scores = np.zeros((batch, top_paths), data.dtype)
    lengths = np.zeros((batch, top_paths), np.int32)
    decoded = np.full((batch, top_paths, steps), blank, np.int32)
    x = data.astype(np.float32)
    top = x.max(axis=-1, keepdims=True)
    # TensorFlow's decoder normalises each step's input (shift-invariant, like logits)
    logp = x - (top + np.log(np.exp(x - top).sum(axis=-1, keepdims=True)))
    for b in range(batch):
        for p, (labels, total) in enumerate(
                _decode(logp[:, b], int(data_length[b]), blank, beam_width, top_paths)):
            scores[b, p], lengths[b, p] = -total, len(labels)
            decoded[b, p, :len(labels)] = labels
    return scores, lengths, decoded


def _beam_cost(in_types, out_types, *, blank_index, beam_width, top_paths):
    steps, batch, classes = in_types[0].shape
    return Work("vector", steps * batch * beam_width * classes * BEAM_WORK_PER_CANDIDATE)


register_op("ctc_beam_search", shape=_beam_shape, kernel=_beam_kernel, cost=_beam_cost,
            mapping="linear")


@tf_import(BEAM_TF_TYPE)
def _import_beam_search(node, b, *, blank_index, beam_width, top_paths):
    return list(b.emit("ctc_beam_search", node.inputs, blank_index=int(blank_index),
                       beam_width=int(beam_width), top_paths=int(top_paths)))
__all__ = ["BEAM_TF_TYPE", "TF_TYPE"]
