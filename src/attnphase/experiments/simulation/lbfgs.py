"""L-BFGS with a strong-Wolfe line search on one tensor: torch.optim.LBFGS's algorithm without torch.optim.

Why not torch.optim.LBFGS itself: constructing any torch.optim optimiser imports torch._dynamo (and sympy), about
2 s of CPU in a fresh process -- as much as the whole L-BFGS descent at d = 1000 and the largest single cost of
`attnphase simulate --optimizer lbfgs` after importing torch.  This is a line-by-line port of
``torch.optim.LBFGS.step`` (PyTorch, BSD-3-Clause licence) for a single parameter tensor, performing the same
floating-point operations in the same order, so that the iterates are bit-for-bit those of torch.optim.LBFGS
(tests compare them).  The line search itself is torch's own module-level ``_strong_wolfe`` (importing
torch.optim.lbfgs does not import torch._dynamo; only constructing an Optimizer does).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.optim.lbfgs import _strong_wolfe

from attnphase.errors import InputError


class FlatLBFGS:
    """torch.optim.LBFGS(params=[x], ...) for one tensor x whose gradient the closure stores in x.grad."""

    def __init__(self, x: torch.Tensor, lr: float = 1.0, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = "strong_wolfe") -> None:
        if line_search_fn not in (None, "strong_wolfe"):
            raise InputError("only 'strong_wolfe' is supported")
        self.x = x
        self.lr = float(lr)
        self.max_iter = max_iter
        self.max_eval = max_eval if max_eval is not None else max_iter * 5 // 4
        self.tolerance_grad = tolerance_grad
        self.tolerance_change = tolerance_change
        self.history_size = history_size
        self.line_search_fn = line_search_fn
        self.state: dict[str, Any] = {"func_evals": 0, "n_iter": 0}

    def _flat_grad(self) -> torch.Tensor:
        g = self.x.grad
        return self.x.new(self.x.numel()).zero_() if g is None else g.view(-1)

    def _add_grad(self, step_size: Any, update: torch.Tensor) -> None:
        self.x.add_(update.view_as(self.x), alpha=step_size)

    def _directional_evaluate(self, closure: Callable[[], float], x: list[torch.Tensor], t: Any,
                              d: torch.Tensor) -> tuple[float, torch.Tensor]:
        self._add_grad(t, d)
        loss = float(closure())
        flat_grad = self._flat_grad()
        self.x.copy_(x[0])
        return loss, flat_grad

    @torch.no_grad()
    def step(self, closure: Callable[[], float]) -> float:
        lr, max_iter, max_eval = self.lr, self.max_iter, self.max_eval
        tolerance_grad, tolerance_change, history_size = self.tolerance_grad, self.tolerance_change, self.history_size
        state = self.state

        orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1

        flat_grad = self._flat_grad()
        opt_cond = flat_grad.abs().max() <= tolerance_grad
        if opt_cond:
            return orig_loss

        d = state.get("d")
        t = state.get("t")
        old_dirs = state.get("old_dirs")
        old_stps = state.get("old_stps")
        ro = state.get("ro")
        H_diag = state.get("H_diag")
        prev_flat_grad = state.get("prev_flat_grad")
        prev_loss = state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1

            if state["n_iter"] == 1:
                d = flat_grad.neg()
                old_dirs = []
                old_stps = []
                ro = []
                H_diag = 1
            else:
                y = flat_grad.sub(prev_flat_grad)
                s = d.mul(t)
                ys = y.dot(s)
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / y.dot(y)
                num_old = len(old_dirs)
                if "al" not in state:
                    state["al"] = [None] * history_size
                al = state["al"]
                q = flat_grad.neg()
                for i in range(num_old - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q.add_(old_dirs[i], alpha=-al[i])
                d = r = torch.mul(q, H_diag)
                for i in range(num_old):
                    be_i = old_dirs[i].dot(r) * ro[i]
                    r.add_(old_stps[i], alpha=al[i] - be_i)

            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone(memory_format=torch.contiguous_format)
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss

            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / flat_grad.abs().sum()) * lr
            else:
                t = lr

            gtd = flat_grad.dot(d)
            if gtd > -tolerance_change:
                break

            ls_func_evals = 0
            if self.line_search_fn is not None:
                x_init = [self.x.clone(memory_format=torch.contiguous_format)]

                def obj_func(x: list[torch.Tensor], t: Any, d: torch.Tensor) -> tuple[float, torch.Tensor]:
                    return self._directional_evaluate(closure, x, t, d)

                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    obj_func, x_init, t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = flat_grad.abs().max() <= tolerance_grad
            else:
                self._add_grad(t, d)
                if n_iter != max_iter:
                    loss = float(closure())
                    flat_grad = self._flat_grad()
                    opt_cond = flat_grad.abs().max() <= tolerance_grad
                    ls_func_evals = 1

            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            if n_iter == max_iter:
                break
            if current_evals >= max_eval:
                break
            if opt_cond:
                break
            if d.mul(t).abs().max() <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break

        state["d"] = d
        state["t"] = t
        state["old_dirs"] = old_dirs
        state["old_stps"] = old_stps
        state["ro"] = ro
        state["H_diag"] = H_diag
        state["prev_flat_grad"] = prev_flat_grad
        state["prev_loss"] = prev_loss
        return orig_loss
