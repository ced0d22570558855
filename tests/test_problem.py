"""attnphase.problem, the model written once: against formulas written out independently here, numpy against torch,
and the closed two-token forms (theory/model/loss.py) against the one definition.

The compiled copies in theory/prox are held to these elsewhere: the fused two-token kernel's teacher against the
pointwise path, which reads problem.teacher_attention (tests/test_channel_l2r1.py, bitwise), and the general
kernel's loss against prox.general.objective, which reads problem.loss (tests/test_prox_general.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnphase import Setting
from attnphase.problem import (
    Problem,
    fields,
    loss,
    loss_and_grad,
    regulariser,
    softmax_from_teacher,
    student_attention,
    teacher_attention,
    teacher_softmax,
)
from attnphase.theory.model.loss import attention_loss as two_token_loss
from attnphase.theory.model.loss import target_diagonal


def _softmax_by_hand(h: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Row-wise softmax of h_l . g_k, one sample at a time, with math.exp (no shortcut, no vectorisation)."""
    n, L, _ = h.shape
    out = np.empty((n, L, L))
    for i in range(n):
        for l in range(L):
            s = [float(h[i, l] @ g[i, k]) for k in range(L)]
            mx = max(s)
            e = [math.exp(v - mx) for v in s]
            out[i, l] = [v / sum(e) for v in e]
    return out


# (rows up to 7 tokens are reduced token by token, longer ones by numpy's reductions; rank 2 scores by hand)
@pytest.mark.parametrize("L,r,size", [(2, 1, 1.5), (2, 2, 1.5), (3, 1, 1.5), (4, 2, 1.5), (3, 2, 30.0), (7, 3, 1.5),
                                      (9, 2, 1.5), (9, 2, 30.0)])
def test_teacher_and_student_attention_against_the_formula(L, r, size):
    rng = np.random.default_rng(L * 10 + r)
    h, g = rng.normal(size=(2, 40, L, r)) * size  # (size 30: scores up to ~1e4, exp overflows without the shift)
    A = rng.uniform(size=(L, L))
    A /= A.sum(axis=1, keepdims=True)
    omega = 0.37
    np.testing.assert_allclose(student_attention(h), _softmax_by_hand(h, h), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(student_attention(h, g), _softmax_by_hand(h, g), rtol=1e-13, atol=1e-15)
    T = teacher_attention(h, omega, A)
    np.testing.assert_allclose(T, (1 - omega) * _softmax_by_hand(h, h) + omega * A, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(T.sum(axis=-1), 1.0, rtol=1e-14)
    np.testing.assert_allclose(softmax_from_teacher(T, omega, A), teacher_softmax(h), rtol=1e-12, atol=1e-14)


def test_loss_regulariser_and_gradient():
    rng = np.random.default_rng(3)
    h = rng.normal(size=(5, 3, 2))
    T = teacher_attention(rng.normal(size=(5, 3, 1)), 0.3, np.full((3, 3), 1 / 3))
    S = student_attention(h)
    by_hand = [0.25 / 2 * sum((S[i, a, b] - T[i, a, b]) ** 2 for a in range(3) for b in range(3)) for i in range(5)]
    np.testing.assert_allclose(loss(S, T, 0.25), by_hand, rtol=1e-13)
    value, grad = loss_and_grad(h, T, 0.25)
    np.testing.assert_allclose(value, by_hand, rtol=1e-13)
    eps = 1e-6
    for idx in [(0, 0, 0), (2, 1, 1), (4, 2, 0)]:
        hp, hm = h.copy(), h.copy()
        hp[idx] += eps
        hm[idx] -= eps
        fd = (loss(student_attention(hp), T, 0.25) - loss(student_attention(hm), T, 0.25))[idx[0]] / (2 * eps)
        assert grad[idx] == pytest.approx(fd, rel=1e-6, abs=1e-10)
    Q = rng.normal(size=(7, 2))
    assert regulariser(Q, 0.01) == pytest.approx(0.005 * float(np.sum(Q**2)), rel=1e-14)


def test_two_token_closed_forms_equal_the_one_definition():
    """theory/model/loss.py writes the L = 2, r = r* = 1 loss through the diagonal targets (the prox's objective)."""
    rng = np.random.default_rng(5)
    h, hs = rng.normal(size=(2, 200, 2, 1)) * 2.0
    A = np.array([[0.6, 0.4], [0.4, 0.6]])
    T = teacher_attention(hs, 0.3, A)
    t1, t2 = target_diagonal(hs[:, 0, 0], hs[:, 1, 0], 0.3, A)
    np.testing.assert_array_equal(t1, T[:, 0, 0])
    np.testing.assert_array_equal(t2, T[:, 1, 1])
    np.testing.assert_allclose(two_token_loss(h[:, 0, 0], h[:, 1, 0], t1, t2, 0.25),
                               loss(student_attention(h), T, 0.25), rtol=1e-12, atol=1e-16)


@pytest.mark.parametrize("L,rs", [(2, 1), (3, 2)])
def test_numpy_and_torch_give_the_same_model(L, rs):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    x = rng.normal(size=(30, L, 50)) * 0.5
    Q = rng.normal(size=(50, rs))
    s = Setting(L=L, r_star=rs)
    pb = Problem(s)
    T_np = pb.teacher_attention(fields(x, Q))
    T_t = pb.teacher_attention(fields(torch.as_tensor(x), torch.as_tensor(Q)))
    assert isinstance(T_t, torch.Tensor) and T_t.dtype == torch.float64
    np.testing.assert_allclose(T_t.numpy(), T_np, rtol=1e-14, atol=1e-15)
    S_np = student_attention(fields(x, Q))
    S_t = student_attention(fields(torch.as_tensor(x), torch.as_tensor(Q)))
    np.testing.assert_allclose(S_t.numpy(), S_np, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(loss(S_t, T_t, 0.25).numpy(), loss(S_np, T_np, 0.25), rtol=1e-13)
    assert float(regulariser(torch.as_tensor(Q), 0.01)) == pytest.approx(float(regulariser(Q, 0.01)), rel=1e-14)


def test_the_simulation_sampler_uses_the_one_teacher():
    pytest.importorskip("torch")
    from attnphase.experiments.simulation.sampling import sample_dataset

    s = Setting(omega=0.45, L=3)
    pb = sample_dataset(s, 20, 1.0, seed=2, n_test=5, device="cpu")
    x, Qs = pb.train.x.numpy(), pb.Q_star.numpy()
    np.testing.assert_allclose(pb.train.T.numpy(), Problem(s).teacher_attention(fields(x, Qs)), rtol=1e-14)


def test_numpy_sample_is_seeded_and_has_the_model_law():
    pb = Problem(Setting(omega=0.2))
    a, b = pb.sample(40, 300, 7, seed=1), pb.sample(40, 300, 9, seed=1)
    np.testing.assert_array_equal(a.x, b.x)  # the test-set size does not move the training set
    np.testing.assert_array_equal(a.Q_star, b.Q_star)
    assert not np.array_equal(a.x, pb.sample(40, 300, 7, seed=2).x)
    assert a.x.shape == (300, 2, 40) and a.T.shape == (300, 2, 2) and a.x_test.shape == (7, 2, 40)
    assert np.std(a.x) == pytest.approx(0.5, rel=0.02)
    np.testing.assert_allclose(a.y, a.T @ a.x)
    np.testing.assert_allclose(a.T, pb.teacher_attention(fields(a.x, a.Q_star)))
