"""``posttrain vision attwarp|deleaker|fga`` on their embedded defaults, through the ``posttrain`` command's
entry point (in-process: the three share one import of transformers and diffusers)."""

from __future__ import annotations

import json

import pytest

from posttrain.cli import main


@pytest.mark.parametrize("method", ["attwarp", "deleaker", "fga"])
def test_embedded_default_writes_its_summary(method, tmp_path, capsys):
    out = tmp_path / f"{method}.json"
    assert main(["vision", method, "--output", str(out)]) == 0
    summary = json.loads(out.read_text())
    assert json.loads(capsys.readouterr().out) == summary
    if method == "attwarp":
        assert summary["map_grid"] == [8, 8] and summary["rounds"] == [1, 1, 1, 1]
        assert len(summary["answers"]["warped"]) == 4
    elif method == "deleaker":
        assert summary["calls_edited"] > 0 and summary["leakage_stock_window"] > 0.0
        assert summary["device"] == "cpu"
    else:
        assert set(summary["results"]) == {"zero_shot", "tpt", "stss_hand_prompt", "sapt", "fga"}
        assert all(0.0 <= r["accuracy"] <= 1.0 for r in summary["results"].values())


def test_help_lists_every_option_with_its_default(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["vision", "attwarp", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "--kl_eps" in text and "(default: 0.05)" in text and "--model" in text
    assert main(["vision", "--help"]) == 0
    assert "deleaker" in capsys.readouterr().out


@pytest.mark.parametrize("argv, field", [(["attwarp", "--max_rounds", "0"], "max_rounds"),
                                         (["deleaker", "--k_strength", "0"], "k_strength"),
                                         (["fga", "--views_kept", "100"], "views_kept"),
                                         (["fga", "--shift", "rain"], "shift")])
def test_bad_values_name_the_field(argv, field, capsys):
    assert main(["vision", *argv]) == 2
    assert field in capsys.readouterr().err
