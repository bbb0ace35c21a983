"""Text2Grad span feedback through the reward server on loopback: the routes, their 4xx errors, and the
remote span reward client's token rewards (a scripted engine plays the span reward model)."""

from __future__ import annotations

import re

import httpx
import pytest

from posttrain.algos.span_reward.remote import RemoteSpanRewardModel
from posttrain.engines.base import Rollouts, SamplingParams
from posttrain.engines.weight_sync import free_port
from posttrain.models.tiny import build_tokenizer
from posttrain.tasks.span_templates import feedback_json
from posttrain.tasks.step_arithmetic import program_feedback
from rewards.server.app import ServerSettings, create_app
from rewards.server.backends import ServedModel
from rewards.server.local import serve_in_thread


class ProgramEngine:
    """Answers a compact span-feedback request with the program's feedback JSON; junk when asked to."""

    def __init__(self) -> None:
        self.tokenizer = build_tokenizer()
        self.calls: list[int] = []

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts:
        self.calls.append(len(prompt_ids))
        texts = []
        for ids in prompt_ids:
            prompt = self.tokenizer.decode(ids, skip_special_tokens=True)
            match = re.search(r"T2G\|spans\|([^|]*)\|([^|]*)\|", prompt)
            junk = match is None or "junk" in match.group(2)
            texts.append("I cannot judge this" if junk else feedback_json(program_feedback(*match.groups()), True))
        ids_out = [self.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        return Rollouts(prompt_ids=[list(p) for p in prompt_ids], completion_ids=ids_out, texts=texts,
                        logprobs=[[0.0] * len(i) for i in ids_out], finish_reasons=["stop"] * len(texts))


@pytest.fixture(scope="module")
def server():
    engine = ProgramEngine()
    served = ServedModel(engine, "fake", "program-span-rm", 4096, "compact")
    with serve_in_thread(create_app(served, ServerSettings(batch_wait_ms=1, max_batch_items=8))) as url:
        yield engine, url


def test_single_and_batch_routes(server):
    _, url = server
    with httpx.Client(base_url=url, timeout=30) as client:
        one = client.post("/v1/span_feedback", json={"prompt": "7+5-3+8=", "response": "7+5=12,12-3=8,8+8=16"})
        assert one.status_code == 200, one.text
        body = one.json()
        assert body["parse_ok"] and body["form"] == "spans" and body["model"] == "program-span-rm"
        assert body["feedback"]["poor_spans"] == ["12-3=8"] and body["feedback"]["good_spans"] == ["7+5=12", "8+8=16"]
        assert body["feedback"]["critique"] == "12-3 is 9, not 8." and body["usage"]["completion_tokens"] > 0
        batch = client.post("/v1/span_feedback/batch", json={"requests": [
            {"prompt": "1+1+1+1=", "response": "1+1=2,2+1=3,3+1=4"}, {"prompt": "1+1+1+1=", "response": "junk"}]})
        results = batch.json()["results"]
        assert [r["parse_ok"] for r in results] == [True, False]
        assert "no JSON object" in results[1]["error"] and results[1]["feedback"] is None


@pytest.mark.parametrize(("body", "status", "names"), [
    ({"response": "x"}, 422, "prompt"),
    ({"prompt": "p", "response": "r", "form": "essay"}, 422, "form"),
    ({"prompt": "p", "response": "r", "style": "long"}, 422, "style"),
    ({"prompt": "p", "response": "r", "typo": 1}, 422, "typo"),
    ({"prompt": "p", "response": "r", "max_tokens": 0}, 422, "max_tokens"),
    ({"prompt": "p", "response": "r", "model": "other"}, 404, "other"),
])
def test_broken_requests_name_the_field(server, body, status, names):
    _, url = server
    answer = httpx.post(f"{url}/v1/span_feedback", json=body, timeout=30)
    assert answer.status_code == status and names in answer.json()["error"]["message"]


def test_batch_limits(server):
    _, url = server
    too_many = {"requests": [{"prompt": "p", "response": "r"}] * 9}
    assert httpx.post(f"{url}/v1/span_feedback/batch", json=too_many, timeout=30).status_code == 413
    assert httpx.post(f"{url}/v1/span_feedback/batch", json={"requests": []}, timeout=30).status_code == 422


def test_remote_client_token_rewards(server):
    engine, url = server
    tok = build_tokenizer()
    rm = RemoteSpanRewardModel(url, "spans", batch_size=2)
    responses = ["7+5=12,12-3=8,8+8=16", "1+1=2,2+1=3,3+1=4", "junk"]
    ids = [tok(r, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for r in responses]
    before = len(engine.calls)
    out = rm.token_rewards(["7+5-3+8=", "1+1+1+1=", "1+1+1+1="], ids, tok)
    assert len(engine.calls) - before >= 2 and rm.stats.requests == 2  # two HTTP batches of at most 2
    first = out.rewards[0]
    assert len(first) == len(ids[0])
    start = responses[0].index("12-3=8")
    assert first[start:start + 6] == [-1.0] * 6 and first[:6] == [1.0] * 6 and first[6] == 0.0 and first[-1] == 0.0
    assert out.rewards[1] == [0.0 if c == "," else 1.0 for c in responses[1]] + [0.0]  # commas are in no span
    assert out.rewards[2] is None
    assert out.verdicts == [-1.0, 1.0, None] and out.unparsable == 1 and "no JSON object" in out.errors[2]
    assert out.spans_matched == 6 and out.spans_unmatched == 0
    assert out.metrics()["span_rm/unparsable_fraction"] == pytest.approx(1 / 3)


def test_remote_client_server_down_is_none_and_counted():
    tok = build_tokenizer()
    rm = RemoteSpanRewardModel(f"http://127.0.0.1:{free_port()}", max_retries=1, backoff=0.01, timeout=2)
    out = rm.token_rewards(["1+1+1+1="], [tok("1+1=2", add_special_tokens=False)["input_ids"]], tok)
    assert out.rewards == [None] and out.unparsable == 1 and rm.stats.retries == 1
