"""A small independent finite-d simulation (float64 torch, full-batch gradient descent on the empirical risk) for
any L, r, r* and Gram matrix: the direct check of the general fixed-point equations.  Written from the model's
definition only (tokens, teacher, student, risk), sharing no code with attnphase.theory or attnphase.experiments.simulation.

    python benchmarks/minisim.py --L 3 --alpha 1.5 --d 500 --seeds 0,1,2 [--r 1] [--r-star 1] [--positions simplex]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import torch


def simulate(G: np.ndarray, A: np.ndarray, omega: float, sigma: float, lam: float, r: int, r_star: int, d: int,
             alpha: float, init: str, seed: int, steps: int = 4000, lr: float = 0.15, n_test: int = 20000) -> dict:
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    L = G.shape[0]
    n = int(round(alpha * d))
    # Positional codes with Gram matrix G: an orthonormal L-frame in R^d times G^{1/2}.
    frame, _ = np.linalg.qr(rng.normal(size=(d, L)))
    vals, vecs = np.linalg.eigh(G)
    Ghalf = (vecs * np.sqrt(np.clip(vals, 0, None))) @ vecs.T
    p = torch.tensor(frame @ Ghalf, dtype=torch.float64).T  # (L, d), p_l . p_k = G_lk
    Qs = torch.tensor(rng.normal(size=(d, r_star)), dtype=torch.float64)
    At = torch.tensor(A, dtype=torch.float64)

    def draw(m: int):
        x = sigma * torch.tensor(rng.normal(size=(m, L, d)), dtype=torch.float64)
        hs = x @ Qs / math.sqrt(d)
        T = (1 - omega) * torch.softmax(hs @ hs.transpose(1, 2), dim=-1) + omega * At
        return x, T

    x, T = draw(n)
    z = x + p
    Gx = x @ x.transpose(1, 2)
    Cxp = x @ p.T
    Gp = p @ p.T

    def risk_terms(Q, x, T, z, Gx, Cxp):
        h = z @ Q / math.sqrt(d)
        S = torch.softmax(h @ h.transpose(1, 2), dim=-1)
        D = T - S
        # ||D x - S p||_F^2 through L x L Gram matrices (exact).
        quad = ((D @ Gx) * D).sum((1, 2)) - 2 * ((D @ Cxp) * S).sum((1, 2)) + ((S @ Gp) * S).sum((1, 2))
        return quad / (2 * d)

    if init == "semantic":
        Q0 = Qs[:, :1].repeat(1, r) if r > 1 else Qs[:, :1].clone()
        if r > 1:
            Q0[:, 1:] = 0.1 * torch.tensor(rng.normal(size=(d, r - 1)), dtype=torch.float64)
        if r_star > 1 and r >= r_star:
            Q0[:, :r_star] = Qs
    else:
        u = p[0] / p[0].norm()  # along the first positional code
        Q0 = torch.zeros(d, r, dtype=torch.float64)
        Q0[:, 0] = u * math.sqrt(d)
    Q = Q0.clone().requires_grad_(True)
    opt = torch.optim.SGD([Q], lr=lr)
    hist = []
    for step in range(steps):
        opt.zero_grad()
        R = risk_terms(Q, x, T, z, Gx, Cxp).sum() + 0.5 * lam * (Q**2).sum()
        R.backward()
        opt.step()
        if step >= steps - 100:
            hist.append(R.item() / d)
    with torch.no_grad():
        xt, Tt = draw(n_test)
        te = float(risk_terms(Q, xt, Tt, xt + p, xt @ xt.transpose(1, 2), xt @ p.T).mean())
        Qn = Q.detach()
        q = (sigma**2 * Qn.T @ Qn / d).numpy()
        theta = (sigma**2 * Qn.T @ Qs / d).numpy()
        m = (p @ Qn / math.sqrt(d)).numpy()
    return {"train_loss": float(np.mean(hist)), "test_error": te, "q": q, "theta": theta, "m": m,
            "grad_norm": float(Q.grad.norm())}


def main() -> None:
    torch.set_num_threads(1)
    from attnphase import Setting
    from attnphase.theory import solve
    from attnphase.theory.model.overlaps import Overlaps
    from attnphase.theory.state_evolution.results import summaries

    ap = argparse.ArgumentParser()
    ap.add_argument("--L", type=int, default=3)
    ap.add_argument("--r", type=int, default=1)
    ap.add_argument("--r-star", type=int, default=1)
    ap.add_argument("--positions", default=None)
    ap.add_argument("--omega", type=float, default=0.3)
    ap.add_argument("--alpha", type=float, default=1.5)
    ap.add_argument("--d", type=int, default=500)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--precision", default="fast")
    args = ap.parse_args()
    s = Setting(L=args.L, r=args.r, r_star=args.r_star, positions=args.positions, omega=args.omega)
    for init in ("semantic", "positional"):
        fp = solve(s, args.alpha, init, args.precision)
        runs = [simulate(s.gram, s.A_array, s.omega, s.sigma, s.lam, s.r, s.r_star, args.d, args.alpha, init, seed,
                         steps=args.steps) for seed in map(int, args.seeds.split(","))]
        print(f"\n{init}: theory status {fp.status} {fp.warnings}")
        sums = [summaries(Overlaps(q=r_["q"], m=r_["m"], V=np.eye(s.r), theta=r_["theta"])) for r_ in runs]
        for key in ("train_loss", "test_error"):
            v = np.array([r_[key] for r_ in runs])
            print(f"  {key:10s} theory {getattr(fp, key):.6f} +- {fp.errors.get(key, float('nan')):.1e}   "
                  f"sim {v.mean():.6f} +- {v.std(ddof=1) / np.sqrt(len(v)):.1e}")
        for key in ("q", "m", "theta"):
            v = np.array([x[key] for x in sums])
            print(f"  {key:10s} theory {fp.summary()[key]:.5f}   sim {v.mean():.5f} +- {v.std(ddof=1) / np.sqrt(len(v)):.1e}"
                  f"   (final |grad| {np.mean([r_['grad_norm'] for r_ in runs]):.1e})")


if __name__ == "__main__":
    main()
