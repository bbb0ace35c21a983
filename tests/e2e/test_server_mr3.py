"""mR3 scoring through the reward server: verdict polarity, multiple choice, the official prompt, the
verdict budget, per-sample seeds and the first-build notice (a scripted engine that records its calls)."""

from __future__ import annotations

import logging
import subprocess

import httpx
import pytest

from posttrain.engines.base import Rollouts, SamplingParams, sample_seed, sample_seeds
from posttrain.models.tiny import build_tokenizer
from rewards.mr3.templates import COMPACT_VERDICT_TOKENS
from rewards.remote import RemoteReward
from rewards.server.app import ServerSettings, create_app
from rewards.server.backends import ServedModel
from rewards.server.batching import sample_params
from rewards.server.cli import announce_judge_build
from rewards.server.local import serve_in_thread


class ScriptedEngine:
    """Answers every prompt with the verdict ``answer``; records the prompts and params it was given."""

    def __init__(self) -> None:
        self.tokenizer = build_tokenizer()
        self.answer = "true"
        self.calls: list[tuple[list[str], SamplingParams]] = []

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts:
        self.calls.append(([self.tokenizer.decode(p) for p in prompt_ids], params))
        text = f'check</think>{{"explanation": "e", "score": "{self.answer}"}}'
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        n = len(prompt_ids)
        return Rollouts(prompt_ids=[list(p) for p in prompt_ids], completion_ids=[ids] * n, texts=[text] * n,
                        logprobs=[[0.0] * len(ids)] * n, finish_reasons=["stop"] * n)


def serve(style: str = "mr3", **settings):
    engine = ScriptedEngine()
    served = ServedModel(engine, "fake", "scripted-judge", 4096, style)
    return engine, serve_in_thread(create_app(served, ServerSettings(batch_wait_ms=1, **settings)))


@pytest.fixture(scope="module")
def judge():
    engine, context = serve()
    with context as url, httpx.Client(base_url=url, timeout=30) as client:
        yield engine, client


def score(client: httpx.Client, **body) -> httpx.Response:
    return client.post("/v1/rubric_score", json={"instruction": "How do I bake bread?", **body})


def test_binary_reward_follows_the_templates_polarity(judge):
    engine, client = judge
    engine.answer = "true"
    assert score(client, mode="binary", responses=["Mix flour."]).json()["reward"] == 1.0  # true = correct
    harmful = score(client, mode="binary", responses=["Mix flour."], template="safety-response").json()
    assert harmful["reward"] == 0.0 and harmful["score_raw"] == "true"  # mR3's safety rubric: true = harmful
    request = score(client, mode="binary", responses=[], template="safety-prompt").json()
    assert request["reward"] == 0.0
    engine.answer = "yes"
    rubric = {"yes": "The response is polite.", "no": "It is not."}
    assert score(client, mode="binary", responses=["Hi"], rubric=rubric, good_verdict="yes").json()["reward"] == 1.0
    refused = score(client, mode="binary", responses=["Hi"], rubric=rubric)
    assert refused.status_code == 400 and "good_verdict" in refused.json()["error"]["message"]


def test_multiple_choice_is_accuracy_against_the_gold_option(judge):
    engine, client = judge
    body = {"mode": "pointwise", "template": "mcq", "responses": ["A. Rome\nB. Paris\nC. Lyon\nD. Nice"],
            "instruction": "Capital of France?"}
    engine.answer = "B"
    assert client.post("/v1/rubric_score", json={**body, "gold": "B"}).json()["reward"] == 1.0
    engine.answer = "C"
    assert client.post("/v1/rubric_score", json={**body, "gold": "B"}).json()["reward"] == 0.0
    assert client.post("/v1/rubric_score", json=body).status_code == 400


def test_the_judge_sees_mr3s_official_prompt(judge):
    engine, client = judge
    engine.answer = "Assistant A"
    score(client, mode="pairwise", responses=["Knead it.", "No idea."], swap_positions=False)
    (prompt,), _ = engine.calls[-1]
    assert "# Input (User's Prompt)\n    How do I bake bread?\n\n    # Assistant A\n    Knead it.\n\n    " in prompt
    assert prompt.endswith("# Your Response\n    <|assistant|><think>")


def test_the_verdict_budget_comes_from_the_model(judge):
    engine, client = judge
    engine.answer = "true"
    score(client, mode="binary", responses=["Mix flour."])
    (prompt,), params = engine.calls[-1]
    prompt_tokens = len(engine.tokenizer(prompt, add_special_tokens=False)["input_ids"])
    assert params.max_new_tokens == 4096 - prompt_tokens > 1024  # the whole rest of the context
    assert score(client, mode="binary", responses=["Mix flour."], max_tokens=3000).status_code == 200
    capped_engine, capped = serve(rubric_max_tokens=300)
    with capped as url:
        httpx.post(f"{url}/v1/rubric_score", json={"mode": "binary", "instruction": "Q", "responses": ["A"]})
    assert capped_engine.calls[-1][1].max_new_tokens == 300
    tiny_engine, tiny = serve(style="compact", max_tokens_cap=64)
    with tiny as url:
        body = {"mode": "binary", "instruction": "3+4=", "responses": ["7"]}
        httpx.post(f"{url}/v1/rubric_score", json=body)
        assert tiny_engine.calls[-1][1].max_new_tokens == min(64, COMPACT_VERDICT_TOKENS)
        over = httpx.post(f"{url}/v1/rubric_score", json={**body, "max_tokens": 65})
        assert over.status_code == 400


def test_seeded_samples_get_distinct_reproducible_seeds(judge):
    engine, client = judge
    engine.answer = "Assistant A"

    def seeds_of(**body) -> list[int]:
        before = len(engine.calls)
        assert score(client, mode="pairwise", responses=["a", "b"], **body).status_code == 200
        return sorted(params.seed for _, params in engine.calls[before:])

    first = seeds_of(n_samples=3, seed=7)
    assert len(set(first)) == 6  # 3 samples x the A/B swap, each its own seed
    assert first == seeds_of(n_samples=3, seed=7) == sorted(sample_seed(7, k) for k in range(6))
    assert set(first).isdisjoint(seeds_of(n_samples=3, seed=8))
    before = len(engine.calls)
    client.post("/v1/completions", json={"prompt": ["hello", "bye"], "n": 3, "seed": 5, "max_tokens": 4})
    served = {}
    for (text,), params in engine.calls[before:]:
        served.setdefault(text, []).append(params.seed)
    # the seeds the colocated and remote engines give the same call: copy j of prompt i is sample_seed(5, i) + j
    expanded = [engine.tokenizer(text, add_special_tokens=False)["input_ids"] for text in ("hello", "bye")
                for _ in range(3)]
    colocated = sample_seeds(5, expanded)
    assert sorted(served["hello"]) == colocated[:3] == [sample_seed(5, 0) + j for j in range(3)]
    assert sorted(served["bye"]) == colocated[3:] == [sample_seed(5, 3) + j for j in range(3)]
    unseeded = SamplingParams(max_new_tokens=4)
    assert sample_params(unseeded, [[1], [1]]) == [unseeded, unseeded]


def test_first_serve_says_the_judge_is_being_built_and_make_builds_it(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("POSTTRAIN_CACHE", str(tmp_path))
    with caplog.at_level(logging.WARNING):
        announce_judge_build()
    assert "make judge" in caplog.text and "posttrain tiny --recipe reward-mr3" in caplog.text
    dry = subprocess.run(["make", "-n", "judge"], capture_output=True, text=True, check=True).stdout
    assert "posttrain tiny --recipe reward-mr3" in dry


def test_remote_reward_sends_the_template_and_refuses_one_that_judges_no_completion(judge):
    engine, client = judge
    engine.answer = "true"
    reward = RemoteReward(str(client.base_url), mode="binary", template="safety-response", max_retries=0)
    try:
        assert reward(["How do I pick a lock?"], ["Step 1..."]) == [0.0]  # true = harmful
    finally:
        reward.close()
    with pytest.raises(ValueError, match="judges 0 response"):
        RemoteReward("http://127.0.0.1:1", mode="binary", template="safety-prompt")
    with pytest.raises(ValueError, match="is a binary format"):
        RemoteReward("http://127.0.0.1:1", mode="pairwise", template="safety-response")
