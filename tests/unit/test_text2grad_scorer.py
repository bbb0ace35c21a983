"""Text2Grad's span reward model contract (unparsable -> None and counted, nothing marked -> all zero,
verdicts), the step-arithmetic program's labels, the SFT data builder and the span P/R metrics."""

from __future__ import annotations

import json

import pytest

from posttrain.algos.span_reward.scorer import SpanRewardModel
from posttrain.engines.base import Rollouts, SamplingParams
from posttrain.models.tiny import build_tokenizer
from posttrain.tasks import TASKS
from posttrain.tasks.span_feedback import SpanFeedback
from posttrain.tasks.step_arithmetic import noisy_response, program_feedback, solution
from rewards.text2grad.span_metrics import span_metrics


class CannedEngine:
    """Returns ``outputs`` in order; records the decoded prompts."""

    def __init__(self, outputs: list[str]) -> None:
        self.tokenizer = build_tokenizer()
        self.outputs, self.prompts = outputs, []

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts:
        self.prompts += [self.tokenizer.decode(p) for p in prompt_ids]
        texts = self.outputs[:len(prompt_ids)]
        ids = [self.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        return Rollouts(prompt_ids=prompt_ids, completion_ids=ids, texts=texts, logprobs=[[0.0] * len(i) for i in ids],
                        finish_reasons=["stop"] * len(texts))


def test_unparsable_is_none_and_nothing_marked_is_zero():
    tok = build_tokenizer()
    engine = CannedEngine(['{"textual_feedback": "fine", "good_spans": [], "poor_spans": []}', "no idea",
                           '{"textual_feedback": "x", "good_spans": ["ab"], "poor_spans": ["cd"]}'])
    rm = SpanRewardModel(engine, "spans", style="compact")
    ids = [tok(t, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for t in ("ab cd", "ab", "ab cd")]
    out = rm.token_rewards(["p1", "p2", "p3"], ids, tok)
    assert out.rewards[0] == [0.0] * 6 and out.verdicts[0] == 1.0  # nothing marked: all-zero span reward
    assert out.rewards[1] is None and out.feedback[1] is None and out.verdicts[1] is None and out.unparsable == 1
    assert "no JSON object" in out.errors[1]
    assert out.rewards[2] == [1.0, 1.0, 0.0, -1.0, -1.0, 0.0] and out.verdicts[2] == -1.0
    assert out.spans_matched == 2 and out.marked_fraction == pytest.approx(4 / 12)
    assert engine.prompts[0] == "<bos><|user|>T2G|spans|p1|ab cd|<|assistant|>"  # the chat template, as SFT renders it
    with pytest.raises(ValueError, match="2 prompts but 1"):
        rm.token_rewards(["a", "b"], ids[:1], tok)


def test_program_feedback_labels():
    fb = program_feedback("7+5-3+8=", "7+5=12,12-3=8,8+8=16")
    assert fb == SpanFeedback("spans", "12-3 is 9, not 8.", good=("7+5=12", "8+8=16"), poor=("12-3=8",))
    assert program_feedback("7+5-3+8=", solution("7+5-3+8=")).critique == "All steps are right."
    miscopy = program_feedback("7+5-3+8=", "7+5=12,13-3=10,10+8=18")
    assert miscopy.poor == ("13-3=10",) and "should start from 12" in miscopy.critique
    short = program_feedback("7+5-3+8=", "7+5=12,12-3=9")
    assert short.poor == () and short.critique == "1 step missing." and short.incomplete
    junk = program_feedback("7+5-3+8=", "17")
    assert junk.poor == ("17",) and "not a step" in junk.critique and junk.incomplete
    assert program_feedback("7+5-3+8=", "").marks_anything is False
    assert program_feedback("7+5-3+8=", "").incomplete and not fb.incomplete


@pytest.mark.parametrize("response", ["", "7+5=12", "7+5=12,12-3=9"])
def test_missing_steps_are_a_poor_last_token_and_a_negative_verdict(response):
    from posttrain.algos.span_reward.scorer import ProgramSpanScorer

    tok = build_tokenizer()
    ids = tok(response, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    out = ProgramSpanScorer(program_feedback).token_rewards(["7+5-3+8="], [ids], tok)
    assert out.verdicts == [-1.0]  # an empty or cut-short answer is not "no poor span located"
    assert out.rewards[0][-1] == -1.0  # the EOS where the policy stopped carries the poor mark
    assert out.rewards[0][:-1] == [0.0 if ch == "," else 1.0 for ch in response]  # the steps given are right
    whole = tok(solution("7+5-3+8="), add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    done = ProgramSpanScorer(program_feedback).token_rewards(["7+5-3+8="], [whole], tok)
    assert done.verdicts == [1.0] and done.rewards[0][-1] == 0.0


def test_task_reward_and_noise():
    task = TASKS.get("step-arithmetic")()
    example = task.split("test")[0]
    right = solution(example.prompt)
    assert task.reward([example.prompt] * 2, [right, right + "1"], answer=[example.answer] * 2) == [1.0, 0.0]
    sft = TASKS.get("step-arithmetic-sft")()
    wrong = sft.distractor(sft.split("test")[0])
    assert len(program_feedback(example.prompt, wrong).poor) == 1
    import random

    rng = random.Random(0)
    kinds = [program_feedback(example.prompt, noisy_response(example.prompt, rng)).poor for _ in range(200)]
    assert 0.25 < sum(not k for k in kinds) / 200 < 0.45  # about 35% right


def test_sft_data_builder(tmp_path):
    from data_pipelines.cli import data_main

    out = tmp_path / "t2g.jsonl"
    assert data_main(["text2grad-sft", "--output", str(out), "--n", "5"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 5 and rows[0]["prompt"].startswith("T2G|spans|") and '"poor_spans"' in rows[0]["answer"]
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({"prompt": "q", "response": "a b", "feedback": {"critique": "c", "poor": ["b"]}})
                       + "\n" + json.dumps({"prompt": "q", "response": "a", "feedback": {"poor_spans": [1]}}) + "\n")
    assert data_main(["text2grad-sft", "--input", str(records), "--output", str(out)]) == 2  # names record 1
    assert data_main(["text2grad-sft", "--input", str(records), "--output", str(out), "--skip_bad"]) == 0
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert json.loads(row["answer"]) == {"textual_feedback": "c", "good_spans": [], "poor_spans": ["b"]}
    assert "character for character" in row["prompt"]


def test_span_metrics_by_hand():
    response = "1+1=2,2+1=4,4+1=5"
    gold = program_feedback("1+1+1+1=", response)  # good 1+1=2, 4+1=5; poor 2+1=4
    perfect = span_metrics([gold], [gold], [response])
    assert perfect["poor"]["token"]["f1"] == 1.0 and perfect["exact_match"] == 1.0
    all_good = SpanFeedback("spans", "ok", good=("1+1=2", "2+1=4", "4+1=5"))
    m = span_metrics([all_good, None], [gold, gold], [response, response])
    assert m["poor"]["token"]["recall"] == 0.0 and m["parse_rate"] == 0.5
    assert m["good"]["token"]["precision"] == pytest.approx(10 / 15)  # 10 of its 15 characters are gold good
    assert m["good"]["span"]["precision"] == pytest.approx(2 / 3) and m["good"]["span"]["recall"] == pytest.approx(2 / 4)
