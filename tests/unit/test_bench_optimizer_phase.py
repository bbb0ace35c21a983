"""``bench_optimizer_phase.summarize``: per-variant medians and the median of same-round ratios."""

from __future__ import annotations

import pytest

from benchmarks.bench_optimizer_phase import summarize


def step(total: float, adamw: float) -> dict[str, float]:
    return {"total": total, "clip": total - adamw, "adamw": adamw}


def test_medians_and_same_round_ratios_against_the_first_variant() -> None:
    seconds = {"ours": [step(1.0, 0.5), step(2.0, 1.0), step(4.0, 2.0)],
               "before": [step(5.0, 4.0), step(4.0, 3.0), step(8.0, 6.0)]}
    summary = summarize(seconds)
    assert summary["ours"]["median_total_s"] == 2.0
    assert summary["ours"]["median_clip_s"] == 1.0
    assert summary["before"]["median_adamw_s"] == 4.0
    assert summary["before"]["timed_steps"] == 3
    # same-round total ratios 5, 2, 2 -> 2 (the ratio of the medians would be 5 / 2 = 2.5); adamw ratios 8, 3, 3
    # -> 3 (ratio of the medians 4 / 1 = 4)
    assert summary["before"]["median_round_ratio_total_over_ours"] == pytest.approx(2.0)
    assert summary["before"]["median_round_ratio_adamw_over_ours"] == pytest.approx(3.0)
    assert summary["ours"]["median_round_ratio_total_over_ours"] == 1.0


def test_a_variant_missing_a_round_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'before' has 1 rounds"):
        summarize({"ours": [step(1.0, 0.5), step(2.0, 1.0)], "before": [step(5.0, 4.0)]})
