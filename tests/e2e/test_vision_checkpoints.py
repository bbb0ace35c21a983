"""``posttrain vision attwarp|deleaker|fga --model FOLDER``: the real-checkpoint paths, on tiny checkpoints
saved to disk with their processors (``vision_checkpoints``), so ``from_pretrained``, the processors' chat
templates and tokenizers, and the pipeline's own sampling loop all run as they would on a hub checkpoint."""

from __future__ import annotations

import json

import pytest

from posttrain.cli import main
from tests.e2e.vision_checkpoints import (
    save_image_folder,
    save_tiny_clip,
    save_tiny_flux_pipeline,
    save_tiny_llava,
)


def _run(argv: list[str], out) -> dict:
    assert main([*argv, "--output", str(out)]) == 0
    return json.loads(out.read_text())


def test_attwarp_loads_a_llava_checkpoint_and_its_processor(tmp_path):
    model = save_tiny_llava(tmp_path / "llava")
    summary = _run(["vision", "attwarp", "--model", str(model), "--layers", "-1", "--out_size", "32",
                    "--max_new_tokens", "2", "--answer_tokens", "2", "--examples", "2",
                    "--save_image", str(tmp_path / "strip.png")], tmp_path / "out.json")
    assert summary["model"] == str(model)
    # 32-pixel images in 4-pixel patches: the processor expanded <image> into the model's 8 x 8 token grid
    assert summary["map_grid"] == [8, 8] and summary["out_hw"] == [32, 32]
    assert len(summary["answers"]["plain"]) == len(summary["answers"]["warped"]) == 2
    assert all(isinstance(a, str) for a in summary["answers"]["warped"])
    assert (tmp_path / "strip.png").stat().st_size > 0


def test_deleaker_runs_a_saved_flux_pipeline(tmp_path):
    pipeline = save_tiny_flux_pipeline(tmp_path / "flux")
    # a random-init model's attention maps are noise: morphological opening would erase every mask
    summary = _run(["vision", "deleaker", "--model", str(pipeline), "--prompt", "a cat and a dog", "--size", "128",
                    "--steps", "8", "--max_sequence_length", "16", "--no_smoothing",
                    "--save_image", str(tmp_path / "pair.png")], tmp_path / "out.json")
    cat, dog = summary["entity_tokens"]
    assert cat and dog and set(cat).isdisjoint(dog)
    assert summary["blocks_per_step"] == 2
    assert summary["calls_edited"] > 0 and summary["leakage_stock_window"] > 0.0
    assert (tmp_path / "pair.png").stat().st_size > 0


@pytest.mark.parametrize("train", [False, True])
def test_fga_loads_a_clip_checkpoint_and_an_image_folder(tmp_path, train):
    model = save_tiny_clip(tmp_path / "clip")
    images = save_image_folder(tmp_path / "images", ["cat", "dog"], per_class=2)
    extra = ["--train_images", str(images), "--train_steps", "1"] if train else []
    summary = _run(["vision", "fga", "--model", str(model), "--images", str(images), "--n_views", "8",
                    "--views_kept", "2", "--perturbations", "2", *extra], tmp_path / "out.json")
    assert summary["classes"] == ["cat", "dog"] and summary["test_images"] == 4
    expected = {"zero_shot", "tpt", "stss_hand_prompt"} | ({"sapt", "fga"} if train else set())
    assert set(summary["results"]) == expected
    assert all(r["accuracy"] in (0.0, 0.25, 0.5, 0.75, 1.0) for r in summary["results"].values())


def test_fga_model_without_images_names_the_flag(tmp_path, capsys):
    model = save_tiny_clip(tmp_path / "clip")
    assert main(["vision", "fga", "--model", str(model)]) == 2
    assert "--images" in capsys.readouterr().err
