"""DMAP math (Kempton et al., "DMAP: A Distribution Map for Text", ICLR 2026), as small pure functions.

For a text w_1..w_T scored by a model p, with p_i = p(. | w_<i):

- a_i = sum_{v : p_i(v) > p_i(w_i)} p_i(v)  (strict: ties are *not* above), b_i = a_i + t_i with
  t_i = sum_{v : p_i(v) = p_i(w_i)} p_i(v), the mass of the tokens tied with w_i (w_i included);
- the DMAP sample is x_i ~ Uniform(a_i, b_i). If w_i was pure-sampled from p_i (temperature 1, no
  truncation) the x_i are i.i.d. Uniform(0, 1) (Proposition 3.1), whatever the model;
- chi-square uniformity test on the *randomised* x_i with k = ceil((2T)^(1/3)) bins (Terrell-Scott):
  chi2 = T k sum_j (f_j - 1/k)^2 ~ chi2_{k-1}; trusted only when T >= 10 k;
- entropy-weighted density (the deterministic plot): D(w) = sum_i h'_i 1_{I_i}(w)/|I_i| / sum_i h'_i
  with h'_i = min(h_i, lambda = 2) nats, 40 bins, each interval spread uniformly over the bins it covers.

Deviations: the paper's interval is [a_i, a_i + p_i(w_i)], which tied tokens would all share, so with
ties (bf16 logits) the map is not uniform under pure sampling (chi-square p ~ 1e-23 on a peaked bf16
distribution); the tied tokens share one interval of their summed mass instead, which equals the paper's
interval when there are no ties (``posttrain.engines.scores``). The official code's
``chi_squared_uniformity_test`` defaults to 4 bins; we default to the
paper's Terrell-Scott rule (``bins=4`` reproduces the code). p-values come from the regularised upper
incomplete gamma function (``torch.special.gammaincc``), so no scipy dependency.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from posttrain.engines.scores import mass_above_from_logits, tied_mass_from_logits


def dmap_intervals(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(a, b, h) per position from next-token logits ``[T, V]`` and the observed tokens ``[T]``.

    Computed in float32; tied tokens share [a, a + tied mass]; ``b`` is clamped to at most 1.
    """
    logp = torch.log_softmax(logits.float(), dim=-1)
    probs = logp.exp()
    a = mass_above_from_logits(logits, targets)
    b = (a + tied_mass_from_logits(logits, targets)).clamp(max=1.0)
    h = -(probs * logp).sum(-1)
    return a, b, h


def intervals_from_scores(mass_above: torch.Tensor, logprobs: torch.Tensor,
                          tied_mass: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(a, b) from a backend's ``mass_above`` and ``tied_mass``; ``tied_mass=None`` (a backend that does
    not report ties) falls back to the observed token's probability, the paper's interval."""
    a = torch.as_tensor(mass_above, dtype=torch.float64).clamp(0.0, 1.0)
    width = torch.as_tensor(logprobs, dtype=torch.float64).exp() if tied_mass is None else \
        torch.as_tensor(tied_mass, dtype=torch.float64)
    return a, (a + width).clamp(max=1.0)


def dmap_samples(a: torch.Tensor, b: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """x_i = a_i + U_i (b_i - a_i) with U_i ~ Uniform(0, 1) drawn from ``generator``."""
    a = torch.as_tensor(a, dtype=torch.float64)
    b = torch.as_tensor(b, dtype=torch.float64)
    u = torch.rand(a.shape, generator=generator, dtype=torch.float64)
    return a + u * (b - a)


def terrell_scott_bins(n: int) -> int:
    """k = ceil((2n)^(1/3)), at least 2."""
    return max(2, math.ceil((2 * n) ** (1 / 3) - 1e-9))


@dataclass
class Chi2Result:
    statistic: float
    dof: int
    p_value: float
    bins: int
    n: int
    reliable: bool  # n >= 10 * bins
    frequencies: list[float]

    def to_dict(self) -> dict:
        return asdict(self)


def chi2_sf(statistic: float, dof: int) -> float:
    """Survival function of the chi-square distribution: Q(dof/2, statistic/2)."""
    return float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64),
                                         torch.tensor(statistic / 2, dtype=torch.float64)))


def chi2_uniform(x: torch.Tensor, bins: int | None = None) -> Chi2Result:
    """Chi-square test that ``x`` (values in [0, 1]) is Uniform(0, 1): chi2 = T k sum_j (f_j - 1/k)^2."""
    x = torch.as_tensor(x, dtype=torch.float64).flatten()
    n = int(x.numel())
    if n == 0:
        raise ValueError("chi2_uniform needs at least one sample")
    k = bins or terrell_scott_bins(n)
    counts = torch.bincount((x.clamp(0.0, 1.0) * k).long().clamp(max=k - 1), minlength=k).double()
    freqs = counts / n
    stat = float(n * k * ((freqs - 1.0 / k) ** 2).sum())
    return Chi2Result(stat, k - 1, chi2_sf(stat, k - 1), k, n, n >= 10 * k, freqs.tolist())


def weighted_histogram(a: torch.Tensor, b: torch.Tensor, h: torch.Tensor | None = None, bins: int = 40,
                       lam: float = 2.0) -> torch.Tensor:
    """Entropy-weighted DMAP density on ``bins`` equal bins of [0, 1] (a uniform map gives all ones).

    Each interval [a_i, b_i] spreads weight h'_i = min(h_i, lam) uniformly over the bins it overlaps
    (a zero-width interval puts it in the bin that holds a_i); ``h=None`` weighs every position 1.
    """
    a = torch.as_tensor(a, dtype=torch.float64).flatten()
    b = torch.as_tensor(b, dtype=torch.float64).flatten()
    w = torch.ones_like(a) if h is None else torch.as_tensor(h, dtype=torch.float64).flatten().clamp(max=lam)
    if w.sum() <= 0:
        raise ValueError("weighted_histogram: all weights are zero (every position has zero entropy)")
    edges = torch.linspace(0.0, 1.0, bins + 1, dtype=torch.float64)
    width = (b - a).clamp(min=0.0)
    overlap = (torch.minimum(b[:, None], edges[None, 1:]) - torch.maximum(a[:, None], edges[None, :-1])).clamp(min=0)
    point = width < 1e-12
    share = torch.where(point[:, None], torch.zeros_like(overlap), overlap / width.clamp(min=1e-12)[:, None])
    if point.any():
        idx = (a[point] * bins).long().clamp(0, bins - 1)
        share[point] = torch.nn.functional.one_hot(idx, bins).double()
    mass = (w[:, None] * share).sum(0) / w.sum()
    return mass * bins  # density: mass / bin width


def plot_histogram(density: torch.Tensor, path: str, title: str = "DMAP", chi2: Chi2Result | None = None,
                   samples: torch.Tensor | None = None) -> None:
    """Bar plot of the entropy-weighted density (and, if given, the randomised samples' histogram)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    density = torch.as_tensor(density).tolist()
    bins = len(density)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar([(i + 0.5) / bins for i in range(bins)], density, width=1.0 / bins, alpha=0.7,
           label="entropy-weighted density")
    if samples is not None:
        ax.hist(torch.as_tensor(samples).tolist(), bins=bins, range=(0, 1), density=True, histtype="step",
                color="k", label="randomised samples")
    ax.axhline(1.0, color="r", linestyle="--", linewidth=1, label="uniform")
    ax.set_xlim(0, 1)
    ax.set_xlabel("DMAP value (0 = model's favourite token)")
    ax.set_ylabel("density")
    if chi2 is not None:
        title += f"\nchi2={chi2.statistic:.1f} (k={chi2.bins}), p={chi2.p_value:.2e}, n={chi2.n}"
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
