"""Diversity metrics on hand-computed examples, the blockwise forms against the dense ones, and the CLI body."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from data_pipelines.common.diversity import (
    add_diversity_args,
    kmeans_inertia,
    mean_nn_cosine_distance,
    mean_pairwise_cosine_distance,
    mean_pairwise_l2,
    mean_pairwise_sq_l2,
    radius,
    run_diversity,
)
from posttrain.common.cli_help import CommandParser

# three points: (0,0), (3,0), (0,4); distances 3, 4, 5
TRIANGLE = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, 4.0]])


def test_pairwise_l2_by_hand() -> None:
    assert mean_pairwise_l2(TRIANGLE) == pytest.approx((3 + 4 + 5) / 3)
    assert mean_pairwise_l2(TRIANGLE, block=1) == pytest.approx(4.0)
    assert mean_pairwise_sq_l2(TRIANGLE) == pytest.approx((9 + 16 + 25) / 3)


def test_cosine_distances_by_hand() -> None:
    # e1, e2 orthogonal (distance 1), e1 and (1,1)/sqrt2 at 45 degrees (distance 1 - 1/sqrt2)
    x = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    c = 1 - 1 / math.sqrt(2)
    assert mean_pairwise_cosine_distance(x) == pytest.approx((1 + c + c) / 3)
    # nearest other point: e1 -> (1,1) at c, e2 -> (1,1) at c, (1,1) -> either at c
    assert mean_nn_cosine_distance(x, block=2) == pytest.approx(c)


def test_blockwise_and_closed_forms_match_the_dense_matrix() -> None:
    x = np.random.default_rng(0).normal(size=(37, 5))
    dense = np.linalg.norm(x[:, None] - x[None], axis=-1)
    off = ~np.eye(37, dtype=bool)
    assert mean_pairwise_l2(x, block=8) == pytest.approx(dense[off].mean())
    assert mean_pairwise_sq_l2(x) == pytest.approx((dense[off] ** 2).mean())
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    cos = u @ u.T
    assert mean_pairwise_cosine_distance(x) == pytest.approx((1 - cos[off]).mean())
    np.fill_diagonal(cos, -np.inf)
    assert mean_nn_cosine_distance(x, block=5) == pytest.approx((1 - cos.max(axis=1)).mean())


def test_radius_and_inertia_by_hand() -> None:
    # per-dimension std of the triangle: x in {0,3,0} -> sqrt(2), y in {0,0,4} -> sqrt(32)/3
    assert radius(TRIANGLE) == pytest.approx(math.sqrt(math.sqrt(2) * math.sqrt(32) / 3))
    # two tight pairs: k=2 puts each pair in one cluster, inertia = 4 * 0.5^2
    x = np.array([[0.0, 0.0], [1.0, 0.0], [10.0, 0.0], [11.0, 0.0]])
    assert kmeans_inertia(x, 2) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="k must be"):
        kmeans_inertia(x, 5)
    with pytest.raises(ValueError, match="at least 2"):
        mean_pairwise_l2(x[:1])


def test_cli_body_reads_a_field_and_writes_a_report(tmp_path, capsys) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps({"question": q}) + "\n" for q in ("What is force?", "Name a gas.",
                                                                            "Explain supply and demand.")))
    parser = CommandParser()
    add_diversity_args(parser)
    assert run_diversity(parser.parse_args([str(path), "--embedder", "hashing", "--k", "2",
                                            "--output", str(tmp_path / "r.json")])) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["n"] == 3 and report["embedder"] == "hashing-1024" and 0 < report["mean_pairwise_cosine_distance"]
    assert json.loads(capsys.readouterr().out) == report
    with pytest.raises(SystemExit, match="no non-empty string field 'text'"):
        run_diversity(parser.parse_args([str(path), "--field", "text", "--embedder", "hashing"]))
