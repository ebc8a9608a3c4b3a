"""The 'ctc' op family against TensorFlow on the CPU: PopLibs' CTC loss against
`tf.nn.ctc_loss`, the CTC beam search against `tf.nn.ctc_beam_search_decoder`.

The loss and its gradient over blanks first and last, empty labellings, repeated
labels (a path must pass a blank between them), examples shorter than the batch's time
axis and float16 logits; the beam search over random shapes, beams, blanks and lengths;
the IR holds the one op and no loop; `ipu.nn_ops`' errors.
"""
import numpy as np
import pytest
import tensorflow as tf

from ipu_keras.ops import nn_ops
from ipu_keras._src.conformance import tolerances as T
from ipu_keras.errors import AddonsArgumentError
from ipu_keras._src.tracer import trace
from tests.ops.harness import case, check_case, f32, grad

STEPS, BATCH, CLASSES = 12, 3, 5
LABELS = np.array([[1, 2, 2, 3], [4, 1, 0, 0], [3, 3, 3, 1]], np.int32)
LABEL_LENGTH = np.array([4, 2, 0], np.int32)
DATA_LENGTH = np.array([12, 9, 10], np.int32)


def _loss(blank_index, log_probs=False):
    fn = nn_ops.ctc_loss_with_log_probs if log_probs else nn_ops.ctc_loss_v2

    def loss(logits, labels, label_length, data_length):
        return fn(labels, logits, label_length, data_length, blank_index)

    return loss


def _labels(blank_index):
    blank = blank_index % CLASSES
    return np.where(LABELS == blank, (blank + 1) % CLASSES, LABELS).astype(np.int32)


def _case(fn, blank_index, label, data=None, tolerance=T.FLOAT32):
    data = f32(STEPS, BATCH, CLASSES) if data is None else data
    return case("PopnnCTCLossWithLogits", fn, data, _labels(blank_index), LABEL_LENGTH,
                DATA_LENGTH, tolerance=tolerance, label=label)


CASES = [
    _case(_loss(0), 0, "blank-0"),
    _case(_loss(-1), -1, "blank-last"),
    _case(_loss(2, log_probs=True), 2, "log-probs"),
    _case(grad(_loss(0), 0), 0, "gradient"),
    _case(grad(_loss(-1), 0), -1, "gradient-blank-last"),
    _case(grad(_loss(3, log_probs=True), 0), 3, "gradient-log-probs"),
]


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_matches_tensorflow(c):
    check_case(c)


def test_float16_logits_match_the_float32_loss():
    """TensorFlow's float16 CTC rounds every step of its loop; the op rounds once, so
    compare both with the float32 loss of the same (float16-representable) logits."""
    data = f32(STEPS, BATCH, CLASSES).astype(np.float16)
    got = nn_ops.ctc_loss_v2(_labels(0), data, LABEL_LENGTH, DATA_LENGTH, 0, tf.float32)
    from ipu_keras import ipu_compiler

    on_ipu = ipu_compiler.compile(
        lambda d: nn_ops.ctc_loss_v2(_labels(0), d, LABEL_LENGTH, DATA_LENGTH, 0,
                                     tf.float32), [data])[0]
    want = tf.nn.ctc_loss(_labels(0), data.astype(np.float32), LABEL_LENGTH, DATA_LENGTH,
                          logits_time_major=True, blank_index=0)
    T.FLOAT16_CTC_LOSS.assert_close(np.asarray(on_ipu), want.numpy())
    assert np.asarray(got).dtype == np.float32


def test_the_ir_holds_one_op_and_no_loop():
    def step(logits):
        with tf.GradientTape() as tape:
            tape.watch(logits)
            loss = tf.reduce_sum(nn_ops.ctc_loss_v2(_labels(0), logits, LABEL_LENGTH,
                                                    DATA_LENGTH, 0))
        return tape.gradient(loss, logits)

    ops = [eqn.op for eqn in trace(step, [f32(STEPS, BATCH, CLASSES)]).graph.walk()]
    assert ops.count("ctc_loss") == 1
    assert "while" not in ops


def test_a_float16_loss_of_float32_logits_is_refused():
    with pytest.raises(AddonsArgumentError, match="out_dtype cannot be float16"):
        nn_ops.ctc_loss_v2(LABELS, f32(STEPS, BATCH, CLASSES), LABEL_LENGTH, DATA_LENGTH, 0,
                           out_dtype=tf.float16)


def _beam(blank_index, beam_width, top_paths, logits=True):
    fn = (nn_ops.ctc_beam_search_decoder if logits
          else nn_ops.ctc_beam_search_decoder_with_log_probs)
    return lambda data, length: fn(data, length, beam_width, top_paths, blank_index)


def _beam_cases():
    rng = np.random.default_rng(7)
    cases = []
    for i in range(12):
        steps, batch, classes = rng.integers(2, 16), rng.integers(1, 4), rng.integers(3, 8)
        width = int(rng.integers(2, 12))
        paths = int(rng.integers(1, 3))  # a beam of >= 2 steps over >= 2 labels has 3 leaves
        blank = int(rng.integers(-1, classes))
        data = (rng.standard_normal((steps, batch, classes)) * 2).astype(np.float32)
        length = np.full(batch, steps, np.int32)   # all full: enough leaves for any paths
        length[0] = rng.integers(max(2, steps // 2), steps + 1)
        cases.append(case("PopnnCTCBeamSearchWithLogProbs",
                          _beam(blank, width, paths, logits=bool(i % 2)), data, length,
                          label=f"{steps}x{batch}x{classes}-beam{width}-top{paths}-blank{blank}"))
    return cases


@pytest.mark.parametrize("c", _beam_cases(), ids=lambda c: c.id)
def test_beam_search_matches_tensorflow(c):
    check_case(c)


def test_the_beam_search_is_one_op():
    fn = _beam(0, 5, 2)
    ops = [eqn.op for eqn in trace(fn, [f32(STEPS, BATCH, CLASSES), DATA_LENGTH]).graph.walk()]
    assert ops.count("ctc_beam_search") == 1


def test_more_paths_than_the_beam_is_refused():
    with pytest.raises(AddonsArgumentError, match="top_paths <= beam_width"):
        nn_ops.ctc_beam_search_decoder(f32(STEPS, BATCH, CLASSES), DATA_LENGTH, 2, 3)


@pytest.mark.slow
def test_the_beam_search_kernel_equals_tensorflow_on_random_problems():
    """The kernel alone (no compile) on 200 random shapes, beams, blanks and lengths."""
    from ipu_keras._src.ops.ctc import _beam_kernel

    rng = np.random.default_rng(11)
    compared = 0
    for _ in range(200):
        steps, batch, classes = rng.integers(2, 20), rng.integers(1, 4), rng.integers(3, 10)
        width = int(rng.integers(2, 20))
        paths = int(rng.integers(1, 3))
        blank = int(rng.integers(0, classes))
        data = (rng.standard_normal((steps, batch, classes)) * 3).astype(np.float32)
        length = rng.integers(2, steps + 1, batch).astype(np.int32)
        want = [np.asarray(t) for t in nn_ops._tf_beam_search(tf.constant(data), length, blank,
                                                               width, paths)]
        got = _beam_kernel(data, length, blank_index=blank, beam_width=width,
                           top_paths=paths)
        T.FLOAT32.assert_close(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_array_equal(got[2], want[2])
        compared += 1
    assert compared == 200
