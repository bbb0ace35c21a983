"""``--algo NAME --help`` groups the options into documented sections: TrainConfig's fields by
``TRAIN_CONFIG_SECTIONS``, then each algorithm config class's own fields under that class."""

from __future__ import annotations

import dataclasses
import re

import pytest

import posttrain.config
from posttrain.algos import algorithm_names, get_algorithm
from posttrain.algos.ppo.algo import PPOConfig
from posttrain.algos.sft import SFTConfig
from posttrain.config import TRAIN_CONFIG_SECTIONS, HelpSection, TrainConfig, help_sections, help_text


def _sections(text: str) -> dict[str, list[str]]:
    """Heading -> the field flags under it (``--name``, not an engine spec's ``--rollout.OPTION`` lines)."""
    out: dict[str, list[str]] = {}
    heading = None
    for line in text.splitlines()[1:]:
        if line and not line.startswith(" "):
            heading = line
            out[heading] = []
        elif match := re.match(r"  --([a-z0-9_]+) \(", line):
            out[heading].append(match.group(1))
    return out


def test_every_train_config_field_is_in_exactly_one_section() -> None:
    placed = [name for section in TRAIN_CONFIG_SECTIONS for name in section.fields]
    assert sorted(placed) == sorted(f.name for f in dataclasses.fields(TrainConfig))
    assert all(section.doc for section in TRAIN_CONFIG_SECTIONS)


def test_a_field_in_no_section_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    without_lr = tuple(HelpSection(s.title, s.doc, tuple(n for n in s.fields if n != "lr"))
                       for s in TRAIN_CONFIG_SECTIONS)
    monkeypatch.setattr(posttrain.config, "TRAIN_CONFIG_SECTIONS", without_lr)
    with pytest.raises(TypeError, match=r"\['lr'\] are in no section"):
        help_text(TrainConfig)


@pytest.mark.parametrize("algo", algorithm_names())
def test_every_algorithm_lists_each_field_once(algo: str) -> None:
    cls = get_algorithm(algo).config_class
    listed = [name for names in _sections(help_text(cls, algo)).values() for name in names]
    assert sorted(listed) == sorted(f.name for f in dataclasses.fields(cls))


def test_the_sections_follow_the_config_classes() -> None:
    sections = _sections(help_text(PPOConfig, "ppo"))
    headings = list(sections)
    assert [h.split(":")[0] for h in headings] == [s.title for s in TRAIN_CONFIG_SECTIONS] + [
        "GRPOConfig options", "ppo options (PPOConfig)"]
    assert headings[-1].startswith("ppo options (PPOConfig): PPO with a critic")
    by_heading = {h.split(":")[0]: names for h, names in sections.items()}
    assert by_heading["optimisation"] == ["lr", "weight_decay", "warmup_steps", "lr_scheduler", "max_grad_norm"]
    assert "rollout" in by_heading["rollout and sampling"]  # GRPOConfig redeclares it: it stays with TrainConfig's
    assert "kl_coef" in by_heading["GRPOConfig options"] and "kl_coef" not in by_heading["ppo options (PPOConfig)"]
    assert "critic_lr" in by_heading["ppo options (PPOConfig)"]


def test_a_redeclared_field_keeps_the_subclass_help() -> None:
    groups = dict(help_sections(SFTConfig, "sft"))
    batch = next(fields for heading, fields in groups.items() if heading.startswith("batch and steps"))
    assert next(f for f in batch if f.name == "group_size").metadata["help"] == "Must be 1 for SFT (no sampling)."
    assert [heading.split(":")[0] for heading in groups][-1] == "sft options (SFTConfig)"
    assert [f.name for f in groups[next(h for h in groups if h.startswith("sft options"))]] == ["max_target_tokens"]
