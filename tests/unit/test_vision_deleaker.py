"""DeLeaker: the reweighting rule by hand, and its Flux processor on diffusers' test-size FluxTransformer2DModel."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from posttrain.standalone.vision.deleaker import (
    DeleakerConfig,
    entity_mass,
    entity_token_indices,
    leakage_score,
    open_close,
    reweight_logits,
    threshold_mask,
)
from posttrain.standalone.vision.deleaker_flux import (
    DeleakerState,
    flux_sample,
    install_deleaker,
    latent_ids,
    leakage_summary,
    tiny_flux_inputs,
)
from posttrain.standalone.vision.tiny import tiny_flux

T, GRID = 8, (4, 4)
N = GRID[0] * GRID[1]
ENTITIES = [[1, 2], [5]]
# Every call of every step inside both windows, for the 2 attention calls per step of the tiny model.
ALWAYS = DeleakerConfig(start_aggregating_from=0, stop_aggregating_at=100, start_intervention_from=0,
                        stop_intervention_at=100, num_text_tokens=T)


@pytest.fixture(scope="module")
def flux():
    return tiny_flux()


def _inputs(seed: int = 0, batch: int = 2):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, N, 4, generator=g), torch.randn(batch, T, 32, generator=g),
            torch.randn(batch, 32, generator=g))


def _forward(model, state=None, seed=0):
    x, text, pooled = _inputs(seed)
    img_ids, txt_ids = latent_ids(GRID, T)
    with torch.no_grad():
        return model(hidden_states=x, encoder_hidden_states=text, pooled_projections=pooled,
                     timestep=torch.full((2,), 0.5), img_ids=img_ids, txt_ids=txt_ids,
                     joint_attention_kwargs=None if state is None else {"deleaker_state": state}).sample


def _masks(*rows):
    out = []
    for r in rows:
        m = torch.zeros(1, N, dtype=torch.bool)
        m[0, list(r)] = True
        out.append(m)
    return out


def test_off_single_entity_and_outside_window_are_bit_identical(flux):
    stock = _forward(flux)
    with install_deleaker(flux) as blocks:
        assert blocks == 2
        assert torch.equal(_forward(flux), stock)
        assert torch.equal(_forward(flux, DeleakerState(ALWAYS, [[1, 2]], blocks_per_step=2, text_len=T)), stock)
        late = dataclasses.replace(ALWAYS, start_aggregating_from=50, start_intervention_from=50)
        assert torch.equal(_forward(flux, DeleakerState(late, ENTITIES, blocks_per_step=2, text_len=T)), stock)
        # Without smoothing: a random-init model's attention is noise, which the morphological opening of
        # the entity masks would erase entirely (no edit left to see).
        edited = DeleakerState(dataclasses.replace(ALWAYS, do_smoothing=False), ENTITIES, blocks_per_step=2, text_len=T)
        changed = _forward(flux, edited)
    assert edited.edited_calls == 2
    assert not torch.allclose(changed, stock)
    assert torch.equal(_forward(flux), stock)  # the stock processors are back


def test_reweighted_attention_has_no_cross_entity_mass_and_keeps_other_rows():
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(1, 2, T + N, T + N, generator=g)
    probs = torch.softmax(scores, dim=-1)
    masks = _masks({0, 1, 4}, {10, 11, 15})
    used = torch.softmax(reweight_logits(scores, probs, T, ENTITIES, masks, ALWAYS), dim=-1)
    assert not bool(torch.isnan(used).any())
    assert torch.allclose(used.sum(dim=-1), torch.ones(1, 2, T + N))
    for q in (0, 1, 4):
        assert float(used[0, :, T + q, ENTITIES[1]].sum()) == 0.0
    for q in (10, 11, 15):
        assert float(used[0, :, T + q, ENTITIES[0]].sum()) == 0.0
    untouched = [q for q in range(T + N) if q - T not in (0, 1, 4, 10, 11, 15)]
    assert torch.equal(used[:, :, untouched], probs[:, :, untouched])
    # Scored with the rule's own masks the edit leaves exactly 0: a check of the rule, not a measurement.
    assert leakage_score(entity_mass(used, T, ENTITIES), masks) == 0.0
    assert leakage_score(entity_mass(probs, T, ENTITIES), masks) > 0.0


def test_leakage_score_by_hand():
    # 1 sample, 4 image queries; entity masses (on its tokens) per query; masks of entity 0 {0, 1}, entity 1 {3}.
    mass = [torch.tensor([[0.1, 0.2, 0.3, 0.4]]), torch.tensor([[0.5, 0.7, 0.0, 0.9]])]
    masks = [torch.tensor([[True, True, False, False]]), torch.tensor([[False, False, False, True]])]
    # pairs: (0 -> 1) mean of mass_1 over {0, 1} = 0.6; (1 -> 0) mass_0 at {3} = 0.4; mean 0.5
    assert leakage_score(mass, masks) == pytest.approx(0.5)
    # an empty mask drops its pair; no non-empty mask at all: None
    assert leakage_score(mass, [masks[0], torch.zeros(1, 4, dtype=torch.bool)]) == pytest.approx(0.6)
    assert leakage_score(mass, [torch.zeros(1, 4, dtype=torch.bool)] * 2) is None
    with pytest.raises(ValueError, match="masks"):
        leakage_score(mass, masks[:1])


def test_strengthening_is_a_logit_scaling():
    scores = torch.randn(1, 2, T + N, T + N, generator=torch.Generator().manual_seed(1))
    config = dataclasses.replace(ALWAYS, do_image_image=False)
    edited = reweight_logits(scores, torch.softmax(scores, -1), T, ENTITIES, _masks({3}, {7}), config)
    assert torch.allclose(edited[0, :, T + 3, ENTITIES[0]], 1.2 * scores[0, :, T + 3, ENTITIES[0]])
    assert torch.allclose(edited[0, :, T + 7, ENTITIES[1]], 1.2 * scores[0, :, T + 7, ENTITIES[1]])
    negative = scores[0, :, T + 3, ENTITIES[0]] < 0
    assert bool((edited[0, :, T + 3, ENTITIES[0]][negative] < scores[0, :, T + 3, ENTITIES[0]][negative]).all())


def test_image_image_rule_blocks_what_a_reference_count_predicts():
    scores = torch.randn(1, 2, T + N, T + N, generator=torch.Generator().manual_seed(2))
    probs = torch.softmax(scores, dim=-1)
    config = dataclasses.replace(ALWAYS, do_image_text_weakening=False, do_image_text_strengthening=False)
    a, c = {0, 1, 2, 4, 5}, {9, 10, 13, 14, 15}
    edited = reweight_logits(scores, probs, T, ENTITIES, _masks(a, c), config)
    w = probs[0, :, T:, T:].mean(dim=0)
    expected = 0
    for rows, cols in ((a, c), (c, a)):
        vals = torch.tensor([float(w[q, k]) for q in rows for k in cols])
        tau = vals.mean() + vals.std()
        expected += int((vals > tau).sum())
    assert int(torch.isneginf(edited[0, 0]).sum()) == expected > 0
    assert torch.equal(torch.isneginf(edited[0, 0]), torch.isneginf(edited[0, 1]))


def test_threshold_and_morphology_by_hand():
    # mean 4, unbiased std sqrt(50/3) = 4.08: only 10 is above 8.08.
    assert threshold_mask(torch.tensor([[1.0, 2.0, 3.0, 10.0]]), 1.0).tolist() == [[False, False, False, True]]
    block = torch.zeros(1, 36, dtype=torch.bool)
    for r in range(3):
        block[0, r * 6: r * 6 + 3] = True
    noisy = block.clone()
    noisy[0, 5 * 6 + 5] = True  # an isolated pixel far from the block
    assert torch.equal(open_close(noisy, (6, 6)), block)
    with pytest.raises(ValueError, match="grid"):
        open_close(block, (5, 6))


def test_masks_from_synthetic_attention():
    probs = torch.full((1, 2, T + N, T + N), 0.01)
    probs[0, :, T + 0:T + 4, ENTITIES[0]] = 0.9
    probs[0, :, T + 12:T + 16, ENTITIES[1]] = 0.9
    state = DeleakerState(dataclasses.replace(ALWAYS, do_smoothing=False, use_history=False), ENTITIES,
                          blocks_per_step=2, text_len=T)
    masks = state.masks(probs, 0)
    assert masks[0].nonzero()[:, 1].tolist() == [0, 1, 2, 3]
    assert masks[1].nonzero()[:, 1].tolist() == [12, 13, 14, 15]


def test_entity_order_does_not_matter(flux):
    with install_deleaker(flux):
        one = _forward(flux, DeleakerState(ALWAYS, ENTITIES, blocks_per_step=2, text_len=T))
        two = _forward(flux, DeleakerState(ALWAYS, ENTITIES[::-1], blocks_per_step=2, text_len=T))
    assert torch.allclose(one, two, atol=1e-6)


def test_sampling_removes_cross_entity_mass_over_seeds(flux):
    # A random-init model's attention has no spatial coherence: the opening would erase every mask.
    config, grid = dataclasses.replace(ALWAYS, do_smoothing=False), (8, 8)
    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        x, text, pooled = torch.randn(2, 64, 4, generator=g), torch.randn(2, T, 32, generator=g), torch.randn(2, 32)
        with install_deleaker(flux) as blocks:
            on = DeleakerState(config, ENTITIES, blocks_per_step=blocks, text_len=T, grid=grid, record=True)
            flux_sample(flux, x, text, pooled, grid, 3, on)
            off = DeleakerState(config, ENTITIES, blocks_per_step=blocks, text_len=T, grid=grid, record=True,
                                enabled=False)
            flux_sample(flux, x, text, pooled, grid, 3, off)
        assert on.step == 2 and on.edited_calls == 6 and off.edited_calls == 0
        summary = leakage_summary(off, on, [torch.ones(2, 64, dtype=torch.bool)] * 2)
        assert summary["calls_edited"] == 6 and summary["calls_edited_with_masks"] == 6
        assert summary["leakage_edited_rule_masks"] == 0.0
        assert summary["leakage_unedited"] > summary["leakage_edited"] > 0.0


def test_leakage_summary_scores_with_masks_the_rule_did_not_choose(flux):
    # Layout masks cover every image query; the rule blocks only its masked rows, so the edited attention keeps
    # cross-entity mass (> 0) under the layout masks while the rule's own masks score it 0.
    noise, text, pooled, layout = tiny_flux_inputs(4, T, 2, torch.Generator().manual_seed(0))
    assert [m.sum().item() for m in layout] == [8, 8] and not bool((layout[0] & layout[1]).any())
    config = dataclasses.replace(ALWAYS, do_smoothing=False)
    with install_deleaker(flux) as blocks:
        on = DeleakerState(config, ENTITIES, blocks_per_step=blocks, text_len=T, grid=GRID, record=True)
        flux_sample(flux, noise, text, pooled, GRID, 2, on)
        off = DeleakerState(config, ENTITIES, blocks_per_step=blocks, text_len=T, grid=GRID, record=True,
                            enabled=False)
        flux_sample(flux, noise, text, pooled, GRID, 2, off)
    summary = leakage_summary(off, on, layout)
    assert summary["leakage_edited_rule_masks"] == 0.0 and summary["leakage_edited"] > 0.0
    # An edited call whose rule masks are empty is not counted.
    for call in on.calls:
        call.rule_masks = [torch.zeros_like(m) for m in call.rule_masks]
    empty = leakage_summary(off, on, layout)
    assert empty["calls_edited_with_masks"] == 0 and empty["leakage_edited"] is None


def test_config_schedule_and_errors():
    flux_preset = DeleakerConfig()
    assert (flux_preset.k_strength, flux_preset.start_intervention_from, flux_preset.stop_intervention_at) == (
        1.2, 18, 1140)
    scaled = flux_preset.for_blocks(2)
    assert (scaled.start_aggregating_from, scaled.stop_aggregating_at, scaled.start_intervention_from,
            scaled.stop_intervention_at) == (0, 24, 1, 40)
    with pytest.raises(ValueError, match="k_strength"):
        DeleakerConfig(k_strength=0.0).validate()
    with pytest.raises(ValueError, match="entity 1"):
        DeleakerState(ALWAYS, [[1], [9]], blocks_per_step=2, text_len=T)


def test_entity_tokens_from_a_tokenizer():
    from posttrain.models.tiny import build_tokenizer

    tok = build_tokenizer()
    span = entity_token_indices(tok, "a red cat and a blue dog", "blue dog")
    ids = tok("a red cat and a blue dog")["input_ids"]
    assert tok.decode([ids[i] for i in span]) == "blue dog"
    with pytest.raises(ValueError, match="verbatim"):
        entity_token_indices(tok, "a red cat", "green frog")


def test_sampling_runs_on_the_models_device():
    # Position ids and times are made on the latents' device (on meta, a CPU tensor mixed in raises).
    model = tiny_flux().to("meta")
    noise, text, pooled, _ = tiny_flux_inputs(4, T, 2, torch.Generator().manual_seed(0))
    out = flux_sample(model, noise.to("meta"), text.to("meta"), pooled.to("meta"), GRID, 2)
    assert out.device.type == "meta" and out.shape == (1, N, 4)
