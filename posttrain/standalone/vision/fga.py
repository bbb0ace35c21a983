"""FGA: "Flatness-Guided Test-Time Adaptation for Vision-Language Models" (ICLR 2026, OpenReview S90g7NE88b),
with TPT (test-time prompt tuning by entropy minimisation, Shu et al. 2022) as its baseline, on CLIP.

- ``PromptLearner``: CoOp context vectors in front of each class name, encoded through a transformers
  ``CLIPModel``'s text tower.
- SAPT (training): ``sam_gradient`` is the first-order SAM step on any parameter list: g = grad l(p),
  eps* = rho g / ||g||, g_adv = grad l(p + eps*), update with (1 - lam) g + lam g_adv (lam = 1: plain SAM); the
  parameters are restored exactly.
- STSS (test time, no backprop, nothing changes): for N augmented views (63 + the original),
  score(v) = H(v; p) + lam * max_r [H(v; p + rho' eps_r / ||eps_r||) - H(v; p)], eps_r ~ N(0, I) in context
  space, H the prediction entropy; the R perturbed class-feature sets are computed once per dataset
  (``PerturbedClasses``). The ``views_kept`` lowest-scoring views' probabilities are averaged -> the label.
- TPT: keep the 10% lowest-entropy views, minimise the entropy of their mean prediction by one AdamW step on
  the context (lr 5e-3), predict the original image, reset the context.
- Controls (``evaluate_views``): the original view alone, and all views averaged without selection; with
  rho' = 0 STSS's score is the entropy alone, so rho' = 0 vs rho' > 0 isolates what the sharpness term adds.

Tensors are created on the model's device (token ids, masks, perturbations, crops' sampling grids); random
draws come from CPU generators and are moved, so a seed gives the same draws on any device.

Defaults: rho' = 0.5 and lam = 1 (the paper's, fixed across datasets). Not given by the paper, so ours: R = 8
perturbations, 6 views kept (TPT's 10% of 64), SAPT's rho = 0.05 (SAM's usual value). Views are random resized
crops (scale 0.3-1) with horizontal flips, in torch (TPT's AugMix for ImageNet-family sets is not used).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F


class PromptLearner(torch.nn.Module):
    """CoOp context for a transformers ``CLIPModel``: texts [bos, ctx_1..ctx_n, class tokens, eos], the context
    learnable, initialised from ``init_ids``' token embeddings (a hand prompt such as "a photo of a")."""

    def __init__(self, clip: torch.nn.Module, class_ids: Sequence[Sequence[int]], init_ids: Sequence[int],
                 bos_id: int, eos_id: int, pad_id: int = 0) -> None:
        super().__init__()
        self.clip = clip
        for p in clip.parameters():
            p.requires_grad_(False)
        n_ctx = len(init_ids)
        if n_ctx < 1 or not class_ids:
            raise ValueError("PromptLearner needs a non-empty init prompt and at least one class")
        rows = [[bos_id] + list(init_ids) + list(c) + [eos_id] for c in class_ids]
        width = max(map(len, rows))
        if width > clip.text_model.config.max_position_embeddings:
            raise ValueError(f"prompts of {width} tokens exceed the text tower's max_position_embeddings")
        embed = clip.text_model.embeddings.token_embedding
        device = embed.weight.device
        ids = torch.tensor([r + [pad_id] * (width - len(r)) for r in rows], device=device)
        lengths = torch.tensor([len(r) for r in rows], device=device)
        self.register_buffer("ids", ids, persistent=False)
        self.register_buffer("eos_at", lengths - 1, persistent=False)
        self.register_buffer("mask", (torch.arange(width, device=device) < lengths.unsqueeze(-1)).long(),
                             persistent=False)
        self.ctx = torch.nn.Parameter(embed(torch.tensor(list(init_ids), device=device)).detach().clone())
        self.text_calls = 0

    def class_features(self, ctx: torch.Tensor | None = None) -> torch.Tensor:
        """Unit-norm text features (K, d) of every class under context ``ctx`` (default: the learned one)."""
        from transformers.masking_utils import create_causal_mask

        self.text_calls += 1
        text = self.clip.text_model
        ctx = self.ctx if ctx is None else ctx
        embeds = text.embeddings.token_embedding(self.ids)
        n = ctx.shape[0]
        embeds = torch.cat([embeds[:, :1], ctx.unsqueeze(0).expand(embeds.shape[0], -1, -1), embeds[:, 1 + n:]], 1)
        hidden = text.embeddings(inputs_embeds=embeds)
        mask = create_causal_mask(config=text.config, inputs_embeds=hidden, attention_mask=self.mask, cache=None)
        out = text.final_layer_norm(text.encoder(inputs_embeds=hidden, attention_mask=mask,
                                                 is_causal=True).last_hidden_state)
        pooled = out[torch.arange(out.shape[0], device=out.device), self.eos_at]
        return F.normalize(self.clip.text_projection(pooled), dim=-1)

    def image_features(self, pixels: torch.Tensor) -> torch.Tensor:
        """Unit-norm image features (B, d) of pixel values (B, 3, S, S)."""
        return F.normalize(self.clip.get_image_features(pixel_values=pixels).pooler_output, dim=-1)

    @property
    def scale(self) -> float:
        """CLIP's logit scale exp(t)."""
        return float(self.clip.logit_scale.detach().exp())

    def logits(self, image_feats: torch.Tensor, class_feats: torch.Tensor) -> torch.Tensor:
        return self.scale * image_feats @ class_feats.T


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """Prediction entropy (nats) of each row of ``logits``."""
    logp = torch.log_softmax(logits, dim=-1)
    return -(logp.exp() * logp).sum(dim=-1)


def sam_gradient(params: Sequence[torch.Tensor], loss_fn: Callable[[], torch.Tensor], rho: float,
                 lam: float = 1.0) -> tuple[list[torch.Tensor], dict[str, float]]:
    """SAPT's gradient (1 - lam) grad l(p) + lam grad l(p + eps*), eps* = rho g / ||g|| over all ``params``;
    the parameters are exactly as before on return. Also returns l(p), l(p + eps*) and ||eps*||."""
    if rho < 0 or not 0.0 <= lam <= 1.0:
        raise ValueError(f"rho must be >= 0 and lam in [0, 1], got rho={rho}, lam={lam}")
    params = list(params)
    loss = loss_fn()
    grads = torch.autograd.grad(loss, params)
    norm = torch.sqrt(sum((g.double() ** 2).sum() for g in grads))
    saved = [p.detach().clone() for p in params]
    eps = [rho * g / norm.clamp_min(1e-12).to(g.dtype) for g in grads]
    with torch.no_grad():
        for p, e in zip(params, eps, strict=True):
            p.add_(e)
    loss_adv = loss_fn()
    grads_adv = torch.autograd.grad(loss_adv, params)
    with torch.no_grad():
        for p, s in zip(params, saved, strict=True):
            p.copy_(s)
    eps_norm = float(torch.sqrt(sum((e.double() ** 2).sum() for e in eps)))
    total = [(1.0 - lam) * g + lam * ga for g, ga in zip(grads, grads_adv, strict=True)]
    return total, {"loss": loss.item(), "loss_adv": loss_adv.item(), "eps_norm": eps_norm}


def train_prompt(learner: PromptLearner, pixels: torch.Tensor, labels: torch.Tensor, *, steps: int,
                 lr: float = 2e-3, rho: float = 0.0, lam: float = 1.0, batch_size: int = 32,
                 generator: torch.Generator | None = None) -> list[float]:
    """CoOp (``rho`` 0) or SAPT (``rho`` > 0) on labelled images: cross-entropy, AdamW on the context only
    (the CLIP weights stay frozen); returns the loss of each step."""
    opt = torch.optim.AdamW([learner.ctx], lr=lr, weight_decay=0.0)
    with torch.no_grad():
        feats = learner.image_features(pixels)
    history = []
    for _ in range(steps):
        idx = torch.randint(0, feats.shape[0], (min(batch_size, feats.shape[0]),), generator=generator)
        idx = idx.to(feats.device)

        def loss_fn(idx: torch.Tensor = idx) -> torch.Tensor:
            return F.cross_entropy(learner.logits(feats[idx], learner.class_features()), labels[idx])

        if rho > 0:
            (grad,), info = sam_gradient([learner.ctx], loss_fn, rho, lam)
            learner.ctx.grad = grad
            history.append(info["loss"])
        else:
            loss = loss_fn()
            learner.ctx.grad = torch.autograd.grad(loss, [learner.ctx])[0]
            history.append(loss.item())
        opt.step()
        opt.zero_grad(set_to_none=True)
    return history


def augment_views(image: torch.Tensor, n_views: int, generator: torch.Generator,
                  scale: tuple[float, float] = (0.3, 1.0)) -> torch.Tensor:
    """The original image plus ``n_views - 1`` random resized crops (area share in ``scale``, aspect 3/4-4/3),
    each flipped horizontally with probability 1/2: (n_views, 3, H, W) on ``image``'s device. The crops are
    drawn on ``generator`` (CPU), so the views do not depend on the image's device."""
    if n_views < 1:
        raise ValueError(f"n_views must be >= 1, got {n_views}")
    m = n_views - 1
    area = torch.empty(m).uniform_(*scale, generator=generator)
    aspect = torch.exp(torch.empty(m).uniform_(torch.log(torch.tensor(3 / 4)).item(),
                                               torch.log(torch.tensor(4 / 3)).item(), generator=generator))
    sx, sy = (area * aspect).sqrt().clamp(max=1.0), (area / aspect).sqrt().clamp(max=1.0)
    cx = (torch.rand(m, generator=generator) * 2 - 1) * (1 - sx)
    cy = (torch.rand(m, generator=generator) * 2 - 1) * (1 - sy)
    flip = torch.where(torch.rand(m, generator=generator) < 0.5, -1.0, 1.0)
    theta = torch.zeros(m, 2, 3)
    theta[:, 0, 0], theta[:, 0, 2], theta[:, 1, 1], theta[:, 1, 2] = sx * flip, cx, sy, cy
    grid = F.affine_grid(theta, [m, *image.shape], align_corners=False).to(image.device, image.dtype)
    crops = F.grid_sample(image.unsqueeze(0).expand(m, -1, -1, -1), grid, align_corners=False)
    return torch.cat([image.unsqueeze(0), crops])


@dataclass
class FGAConfig:
    """FGA's test-time options (STSS) and TPT's."""

    rho_prime: float = 0.5
    """Radius of the prompt perturbations of STSS (the paper's)."""
    lam: float = 1.0
    """Weight of the sharpness term of the score (the paper's)."""
    perturbations: int = 8
    """R, perturbed prompts per dataset (ours; not given by the paper)."""
    n_views: int = 64
    """Views per test image: 63 augmentations + the original (TPT's protocol)."""
    views_kept: int = 6
    """Lowest-score views whose predictions are averaged (ours: TPT's 10% of 64)."""
    tpt_lr: float = 5e-3
    """TPT's AdamW learning rate (TPT's)."""
    tpt_steps: int = 1
    """TPT's steps per test image (TPT's)."""

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first bad field."""
        if self.rho_prime < 0 or self.lam < 0:
            raise ValueError(f"rho_prime and lam must be >= 0, got {self.rho_prime}, {self.lam}")
        for name in ("perturbations", "n_views", "views_kept", "tpt_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.views_kept > self.n_views:
            raise ValueError(f"views_kept ({self.views_kept}) must be <= n_views ({self.n_views})")


@dataclass
class PerturbedClasses:
    """Class features (K, d) under the learned context (``base``) and under R perturbed ones (``perturbed``,
    (R, K, d)), computed once per dataset and reused for every test image (``perturbed_classes``)."""

    base: torch.Tensor
    perturbed: torch.Tensor


@torch.no_grad()
def perturbed_classes(learner: PromptLearner, config: FGAConfig, generator: torch.Generator) -> PerturbedClasses:
    """The class features at the context p and at p + rho' eps_r / ||eps_r||, eps_r ~ N(0, I), r = 1..R; eps_r
    is drawn on ``generator``'s device (a CPU generator gives the same draws for a model on any device)."""
    config.validate()
    perturbed = []
    for _ in range(config.perturbations):
        eps = torch.randn(learner.ctx.shape, generator=generator, device=generator.device,
                          dtype=torch.float32).to(learner.ctx.device, learner.ctx.dtype)
        perturbed.append(learner.class_features(learner.ctx + config.rho_prime * eps / eps.norm()))
    return PerturbedClasses(learner.class_features(), torch.stack(perturbed))


def stss_scores(view_feats: torch.Tensor, classes: PerturbedClasses, scale: float, lam: float) -> torch.Tensor:
    """score(v) = H(v) + lam * max_r [H_r(v) - H(v)] for unit view features (V, d), logits ``scale`` * cosine."""
    h0 = entropy(scale * view_feats @ classes.base.T)
    hr = torch.stack([entropy(scale * view_feats @ f.T) for f in classes.perturbed])
    return h0 + lam * (hr - h0).max(dim=0).values


@torch.no_grad()
def stss_predict(view_feats: torch.Tensor, classes: PerturbedClasses, scale: float,
                 config: FGAConfig) -> torch.Tensor:
    """FGA's prediction for one image's views (V, d): the mean probabilities (K,) of the lowest-score views."""
    keep = stss_scores(view_feats, classes, scale, config.lam).argsort()[:config.views_kept]
    return torch.softmax(scale * view_feats[keep] @ classes.base.T, dim=-1).mean(dim=0)


def tpt_predict(learner: PromptLearner, view_feats: torch.Tensor, config: FGAConfig) -> torch.Tensor:
    """TPT: tune the context on the lowest-entropy views' mean-prediction entropy, predict view 0 (the original
    image), then put the context back (episodic). Returns the probabilities (K,)."""
    saved = learner.ctx.detach().clone()
    opt = torch.optim.AdamW([learner.ctx], lr=config.tpt_lr, weight_decay=0.0)
    for _ in range(config.tpt_steps):
        logits = learner.logits(view_feats, learner.class_features())
        keep = entropy(logits.detach()).argsort()[:config.views_kept]
        mean = torch.softmax(logits[keep], dim=-1).mean(dim=0)
        loss = -(mean * mean.clamp_min(1e-12).log()).sum()
        learner.ctx.grad = torch.autograd.grad(loss, [learner.ctx])[0]
        opt.step()
    with torch.no_grad():
        probs = torch.softmax(learner.logits(view_feats[:1], learner.class_features()), dim=-1)[0]
        learner.ctx.copy_(saved)
    return probs


METHODS = ("zero-shot", "all-views", "tpt", "stss")
"""How one image's views become a prediction: the original view alone; the mean probabilities of all views (the
control for view selection); TPT; STSS (FGA's selection, given ``PerturbedClasses``)."""


@torch.no_grad()
def view_features(learner: PromptLearner, images: torch.Tensor, n_views: int,
                  norm: Callable[[torch.Tensor], torch.Tensor], generator: torch.Generator) -> torch.Tensor:
    """Unit image features (N, n_views, d) of each image's views (view 0: the original), ``norm`` mapping
    [0, 1] pixels to the model's input (device and dtype included). The image tower is frozen, so the same
    features serve every context and every method."""
    return torch.stack([learner.image_features(norm(augment_views(img, n_views, generator))) for img in images])


def evaluate_views(learner: PromptLearner, feats: torch.Tensor, labels: torch.Tensor, config: FGAConfig,
                   method: str, classes: PerturbedClasses | None = None) -> float:
    """Top-1 accuracy of ``method`` (one of ``METHODS``) over images' view features (N, V, d)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method == "stss" and classes is None:
        raise ValueError("method 'stss' needs the perturbed class features (classes)")
    with torch.no_grad():
        base = learner.class_features().detach()
    correct = 0
    for views, label in zip(feats, labels.tolist(), strict=True):
        if method == "tpt":
            probs = tpt_predict(learner, views, config)
        elif method == "stss":
            probs = stss_predict(views, classes, learner.scale, config)
        else:
            with torch.no_grad():
                probs = torch.softmax(learner.logits(views[:1] if method == "zero-shot" else views, base), -1)
            probs = probs.mean(dim=0)
        correct += int(probs.argmax().item() == label)
    return correct / len(labels)
