"""AdamW on fp32 master weights for a model trained in bf16 at ZeRO stage 0 (``--precision bf16 --zero_stage 0``).

A bf16 model needs its update computed in fp32: a bf16 weight cannot hold ``lr * update`` when it is under 2^-8 of
the weight (lr 1e-5 updates vanish), so mixed-precision training keeps an fp32 copy of every trained weight (the
master weight), steps AdamW on it and copies the result back into the model (Micikevicius et al. 2018, "Mixed
Precision Training"). DeepSpeed does this too where its ``bf16`` section is on, but at stage 0 its optimizer
(``FP16_UnfusedOptimizer``) walks the parameters one by one in Python for the casts, the norm and the clip: on
SmolLM2-135M that phase took 2.9x TRL's fp32 fused AdamW (``benchmarks/grpo_vs_trl.md``). Here the same three
steps are whole-model passes: the bf16 gradients are copied into preallocated fp32 gradient buffers, clipped
once in fp32 (``torch.nn.utils``), torch's fused AdamW steps the masters in one pass per tensor, and the masters
are copied back into the bf16 weights.

The masters are part of ``state_dict()`` (DeepSpeed saves the client optimizer's state at stage 0), so a resumed
run continues from the fp32 weights, not from their bf16 rounding. DeepSpeed reads the norm before clipping from
``_global_grad_norm`` (``get_global_grad_norm()``) and drops the model's gradients after the step.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

MASTER_WEIGHTS_KEY = "master_weights"


class MasterWeightAdamW(torch.optim.AdamW):
    """Fused AdamW over fp32 copies of ``params`` (bf16 model weights), clipping the gradients' global 2-norm at
    ``max_grad_norm`` (0: no clipping) in fp32 before each step. ``step()`` reads the model's ``.grad``s and writes
    the updated weights back into ``params``; the LR schedule acts on this optimizer's ``param_groups`` as usual."""

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, weight_decay: float,
                 max_grad_norm: float) -> None:
        self.model_params = [p for p in params if p.requires_grad]
        if not self.model_params:
            raise ValueError("MasterWeightAdamW: no trainable parameters")
        masters = [p.detach().to(torch.float32, copy=True).requires_grad_(True) for p in self.model_params]
        self._grad_buffers = [torch.zeros_like(m) for m in masters]
        self.max_grad_norm = max_grad_norm
        self._global_grad_norm: float | None = None
        super().__init__(masters, lr=lr, weight_decay=weight_decay, fused=True)

    @property
    def masters(self) -> list[torch.Tensor]:
        return [m for group in self.param_groups for m in group["params"]]

    @torch.no_grad()
    def step(self, closure: Any = None) -> None:
        if closure is not None:
            raise ValueError("MasterWeightAdamW.step takes no closure")
        masters = self.masters
        with_grad = []
        for param, master, buffer in zip(self.model_params, masters, self._grad_buffers):
            if param.grad is None:  # unused this step: AdamW skips a parameter whose gradient is None
                master.grad = None
                continue
            buffer.copy_(param.grad)
            master.grad = buffer
            with_grad.append(master)
        if not with_grad:
            raise RuntimeError("MasterWeightAdamW.step: no parameter has a gradient (step called before backward?)")
        grads = [m.grad for m in with_grad]
        norm = torch.nn.utils.get_total_norm(grads)
        if self.max_grad_norm > 0:
            torch.nn.utils.clip_grads_with_norm_(with_grad, self.max_grad_norm, norm)
        self._global_grad_norm = float(norm)
        super().step()
        for param, master in zip(self.model_params, masters):
            param.copy_(master)

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state[MASTER_WEIGHTS_KEY] = [m.detach() for m in self.masters]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state_dict = dict(state_dict)
        if MASTER_WEIGHTS_KEY not in state_dict:
            raise KeyError(f"MasterWeightAdamW.load_state_dict: the state has no {MASTER_WEIGHTS_KEY!r} (saved by "
                           "another optimizer? a bf16 ZeRO-0 run resumes only from its own checkpoints)")
        saved = state_dict.pop(MASTER_WEIGHTS_KEY)
        masters = self.masters
        if len(saved) != len(masters) or any(s.shape != m.shape for s, m in zip(saved, masters)):
            raise ValueError(f"MasterWeightAdamW.load_state_dict: {len(saved)} saved master weights do not match "
                             f"the {len(masters)} trained parameters (shapes differ)")
        super().load_state_dict(state_dict)
        with torch.no_grad():
            for param, master, value in zip(self.model_params, masters, saved):
                master.copy_(value)
                param.copy_(master)
