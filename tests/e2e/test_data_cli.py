"""The CLI end to end (``data_main``): EntropyLong on the built-in corpus with the cache LM, one run that
several tests read (planted facts recovered; resumable: a second run reuses every part and the retrieval index,
a rerun with other chunks is refused), ``--max-reuse`` binding and two Ray workers writing what one writes, its
default scorer (SmolLM2), byte-exact output text through SmolLM2 and the refusal of text a scorer cannot
represent, and the DMAP demo on a tiny corpus LM built by the project's factory."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
from pathlib import Path

import pytest

from data_pipelines.cli import build_parser, data_main


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    from posttrain.models.tiny import RECIPES, build_recipe

    recipe = dataclasses.replace(RECIPES.get("corpus-lm"), hidden_size=32, num_layers=1, num_heads=2,
                                 num_kv_heads=1, intermediate_size=64, warm_start_steps=3, batch_size=4)
    return str(build_recipe(recipe, cache_dir=tmp_path_factory.mktemp("cache")))


def test_help_lists_subcommands(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    assert "entropylong" in capsys.readouterr().out


def test_dmap_cli_demo_and_input(tiny_lm, tmp_path, capsys):
    out = tmp_path / "dm"
    assert data_main(["dmap", "--model", tiny_lm, "--output", str(out), "--demo_samples", "4",
                      "--demo_tokens", "24"]) == 0
    report = json.loads((out / "dmap_report.json").read_text())
    assert set(report["groups"]) == {"pure", "top_k5", "temp0.5", "corpus"}
    assert (out / "dmap_pure.png").stat().st_size > 1000
    src = tmp_path / "t.jsonl"
    src.write_text(json.dumps({"text": "registry of kupam: the seal KBY1A."}) + "\n{bad\n"
                   + json.dumps({"text": "le café de kupam"}, ensure_ascii=False) + "\n", encoding="utf-8")
    assert data_main(["dmap", "--model", tiny_lm, "--input", str(src), "--output", str(out)]) == 0
    assert "1 texts scored, 2 rejected" in capsys.readouterr().out
    # the character model would read 'café' as 'caf<unk>': a reject naming where, never a score of another text
    rejects = [json.loads(line) for line in (out / "parts" / "part-00000.rejects.jsonl").read_text().splitlines()]
    assert any("from character 6: 'é de kupam'" in r["reason"] for r in rejects), rejects


def _builtin_argv(out: Path) -> list[str]:
    return ["entropylong", "--model", "cachelm", "--output", str(out), "--num_entities", "8", "--num_misc", "4",
            "--corpus_style", "chars", "--retriever", "bm25", "--top_k", "4", "--chunk_size", "10",
            "--target-length", "600", "--verify-rule", "doc_mean", "--no_progress"]


@pytest.fixture(scope="module")
def builtin_run(tmp_path_factory) -> tuple[Path, str]:
    """One EntropyLong run on the built-in corpus (20 documents in 2 blocks) with a scorer that can copy from
    context (the count-based cache LM); its folder and what it printed. The tests below read it."""
    out = tmp_path_factory.mktemp("entropylong") / "el"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert data_main(_builtin_argv(out)) == 0
    return out, printed.getvalue()


def test_entropylong_cli_builtin_corpus(builtin_run):
    out, text = builtin_run
    assert "precision=" in text and "anchor entropy" in text
    rows = [json.loads(line) for line in (out / "sequences.jsonl").read_text().splitlines()]
    assert len(rows) == 20 and len({r["id"] for r in rows}) == 20
    assert all(r["num_tokens"] <= 600 and r["params"]["top_k"] == 4 for r in rows)
    report = json.loads((out / "eval.json").read_text())
    assert report["rule_anchor"]["true_pairs"] == 16


def test_entropylong_recovers_planted_facts_with_a_copying_scorer(builtin_run):
    """With a scorer that can copy from context (the count-based cache LM), verification recovers the
    planted (definition, usage) pairs: the document-level rule is precise, the paper's per-anchor rule
    recalls them too but also keeps template matches."""
    out, _ = builtin_run
    report = json.loads((out / "eval.json").read_text())
    assert report["rule_doc_mean"]["precision"] >= 0.9 and report["rule_doc_mean"]["recall"] >= 0.9
    assert report["rule_anchor"]["recall"] >= 0.9
    kept = report["kept"]
    assert kept["anchor_entropy_after"] < 0.5 * kept["anchor_entropy_before"]


def test_entropylong_rerun_reuses_every_block_and_refuses_other_chunks(builtin_run, capsys):
    out, _ = builtin_run
    assert data_main(_builtin_argv(out)) == 0  # resume: every chunk already done, the index reused
    text = capsys.readouterr().out
    assert "verify: 0 blocks run, 2 already done" in text and "assemble: 0 blocks run, 2 already done" in text
    assert "already indexed" in text
    # the contexts are looked up by chunk index: a rerun with other chunks is refused, naming the change
    assert data_main(_builtin_argv(out) + ["--chunk_chars", "64"]) == 1
    assert "config.chunk_chars: 2048 -> 64" in capsys.readouterr().err


def _el_argv(out, *extra: str) -> list[str]:
    return ["entropylong", "--model", "cachelm", "--output", str(out), "--num_entities", "6", "--num_misc", "3",
            "--corpus_style", "chars", "--retriever", "bm25", "--chunk_size", "3", "--no_progress", *extra]


@pytest.mark.long  # 1 vs 2 workers byte-identical is unit-tested in test_data_runner: `make test-long`
def test_entropylong_max_reuse_binds_and_two_workers_write_what_one_writes(tmp_path):
    """Chunk reuse is counted in input order over the whole run, in the driver between verification and
    assembly (its kill -9 / resume identity is in tests/unit/test_data_ray_resume.py), so two Ray workers,
    which get the blocks in any order, write the same bytes as one."""
    assert data_main(_el_argv(tmp_path / "one", "--max-reuse", "1")) == 0
    one = (tmp_path / "one" / "sequences.jsonl").read_bytes()
    rows = [json.loads(line) for line in one.splitlines()]
    assert any(c["dropped"] == "max_reuse" for r in rows for c in r["candidates"])  # the cap binds
    used = [c["chunk_id"] for r in rows for c in r["contexts"]]
    assert used and len(used) == len(set(used))
    assert [r["_index"] for r in rows] == list(range(len(rows)))  # the root records' positions
    assert data_main(_el_argv(tmp_path / "two", "--max-reuse", "1", "--num_workers", "2")) == 0
    assert (tmp_path / "two" / "sequences.jsonl").read_bytes() == one


def test_entropylong_default_scorer_is_smollm2():
    args = build_parser().parse_args(["entropylong"])
    assert args.model == "smollm2-135m" and args.corpus_style == "prose"


def test_entropylong_input_text_is_kept_byte_exact(smollm2, tmp_path):
    """Non-ASCII input: a scorer that cannot represent it (the character cache LM) refuses naming the
    record; SmolLM2's byte-level tokenizer can, and the output ends with the input text byte for byte."""
    docs = [{"id": "fr-1", "text": "Le café de Velnor a le sceau V7QXM. Crème brûlée, déjà vu."},
            {"id": "fr-2", "text": "À Velnor, le sceau est V7QXM : un résumé «naïf» — fin."},
            {"id": "ja-3", "text": "東京の印章は K2PQZ です。 A courier showed the seal K2PQZ."}]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    with pytest.raises(SystemExit, match=r"record 'fr-1' \(field 'text'\).*'é de Velnor"):
        data_main(["entropylong", "--model", "cachelm", "--input", str(src), "--output", str(tmp_path / "c"),
                   "--retriever", "bm25", "--no_progress"])
    out = tmp_path / "s"
    assert data_main(["entropylong", "--model", smollm2, "--input", str(src), "--output", str(out),
                      "--retriever", "bm25", "--top_k", "2", "--alpha", "1.0", "--no_progress"]) == 0
    rows = [json.loads(line) for line in (out / "sequences.jsonl").read_text(encoding="utf-8").splitlines()]
    texts = {d["id"]: d["text"] for d in docs}
    assert [r["id"] for r in rows] == [d["id"] for d in docs]
    for r in rows:
        assert r["text"][r["d_offset_chars"]:] == texts[r["id"]]
        for c in r["contexts"]:
            assert r["text"][c["char_offset"]:].startswith(texts[c["doc_id"]])
