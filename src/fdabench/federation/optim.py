"""Local optimisers: Adam and SGD with torch.optim's exact update rules, as foreach tensor ops.

Why not torch.optim: constructing any torch.optim optimiser imports torch's compiler stack (about
1.7 s per process here), and every training cell is its own short process that builds a fresh optimiser
for each local training call (the published protocol). tests/federation/test_optim.py checks these
updates against torch.optim.Adam / torch.optim.SGD step by step.

Adam runs torch's fused Adam kernel (`torch._fused_adam_`, the kernel behind torch.optim.Adam(fused=True))
where it can: one pass over the parameters instead of six foreach passes, 7x faster on a 5.6M-parameter
MLP on one CPU thread (4.9 vs 34.5 ms per step); it agrees with the foreach form to float rounding.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import Tensor


class LocalOptimizer:
    def __init__(self, parameters: Sequence[Tensor], lr: float, weight_decay: float = 0.0):
        self.parameters = list(parameters)
        self.lr = lr
        self.weight_decay = weight_decay

    def zero_grad(self) -> None:
        for parameter in self.parameters:
            parameter.grad = None

    def _gradients(self) -> tuple[list[Tensor], list[Tensor]]:
        with_grad = [p for p in self.parameters if p.grad is not None]
        grads = [p.grad for p in with_grad]
        if self.weight_decay:
            grads = torch._foreach_add(grads, with_grad, alpha=self.weight_decay)
        return with_grad, grads


class Adam(LocalOptimizer):
    """torch.optim.Adam (amsgrad=False, L2 weight decay): m ← β1 m + (1−β1) g, v ← β2 v + (1−β2) g²,
    θ ← θ − lr / (1 − β1^t) · m / (√v / √(1 − β2^t) + ε)."""

    def __init__(self, parameters, lr: float, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0):
        super().__init__(parameters, lr, weight_decay)
        self.beta1, self.beta2 = betas
        self.eps = eps
        self.steps = [0] * len(self.parameters)  # per parameter, as torch.optim's state["step"]
        self.exp_avg = [torch.zeros_like(p) for p in self.parameters]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.parameters]

    @torch.no_grad()
    def step(self) -> None:
        """Parameters without a gradient are skipped (their state does not advance), as in torch.optim."""
        present = [index for index, p in enumerate(self.parameters) if p.grad is not None]
        if not present:
            return
        params, grads = self._gradients()
        exp_avg = [self.exp_avg[i] for i in present]
        exp_avg_sq = [self.exp_avg_sq[i] for i in present]
        for i in present:
            self.steps[i] += 1
        counts = {self.steps[i] for i in present}
        if len(counts) == 1 and self._fused(params, grads, exp_avg, exp_avg_sq, next(iter(counts))):
            return
        torch._foreach_lerp_(exp_avg, grads, 1 - self.beta1)
        torch._foreach_mul_(exp_avg_sq, self.beta2)
        torch._foreach_addcmul_(exp_avg_sq, grads, grads, 1 - self.beta2)
        if len(counts) == 1:  # the usual case: one bias correction for every parameter
            step_count = counts.pop()
            bias_correction1 = 1 - self.beta1**step_count
            bias_correction2_sqrt = math.sqrt(1 - self.beta2**step_count)
            denominator = torch._foreach_sqrt(exp_avg_sq)
            torch._foreach_div_(denominator, bias_correction2_sqrt)
            torch._foreach_add_(denominator, self.eps)
            torch._foreach_addcdiv_(params, exp_avg, denominator, -self.lr / bias_correction1)
            return
        for param, m, v, i in zip(params, exp_avg, exp_avg_sq, present):
            denominator = v.sqrt().div_(math.sqrt(1 - self.beta2 ** self.steps[i])).add_(self.eps)
            param.addcdiv_(m, denominator, value=-self.lr / (1 - self.beta1 ** self.steps[i]))

    def _fused(self, params, grads, exp_avg, exp_avg_sq, step_count: int) -> bool:
        """One fused kernel call for every parameter (float32/float64 on one device); False where unsupported."""
        fused = getattr(torch, "_fused_adam_", None)
        if fused is None or len({(p.device, p.dtype) for p in params}) != 1 or params[0].dtype not in (torch.float32, torch.float64):
            return False
        step = torch.tensor(float(step_count), device=params[0].device)  # read, never written, by the kernel
        steps = [step] * len(params)
        try:
            fused(params, grads, exp_avg, exp_avg_sq, [], steps, lr=self.lr, beta1=self.beta1, beta2=self.beta2,
                  weight_decay=0.0, eps=self.eps, amsgrad=False, maximize=False)  # grads already carry the L2 term
        except (RuntimeError, NotImplementedError):  # a build without the CPU kernel
            return False
        return True


class SGD(LocalOptimizer):
    """torch.optim.SGD (dampening 0, no Nesterov): b ← μ b + g (b = g at the first step), θ ← θ − lr b."""

    def __init__(self, parameters, lr: float, momentum: float = 0.0, weight_decay: float = 0.0):
        super().__init__(parameters, lr, weight_decay)
        self.momentum = momentum
        self.buffers: dict[int, Tensor] | None = None

    @torch.no_grad()
    def step(self) -> None:
        """Parameters without a gradient are skipped, as in torch.optim."""
        params, grads = self._gradients()
        if self.momentum:
            if self.buffers is None:
                self.buffers = {}
            for param, grad in zip(params, grads):
                buffer = self.buffers.get(id(param))
                if buffer is None:
                    self.buffers[id(param)] = grad.clone()
                else:
                    buffer.mul_(self.momentum).add_(grad)
            grads = [self.buffers[id(param)] for param in params]
        if params:
            torch._foreach_add_(params, grads, alpha=-self.lr)
