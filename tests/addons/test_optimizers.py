"""The addons optimizers against numpy transcriptions of the reference update formulas,
over several steps, with float32 and float16 slots (not against Keras' Adam, which differs).

The transcriptions follow the original: moments computed in float32 from the slots, the new
moments stored rounded to the slot dtype, the debiased values taken from the unrounded ones.
"""
import numpy as np
import pytest
import keras
import tensorflow as tf

from ipu_keras.errors import AddonsArgumentError
from ipu_keras_addons.keras import optimizers as ipu_optimizers

STEPS = 5
SHAPES = {"dense/kernel": (4, 3), "dense/bias": (3,)}


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    weights = {k: rng.standard_normal(s).astype(np.float32) for k, s in SHAPES.items()}
    weights["dense/bias"][:] = 0  # a zero norm: the LAMB trust ratio falls back to 1
    grads = [{k: rng.standard_normal(s).astype(np.float32) for k, s in SHAPES.items()}
             for _ in range(STEPS)]
    return weights, grads


def _run(optimizer, weights, grads):
    variables = {}
    with keras.name_scope("dense"):
        for key, value in weights.items():
            variables[key] = keras.Variable(value, name=key.split("/")[1])
    for step in grads:
        optimizer.apply_gradients([(tf.constant(step[k]), v) for k, v in variables.items()])
    return {k: np.asarray(v) for k, v in variables.items()}, optimizer


def _moments(g, m, v, t, slot, b1, b2, debias):
    m32 = b1 * m.astype(np.float32) + (1 - b1) * g
    v32 = b2 * v.astype(np.float32) + (1 - b2) * g * g
    m_hat, v_hat = (m32 / (1 - b1 ** t), v32 / (1 - b2 ** t)) if debias else (m32, v32)
    return m32.astype(slot), v32.astype(slot), m_hat, v_hat


def adam_numpy(w, grads, slot, lr=0.01, b1=0.9, b2=0.999, eps=1e-7, amsgrad=False,
               debias=True):
    m = np.zeros_like(w, slot)
    v = np.zeros_like(w, slot)
    vhat = np.zeros_like(w, slot)
    for t, g in enumerate(grads, 1):
        m, v, m_hat, v_hat = _moments(g, m, v, t, slot, b1, b2, debias)
        if amsgrad:
            v_hat = np.maximum(vhat.astype(np.float32), v_hat)
            vhat = v_hat.astype(slot)
        w = w - lr * (m_hat / (np.sqrt(v_hat) + eps))
    return w


def lamb_numpy(w, grads, slot, name, lr=0.01, b1=0.9, b2=0.999, eps=1e-6, wd=0.0,
               decay_excluded=False, adapt_excluded=False, clip=None, debias=True):
    m = np.zeros_like(w, slot)
    v = np.zeros_like(w, slot)
    for t, g in enumerate(grads, 1):
        m, v, m_hat, v_hat = _moments(g, m, v, t, slot, b1, b2, debias)
        u = m_hat / (np.sqrt(v_hat) + eps)
        if not decay_excluded:
            u = u + wd * w
        ratio = 1.0
        if not adapt_excluded:
            w_norm, u_norm = np.linalg.norm(w), np.linalg.norm(u)
            w_norm = min(w_norm, clip) if clip is not None else w_norm
            ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
        w = w - lr * ratio * u
    return w


def sgd_numpy(w, grads, slot, lr=0.1, momentum=0.0, nesterov=False):
    velocity = np.zeros_like(w, slot)
    for g in grads:
        if not momentum:
            w = w - lr * g
            continue
        new = velocity.astype(np.float32) * momentum - lr * g
        w = w + (new * momentum - lr * g if nesterov else new)
        velocity = new.astype(slot)
    return w


def _check(got, want, slot):
    tol = 2e-6 if slot == np.float32 else 2e-5
    for key in SHAPES:
        np.testing.assert_allclose(got[key], want[key], rtol=tol, atol=tol, err_msg=key)


@pytest.mark.parametrize("slot", [np.float32, np.float16])
@pytest.mark.parametrize("kwargs", [{}, {"amsgrad": True}, {"debiasing": False},
                                    {"epsilon": 1e-2, "beta_1": 0.5}])
def test_adam(slot, kwargs):
    weights, grads = _problem()
    name = np.dtype(slot).name
    opt = ipu_optimizers.AdamIpuOptimizer(0.01, m_dtype=name, v_dtype=name, vhat_dtype=name,
                                          **kwargs)
    got, opt = _run(opt, weights, grads)
    assert {v.dtype for v in opt.variables[2:]} == {name}
    alias = {"beta_1": "b1", "epsilon": "eps", "debiasing": "debias"}
    np_kwargs = {alias.get(k, k): v for k, v in kwargs.items()}
    want = {k: adam_numpy(w, [g[k] for g in grads], slot, **np_kwargs)
            for k, w in weights.items()}
    _check(got, want, slot)


@pytest.mark.parametrize("slot", [np.float32, np.float16])
@pytest.mark.parametrize("kwargs, np_kwargs", [
    ({}, {}),
    ({"weight_decay_rate": 0.1}, {"wd": 0.1}),
    ({"weight_decay_rate": 0.1, "exclude_from_weight_decay": ["kernel"]},
     {"wd": 0.1, "decay_excluded": "kernel"}),
    ({"weight_decay_rate": 0.1, "exclude_from_layer_adaptation": ["dense/k"]},
     {"wd": 0.1, "adapt_excluded": "kernel"}),
    ({"weight_norm_clip": 0.5, "debiasing": False}, {"clip": 0.5, "debias": False}),
])
def test_lamb(slot, kwargs, np_kwargs):
    weights, grads = _problem(1)
    name = np.dtype(slot).name
    opt = ipu_optimizers.LAMBIpuOptimizer(0.01, m_dtype=name, v_dtype=name, **kwargs)
    got, opt = _run(opt, weights, grads)
    want = {}
    for key, w in weights.items():
        flags = {k: (v in key if k.endswith("excluded") else v) for k, v in np_kwargs.items()}
        want[key] = lamb_numpy(w, [g[key] for g in grads], slot, key, **flags)
    _check(got, want, slot)


@pytest.mark.parametrize("slot", [np.float32, np.float16])
@pytest.mark.parametrize("momentum, nesterov", [(0.0, False), (0.9, False), (0.9, True)])
def test_sgd(slot, momentum, nesterov):
    weights, grads = _problem(2)
    opt = ipu_optimizers.SGDIpuOptimizer(0.1, momentum, nesterov,
                                         momentum_accum_dtype=np.dtype(slot).name)
    got, _ = _run(opt, weights, grads)
    want = {k: sgd_numpy(w, [g[k] for g in grads], slot, 0.1, momentum, nesterov)
            for k, w in weights.items()}
    _check(got, want, slot)


def test_sgd_equals_keras_sgd():
    weights, grads = _problem(3)
    got, _ = _run(ipu_optimizers.SGDIpuOptimizer(0.1, 0.9, True), weights, grads)
    want, _ = _run(keras.optimizers.SGD(0.1, 0.9, True), weights, grads)
    _check(got, want, np.float32)


def test_lamb_wants_two_precisions():
    with pytest.raises(AddonsArgumentError, match="2 entries"):
        ipu_optimizers.LAMBIpuOptimizer(optimizer_compute_precisions=(tf.float32,))


def test_float16_compute_precision_rounds_the_update():
    weights, grads = _problem(4)
    # epsilon large enough that float16's underflow of tiny v does not dominate.
    opt = ipu_optimizers.AdamIpuOptimizer(0.01, epsilon=1e-2,
                                          optimizer_compute_precisions=(tf.float16,))
    got, _ = _run(opt, weights, grads)
    exact = {k: adam_numpy(w, [g[k] for g in grads], np.float32, eps=1e-2)
             for k, w in weights.items()}
    diff = max(np.abs(got[k] - exact[k]).max() for k in SHAPES)
    assert 1e-6 < diff < 5e-3


@pytest.mark.parametrize("cls, kwargs", [
    (ipu_optimizers.AdamIpuOptimizer, {"amsgrad": True, "m_dtype": tf.float16}),
    (ipu_optimizers.LAMBIpuOptimizer, {"exclude_from_weight_decay": ["bias"],
                                       "weight_norm_clip": 2.0}),
    (ipu_optimizers.SGDIpuOptimizer, {"momentum": 0.5, "momentum_accum_dtype": "float16"}),
])
def test_config_round_trips(cls, kwargs):
    opt = cls(**kwargs)
    config = opt.get_config()
    clone = keras.optimizers.deserialize(keras.optimizers.serialize(opt))
    assert type(clone) is cls
    assert clone.get_config() == config


@pytest.mark.parametrize("make", [
    lambda: ipu_optimizers.AdamIpuOptimizer(0.01, amsgrad=True),
    lambda: ipu_optimizers.LAMBIpuOptimizer(0.01, weight_decay_rate=0.1),
    lambda: ipu_optimizers.SGDIpuOptimizer(0.1, 0.9),
], ids=["adam", "lamb", "sgd"])
def test_a_variable_named_with_slashes_takes_slots_like_any_other(make):
    # A tf.compat.v1 variable in a variable scope is named 'dense/kernel:0'; a Keras
    # variable's name may not hold '/', so the slots' names replace it, as Keras' do.
    weights, grads = _problem(5)
    want, _ = _run(make(), weights, grads)
    variables = {k: tf.Variable(w, name=k) for k, w in weights.items()}
    assert variables["dense/kernel"].name == "dense/kernel:0"
    optimizer = make()
    for step in grads:
        optimizer.apply_gradients([(tf.constant(step[k]), v) for k, v in variables.items()])
    assert "dense_kernel_0_" in " ".join(v.name for v in optimizer.variables)
    for key, variable in variables.items():
        np.testing.assert_array_equal(variable.numpy(), want[key], err_msg=key)
