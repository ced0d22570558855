"""Online (one-pass) SGD at finite d: one fresh sample per step, several seeds advanced together as one tensor.

The update of docs/dynamics.md (the issue's normalisation): on a fresh sample (x, y),

    W <- W - eta ( grad_W l(W) + (lambda / d) W ),   l = ||y - yhat||_F^2 / (2d),

with W = Q (d x r, tied) or W = [Q | K] (d x 2r, untied, each factor decayed).  Time t = samples seen / d.

Randomness, per seed (a seed's numbers never depend on which other seeds run beside it):
- teacher Q*, random start and the held-out test tokens come from the streams of
  :func:`attnphase.experiments.simulation.sampling.generators` (the same teacher and the same random start as
  ``simulate(..., seed=seed, init="random")``);
- the online samples come from a numpy PCG64 stream of its own (child 4 of the seed's SeedSequence; children
  0-3 are the streams above), drawn in float64 on the CPU.  numpy fills arrays sequentially, so the block size
  used to draw them does not change the numbers.

The gradient is written by hand through the L x L Gram matrices of one sample's tokens (the same rewriting as
:class:`attnphase.experiments.simulation.model.EmpiricalRisk`): per step only h = (x + p) W / sqrt(d) and the
rank-L update touch d-dimensional data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from attnphase.experiments.simulation.sampling import generators, positional_encodings, teacher_attention
from attnphase.setting import Setting

# Child of the seed's SeedSequence that feeds the online samples (0-3: teacher, train, test, init).
ONLINE_STREAM = 4


def online_rng(seed: int) -> np.random.Generator:
    """The generator of a seed's online samples (see the module docstring)."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(int(seed)).spawn(ONLINE_STREAM + 1)[-1]))


@dataclass
class SeedProblem:
    """What one seed draws before training: the teacher, the random start and the held-out test set."""

    seed: int
    Q_star: torch.Tensor  # (d, r*)
    W0: torch.Tensor  # (d, cols)
    test_x: torch.Tensor  # (n_test, L, d)
    test_T: torch.Tensor  # (n_test, L, L)


def draw_seed(setting: Setting, d: int, seed: int, init_scale: float, n_test: int, cols: int,
              tilt: tuple[float, float] = (0.0, 0.0)) -> SeedProblem:
    """Teacher, start and test set of one seed, float64 on the CPU.  The start: iid N(0, init_scale^2) entries, plus
    in its first column tilt[0] sqrt(d) e_1 (e_1 the first unit vector of the positional span: m_1 grows by
    tilt[0] (p_1 . e_1); study: every entry + tilt[0]) and tilt[1] Q*[:, 0] (theta_11 grows by ~ sigma^2 tilt[1])."""
    from attnphase.experiments.simulation.sampling import position_basis

    g = generators(int(seed))
    Q_star = torch.randn((d, setting.r_star), generator=g["teacher"], dtype=torch.float64)
    W0 = init_scale * torch.randn((d, cols), generator=g["init"], dtype=torch.float64)
    if tilt[0]:
        W0[:, 0] += tilt[0] * math.sqrt(d) * position_basis(d, 1)[0]
    if tilt[1]:
        W0[:, 0] += tilt[1] * Q_star[:, 0]
    x = setting.sigma * torch.randn((n_test, setting.L, d), generator=g["test"], dtype=torch.float64)
    return SeedProblem(int(seed), Q_star, W0, x, teacher_attention(setting, x, Q_star))


class OnlineSGD:
    """Seeds advanced together: W (S, d, cols), teachers (S, d, r*), each seed with its own sample stream.

    ``W`` (S, d, cols) is the current weights.  ``advance(steps)`` takes that many SGD steps on fresh samples
    and returns the mean per-sample loss before each step (the online training error); ``overlaps()`` and
    ``test_error()`` measure the current weights.
    """

    def __init__(self, setting: Setting, d: int, seeds: list[SeedProblem], lr: float, untied: bool = False,
                 device: torch.device | str = "cpu", block: int = 64) -> None:
        self.setting, self.d, self.lr, self.untied = setting, int(d), float(lr), bool(untied)
        self.device = torch.device(device)
        self.seeds = [s.seed for s in seeds]
        self.rngs = [online_rng(s) for s in self.seeds]
        dev = self.device
        # stored transposed, (S, cols, d): both per-step products then run along contiguous d (measured 3-6x
        # faster than (S, d, cols) for torch's small batched products on the CPU)
        self.Wt = torch.stack([s.W0.T for s in seeds]).to(dev).contiguous()
        self.Q_star = torch.stack([s.Q_star for s in seeds]).to(dev)
        self.p = positional_encodings(self.d, setting.L, torch.float64, dev, gram=setting.gram)
        self.block = max(1, int(block))
        self.decay = 1.0 - self.lr * setting.lam / self.d
        self.test_z = torch.stack([s.test_x for s in seeds]).to(dev) + self.p
        self.test_T = torch.stack([s.test_T for s in seeds]).to(dev)
        tx = self.test_z - self.p
        # Gram matrices of the test tokens: the test error needs the data only through h = z W / sqrt(d)
        self.test_Gx = tx @ tx.transpose(-1, -2)
        self.test_Cxp = tx @ self.p.T
        self.Gp = self.p @ self.p.T

    @property
    def W(self) -> torch.Tensor:
        return self.Wt.transpose(-1, -2)

    @property
    def n_seeds(self) -> int:
        return len(self.seeds)

    def _draw(self, k: int) -> torch.Tensor:
        # drawn in place into one array (an np.stack of per-seed draws was a sixth of a step's time at d = 4000)
        x = np.empty((self.n_seeds, k, self.setting.L, self.d))
        for i, rng in enumerate(self.rngs):
            rng.standard_normal(out=x[i])
        x *= self.setting.sigma
        return torch.from_numpy(x).to(self.device)  # (S, k, L, d)

    def _scores(self, hg: torch.Tensor) -> torch.Tensor:
        if not self.untied:
            return hg @ hg.transpose(-1, -2)
        r = hg.shape[-1] // 2
        return hg[..., :r] @ hg[..., r:].transpose(-1, -2)

    def advance(self, steps: int) -> np.ndarray:
        """`steps` SGD steps per seed; returns the mean per-sample loss over them, shape (S,)."""
        sd, d, lr = math.sqrt(self.d), self.d, self.lr
        total = torch.zeros(self.n_seeds, dtype=torch.float64, device=self.device)
        done = 0
        while done < steps:
            k = min(self.block, steps - done)
            x = self._draw(k)
            z = x + self.p
            # everything that does not depend on W, for the whole block at once
            T = teacher_attention(self.setting, x, self.Q_star[:, None])  # (S, k, L, L)
            Gx = x @ x.transpose(-1, -2)
            Cxp = x @ self.p.T
            xz = Gx + Cxp  # x_j . z_k
            pz = Cxp.transpose(-1, -2) + self.Gp  # p_j . z_k
            Sbuf = torch.empty_like(T)
            Wt = self.Wt
            a = -lr / sd
            for i in range(k):
                zi = z[:, i]  # (S, L, d)
                hg = zi @ Wt.transpose(-1, -2) / sd  # (S, L, cols)
                S = torch.softmax(self._scores(hg), dim=-1)
                Sbuf[:, i] = S
                D = T[:, i] - S
                dS = (S @ pz[:, i] - D @ xz[:, i]) / d  # dl/dS
                dsc = S * (dS - (S * dS).sum(dim=-1, keepdim=True))  # softmax backward
                if self.untied:
                    r = hg.shape[-1] // 2
                    dhg = torch.cat([dsc @ hg[..., r:], dsc.transpose(-1, -2) @ hg[..., :r]], dim=-1)
                else:
                    dhg = (dsc + dsc.transpose(-1, -2)) @ hg
                Wt = torch.baddbmm(Wt, dhg.transpose(-1, -2), zi, beta=self.decay, alpha=a)
            self.Wt = Wt
            D = T - Sbuf
            loss = ((D @ Gx) * D).sum(dim=(-1, -2)) - 2.0 * ((D @ Cxp) * Sbuf).sum(dim=(-1, -2)) \
                + ((Sbuf @ self.Gp) * Sbuf).sum(dim=(-1, -2))
            total += loss.sum(dim=1) / (2 * d)
            done += k
        return (total / max(steps, 1)).cpu().numpy()

    def test_error(self) -> np.ndarray:
        """Mean over each seed's held-out set of ||y - yhat||_F^2 / (2d), shape (S,)."""
        with torch.no_grad():
            hg = self.test_z @ self.Wt.transpose(-1, -2)[:, None] / math.sqrt(self.d)  # (S, n, L, cols)
            S = torch.softmax(self._scores(hg), dim=-1)
            D = self.test_T - S
            sq = ((D @ self.test_Gx) * D).sum(dim=(-1, -2)) - 2.0 * ((D @ self.test_Cxp) * S).sum(dim=(-1, -2)) \
                + ((S @ self.Gp) * S).sum(dim=(-1, -2))
            return (sq.mean(dim=1) / (2 * self.d)).cpu().numpy()

    def overlaps(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q = sigma^2 W^T W / d (S, c, c), m = p W / sqrt(d) (S, L, c), theta = sigma^2 W^T Q* / d (S, c, r*)."""
        s2, d = self.setting.sigma ** 2, self.d
        Wt = self.Wt
        q = s2 * Wt @ Wt.transpose(-1, -2) / d
        m = self.p @ Wt.transpose(-1, -2) / math.sqrt(d)
        th = s2 * Wt @ self.Q_star / d
        return q.cpu().numpy(), m.cpu().numpy(), th.cpu().numpy()
