"""FGA on a config-built tiny CLIP: the CoOp text path, SAPT's SAM step, STSS's no-backprop selection, TPT."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from posttrain.standalone.vision.fga import (
    FGAConfig,
    PerturbedClasses,
    PromptLearner,
    augment_views,
    entropy,
    evaluate_views,
    perturbed_classes,
    sam_gradient,
    stss_predict,
    stss_scores,
    tpt_predict,
    train_prompt,
    view_features,
)
from posttrain.standalone.vision.tiny import TOKENS, tiny_clip

VOCAB = 64
EOS = VOCAB - 1
CLASSES = [[20], [21, 22], [23]]
INIT = [10, 11, 12]


@pytest.fixture()
def learner():
    return PromptLearner(tiny_clip(vocab_size=VOCAB), CLASSES, INIT, TOKENS["bos"], EOS)


def test_class_features_equal_clips_own_text_path(learner):
    ids = torch.tensor([[TOKENS["bos"], *INIT, 23, EOS]])
    with torch.no_grad():
        reference = F.normalize(learner.clip.get_text_features(input_ids=ids).pooler_output, dim=-1)
        ours = learner.class_features()[2:3]
    assert torch.allclose(ours, reference, atol=1e-5)


def test_sam_step_geometry_restores_parameters_and_reduces_to_sgd():
    p = torch.nn.Parameter(torch.tensor([3.0, 4.0]))
    c = torch.tensor([0.0, 0.0])

    def loss_fn():
        return 0.5 * ((p - c) ** 2).sum()

    before = p.detach().clone()
    (grad,), info = sam_gradient([p], loss_fn, rho=0.5)
    assert torch.equal(p.detach(), before)
    assert info["eps_norm"] == pytest.approx(0.5)
    # Quadratic: l(p + rho g/|g|) = (|p| + rho)^2 / 2 = 5.5^2 / 2 >= l(p) = 12.5; its gradient is p (1 + rho/|p|).
    assert info["loss"] == pytest.approx(12.5) and info["loss_adv"] == pytest.approx(5.5 ** 2 / 2)
    assert torch.allclose(grad, torch.tensor([3.0, 4.0]) * 1.1)
    (plain,), _ = sam_gradient([p], loss_fn, rho=0.0)
    assert torch.allclose(plain, torch.tensor([3.0, 4.0]))
    (mixed,), _ = sam_gradient([p], loss_fn, rho=0.5, lam=0.5)
    assert torch.allclose(mixed, torch.tensor([3.0, 4.0]) * 1.05)


def test_entropy_by_hand():
    assert entropy(torch.zeros(1, 4)).item() == pytest.approx(math.log(4))
    assert entropy(torch.tensor([[100.0, 0.0]])).item() == pytest.approx(0.0, abs=1e-6)


def test_stss_needs_no_backprop_and_caches_text_features(learner):
    config = FGAConfig(perturbations=4, n_views=8, views_kept=2)
    classes = perturbed_classes(learner, config, torch.Generator().manual_seed(0))
    assert learner.text_calls == 5
    weights = {k: v.clone() for k, v in learner.state_dict().items()}
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        views = augment_views(torch.rand(3, 32, 32, generator=g), config.n_views, g)
        with torch.no_grad():
            probs = stss_predict(learner.image_features(views), classes, learner.scale, config)
        assert probs.shape == (3,) and probs.sum().item() == pytest.approx(1.0, abs=1e-5)
    assert learner.text_calls == 5
    assert all(torch.equal(v, learner.state_dict()[k]) for k, v in weights.items())
    assert all(p.grad is None for p in learner.parameters())


def test_zero_radius_reduces_to_entropy_selection_and_is_deterministic(learner):
    feats = F.normalize(torch.randn(10, 32, generator=torch.Generator().manual_seed(2)), dim=-1)
    zero = perturbed_classes(learner, FGAConfig(rho_prime=0.0, perturbations=3), torch.Generator().manual_seed(0))
    h = entropy(learner.scale * feats @ zero.base.T)
    assert torch.allclose(stss_scores(feats, zero, learner.scale, lam=1.0), h)
    a = perturbed_classes(learner, FGAConfig(perturbations=3), torch.Generator().manual_seed(7))
    b = perturbed_classes(learner, FGAConfig(perturbations=3), torch.Generator().manual_seed(7))
    assert torch.equal(a.perturbed, b.perturbed)
    assert not torch.allclose(a.perturbed, zero.perturbed)


def test_sharp_views_are_left_out_where_voting_and_entropy_fail():
    # Two classes in 3-d. Misleading views are confident for class 1 at the learned prompt but lose it under a
    # prompt perturbation (sharp); honest views lean to class 0 the same under every prompt (flat).
    base = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    perturbed = torch.stack([torch.stack([base[0], F.normalize(torch.tensor([0.0, 1.0, 1.0]), dim=0)])])
    classes = PerturbedClasses(base, perturbed)
    bad = F.normalize(torch.tensor([0.1, 1.0, -1.0]), dim=0).expand(10, 3)
    good = F.normalize(torch.tensor([1.0, 0.5, 0.0]), dim=0).expand(6, 3)
    views = torch.cat([bad, good])
    scale, config = 5.0, FGAConfig(views_kept=6)
    assert torch.softmax(scale * views @ base.T, dim=-1).mean(dim=0).argmax().item() == 1
    lowest_entropy = entropy(scale * views @ base.T).argsort()[:6]
    assert torch.softmax(scale * views[lowest_entropy] @ base.T, -1).mean(0).argmax().item() == 1
    assert stss_predict(views, classes, scale, config).argmax().item() == 0


def test_tpt_is_episodic_and_sapt_trains(learner):
    config = FGAConfig(n_views=8, views_kept=2)
    g = torch.Generator().manual_seed(3)
    views = augment_views(torch.rand(3, 32, 32, generator=g), config.n_views, g)
    assert views.shape == (8, 3, 32, 32) and torch.equal(views[0], views[0])
    before = learner.ctx.detach().clone()
    probs = tpt_predict(learner, learner.image_features(views).detach(), config)
    assert probs.shape == (3,) and torch.equal(learner.ctx.detach(), before)
    pixels = torch.rand(12, 3, 32, 32, generator=g)
    labels = torch.arange(12) % 3
    losses = train_prompt(learner, pixels, labels, steps=15, lr=5e-2, rho=0.05, generator=g)
    assert losses[-1] < losses[0]
    assert not torch.equal(learner.ctx.detach(), before)


def test_config_errors_name_the_field():
    for field, value in (("views_kept", 100), ("perturbations", 0), ("rho_prime", -1.0)):
        with pytest.raises(ValueError, match=field):
            FGAConfig(**{field: value}).validate()


def test_tensors_are_created_on_the_models_device():
    # On the meta device a tensor created on the CPU and mixed in raises (or stays on the CPU): ids, masks,
    # context, perturbations and crops must all be made on the model's device.
    learner = PromptLearner(tiny_clip(vocab_size=VOCAB).to("meta"), CLASSES, INIT, TOKENS["bos"], EOS)
    assert {t.device.type for t in (learner.ctx, learner.ids, learner.mask, learner.eos_at)} == {"meta"}
    seen = []

    def class_features(ctx=None):
        seen.append((ctx if ctx is not None else learner.ctx).device.type)
        return torch.zeros(len(CLASSES), 32, device="meta")

    learner.class_features = class_features
    classes = perturbed_classes(learner, FGAConfig(perturbations=2), torch.Generator().manual_seed(0))
    assert seen == ["meta"] * 3 and classes.perturbed.device.type == "meta"
    views = augment_views(torch.rand(3, 32, 32).to("meta"), 4, torch.Generator().manual_seed(0))
    assert views.device.type == "meta" and views.shape == (4, 3, 32, 32)


def test_evaluate_views_methods_by_hand(learner):
    g = torch.Generator().manual_seed(3)
    feats = F.normalize(torch.randn(5, 6, 32, generator=g), dim=-1)
    labels = torch.randint(0, len(CLASSES), (5,), generator=g)
    with torch.no_grad():
        base = learner.class_features()
        probs = torch.softmax(learner.logits(feats.flatten(0, 1), base), -1).view(5, 6, -1)
    original = (probs[:, 0].argmax(-1) == labels).float().mean().item()
    averaged = (probs.mean(dim=1).argmax(-1) == labels).float().mean().item()
    config = FGAConfig(n_views=6, views_kept=6, perturbations=2)
    assert evaluate_views(learner, feats, labels, config, "zero-shot") == pytest.approx(original)
    assert evaluate_views(learner, feats, labels, config, "all-views") == pytest.approx(averaged)
    # keeping every view, STSS's selection is moot: it equals the all-views average
    classes = perturbed_classes(learner, config, torch.Generator().manual_seed(0))
    assert evaluate_views(learner, feats, labels, config, "stss", classes) == pytest.approx(averaged)
    with pytest.raises(ValueError, match="method"):
        evaluate_views(learner, feats, labels, config, "vote")
    with pytest.raises(ValueError, match="classes"):
        evaluate_views(learner, feats, labels, config, "stss")


def test_view_features_start_with_the_original(learner):
    images = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(4))
    feats = view_features(learner, images, 5, lambda x: x, torch.Generator().manual_seed(0))
    assert feats.shape == (2, 5, 32)
    with torch.no_grad():
        assert torch.allclose(feats[:, 0], learner.image_features(images), atol=1e-6)
