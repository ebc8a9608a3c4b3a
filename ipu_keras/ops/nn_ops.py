"""`ipu.nn_ops`: PopLibs' CTC loss and CTC beam search, each one IPU op.

`ctc_loss_v2` (logits) and `ctc_loss_with_log_probs` build a TensorFlow function call
marked "PopnnCTCLossWithLogits" (`tracer/marked.py`) whose body is `tf.nn.ctc_loss` and
its gradient, so TensorFlow on the CPU computes the same numbers; the simulated IPU runs
the `ctc_loss` op of `ops/ctc.py`. The backward pass multiplies the gradient the
forward op already made by the incoming one: nothing else is kept or recomputed.
`ctc_beam_search_decoder` (logits) and `ctc_beam_search_decoder_with_log_probs` are a
call marked "PopnnCTCBeamSearchWithLogProbs" around `tf.nn.ctc_beam_search_decoder`,
the `ctc_beam_search` op on the device.
"""
import tensorflow as tf

from ipu_keras._src import compat
from ipu_keras.errors import AddonsArgumentError
from ipu_keras._src.ops import ctc as ctc_op
from ipu_keras._src.tracer.marked import marked_call


def ctc_loss_v2(labels, logits, label_length, logit_length, blank_index, out_dtype=None,
                name=None):
    """The CTC loss of each example of time-major `logits`.

    Args:
        labels: int [batch, max label length], padded past each `label_length`.
        logits: float16 or float32 [max time, batch, classes], unnormalised.
        label_length: int [batch], the length of each labelling.
        logit_length: int [batch], the steps of each example.
        blank_index: The class of the blank label (negative counts from the end).
        out_dtype: The loss dtype: logits' by default; float32 for float16 logits may be
            asked for, float16 for float32 logits may not.
        name: A name for the op (default "ctc_loss").

    Returns:
        The losses, shape [batch].
    """
    logits = tf.convert_to_tensor(logits)
    out_dtype = _out_dtype(logits.dtype, out_dtype)
    with tf.name_scope(name or "ctc_loss"):
        loss = ctc_loss_and_gradient(labels, logits, label_length, logit_length, blank_index)
        return tf.cast(loss, out_dtype)


def ctc_loss_with_log_probs(labels, data, label_length, data_length, blank_index,
                            out_dtype=None, name=None):
    """`ctc_loss_v2` on log probabilities instead of logits (same arguments).

    The data are normalised once more with `log_softmax`, which leaves log probabilities
    as they are, so the loss and its gradient are those of `tf.nn.ctc_loss` on them.
    """
    data = tf.convert_to_tensor(data)
    return ctc_loss_v2(labels, tf.nn.log_softmax(data, axis=-1), label_length, data_length,
                       blank_index, out_dtype, name)


def ctc_loss_and_gradient(labels, logits, label_length, logit_length, blank_index):
    """Per-example CTC losses of `logits` as the marked op, differentiable in `logits`."""
    labels = tf.cast(labels, tf.int32)
    label_length = tf.cast(tf.reshape(label_length, [-1]), tf.int32)
    logit_length = tf.cast(tf.reshape(logit_length, [-1]), tf.int32)
    blank_index = int(blank_index)

    def body(logits, labels, label_length, logit_length):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            loss = tf.nn.ctc_loss(labels, logits, label_length, logit_length,
                                  logits_time_major=True, blank_index=blank_index)
        return loss, tape.gradient(loss, logits)

    @tf.custom_gradient
    def forward(logits):
        loss, gradient = marked_call(ctc_op.TF_TYPE, body,
                                     [logits, labels, label_length, logit_length],
                                     {"blank_index": blank_index})
        return loss, lambda dloss: gradient * tf.cast(dloss, gradient.dtype)[None, :, None]

    return forward(logits)


def ctc_beam_search_decoder(logits, logit_length, beam_width=100, top_paths=1,
                            blank_index=-1, name=None):
    """Decodes time-major `logits` by CTC beam search (repeated labels are not merged).

    Args:
        logits: float [max time, batch, classes], unnormalised.
        logit_length: int [batch], the steps of each example.
        beam_width: The number of labelling prefixes kept at each step.
        top_paths: How many of the best labellings to return (at most `beam_width`).
        blank_index: The class of the blank label (negative counts from the end).
        name: A name for the op (default "ctc_beam_search_decoder").

    Returns:
        `(label_probs, label_lengths, decoded_labels)`: the negative log probabilities
        [batch, top_paths], best first; the labellings' lengths [batch, top_paths]; the
        labellings [batch, top_paths, max time], padded with `blank_index`.
    """
    logits = tf.convert_to_tensor(logits)
    return ctc_beam_search_decoder_with_log_probs(
        tf.nn.log_softmax(logits, axis=-1), logit_length, beam_width, top_paths, blank_index,
        name)


def ctc_beam_search_decoder_with_log_probs(log_probs, input_length, beam_width=100,
                                           top_paths=1, blank_index=-1, name=None):
    """`ctc_beam_search_decoder` on log probabilities instead of logits (same arguments)."""
    log_probs = tf.convert_to_tensor(log_probs)
    if not 1 <= top_paths <= beam_width:
        raise AddonsArgumentError(
            f"ctc_beam_search_decoder expected 1 <= top_paths <= beam_width. Received: "
            f"top_paths={top_paths}, beam_width={beam_width}.")
    classes = log_probs.shape[-1]
    blank = int(blank_index) % classes
    length = tf.cast(tf.reshape(input_length, [-1]), tf.int32)

    def body(data, length):
        return _tf_beam_search(data, length, blank, beam_width, top_paths)

    with tf.name_scope(name or "ctc_beam_search_decoder"):
        return marked_call(ctc_op.BEAM_TF_TYPE, body, [log_probs, length],
                           {"blank_index": blank, "beam_width": int(beam_width),
                            "top_paths": int(top_paths)})


def _tf_beam_search(data, data_length, blank, beam_width, top_paths):
    """TensorFlow's decoder with the blank anywhere, in the op's output layout."""
    steps, classes = data.shape[0], data.shape[-1]
    order = [c for c in range(classes) if c != blank] + [blank]
    moved = tf.gather(data, order, axis=2)  # TensorFlow's decoder wants the blank last
    decoded, log_probs = tf.nn.ctc_beam_search_decoder(
        moved, data_length, beam_width=beam_width, top_paths=top_paths)
    batch = tf.shape(data)[1]
    paths, lengths = [], []
    for sparse in decoded:
        dense = tf.sparse.to_dense(sparse, default_value=classes - 1)
        dense = tf.pad(dense, [[0, 0], [0, steps - tf.shape(dense)[1]]],
                       constant_values=classes - 1)
        paths.append(tf.gather(tf.constant(order, tf.int64), dense))
        lengths.append(tf.math.bincount(tf.cast(sparse.indices[:, 0], tf.int32),
                                        minlength=batch, maxlength=batch))
    return (-log_probs, tf.stack(lengths, 1), tf.cast(tf.stack(paths, 1), tf.int32))


def _out_dtype(dtype, out_dtype):
    if out_dtype is None:
        return dtype
    out_dtype = tf.as_dtype(out_dtype)
    if dtype == tf.float32 and out_dtype == tf.float16:
        raise AddonsArgumentError(
            "out_dtype cannot be float16 when dtype of logits is float32.")
    return out_dtype


for _name in ("ctc_loss_v2", "ctc_loss_with_log_probs"):
    compat.declare(f"ipu.nn_ops.{_name}", compat.SUPPORTED,
                   "One IPU CTC op computing the loss and its gradient (PopLibs' ctc_loss)",
                   since="2.2")
for _name in ("ctc_beam_search_decoder", "ctc_beam_search_decoder_with_log_probs"):
    compat.declare(f"ipu.nn_ops.{_name}", compat.SUPPORTED,
                   "One IPU CTC beam search op with TensorFlow's decoder's numbers",
                   since="2.2")
