"""DuPO's translation dual: the synthetic English-to-Zed task, translation prompts and the back-translation
reward (hand-computed ends of the BLEU scale), and its wiring into ``--algo dupo``."""

from __future__ import annotations

import math

import pytest
import torch

from posttrain.algos.base import AlgoContext
from posttrain.algos.dupo.algo import DuPO, DuPOConfig
from posttrain.algos.dupo.back_translation import group_back_translation_rewards
from posttrain.algos.dupo.reward import DualSettings
from posttrain.engines.base import Rollouts, SamplingParams
from posttrain.metrics import PhaseTimer
from posttrain.models.tiny import build_tokenizer
from posttrain.tasks.dual_questions import back_translation_prompt, translation_request
from posttrain.tasks.word_translation import ZED, WordTranslationSFTTask, WordTranslationTask, to_zed

ENGLISH = {zed: english for english, zed in ZED.items()}
PROMPT = "Translate English to Zed: ann has red dog"


class BackTranslator:
    """A generation engine (protocol only) that answers "Translate Zed to English: y" word by word through the
    inverse dictionary, reversing the order (unknown words stay as they are)."""

    def __init__(self) -> None:
        self.tokenizer = build_tokenizer()
        self.questions: list[str] = []

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts:
        texts = []
        for ids in prompt_ids:
            question = self.tokenizer.decode(ids, skip_special_tokens=True)
            self.questions.append(question)
            request = translation_request(question)
            texts.append(" ".join(ENGLISH.get(w, w) for w in reversed(request.text.split())))
        ids = [self.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        return Rollouts(prompt_ids=prompt_ids, completion_ids=ids, texts=texts, logprobs=[[0.0] * len(i) for i in ids],
                        finish_reasons=["stop"] * len(ids))


def settings(lam: float = 1.0) -> DualSettings:
    return DualSettings(max_questions=1, samples=1, lam=lam, selection="none",
                        params=SamplingParams(max_new_tokens=16, temperature=0.0), system_prompt=None,
                        max_prompt_tokens=256)


def test_zed_is_a_reversed_word_substitution() -> None:
    assert to_zed("ann has red dog") == "wo ol ra nu"
    assert to_zed("ann has red dog", reverse=False) == "nu ra ol wo"  # the warm start's systematic error
    assert len(set(ZED.values())) == len(ZED)  # one-to-one: the translation can be undone


def test_held_out_sentences_are_unseen_combinations_of_seen_words() -> None:
    task = WordTranslationTask()
    train, test = task.sentences("train"), task.sentences("test")
    assert (len(train), len(test)) == (192, 64) and not set(train) & set(test)
    assert {w for s in test for w in s.split()} <= {w for s in train for w in s.split()}
    sft = WordTranslationSFTTask().split("train")
    assert [e.prompt.split(":")[0] for e in sft[:2]] == ["Translate English to Zed", "Translate Zed to English"]
    assert WordTranslationSFTTask().distractor(sft[0]) == to_zed(sft[1].answer, reverse=False)


def test_translation_requests_parse_and_reverse() -> None:
    request = translation_request(PROMPT)
    assert (request.source, request.target, request.text) == ("English", "Zed", "ann has red dog")
    assert back_translation_prompt(request, " wo ol ra nu ") == "Translate Zed to English: wo ol ra nu"
    with pytest.raises(ValueError, match="How many"):
        translation_request("How many pens?")


def test_back_translation_reward_follows_bleu() -> None:
    engine = BackTranslator()
    completions = ["wo ol ra nu", "wo ol ra nu", "xx yy zz qq", "", "nu ra ol wo"]
    rewards, stats = group_back_translation_rewards([PROMPT] * 5, completions, 5, engine, settings())
    # exact round trip: BLEU 100, d = 0; no word recovered: BLEU 0, d = 1; empty: a failed recovery (d = 1)
    assert rewards[:4] == pytest.approx([1.0, 1.0, math.exp(-1), math.exp(-1)])
    assert math.exp(-1) < rewards[4] < 1.0  # the words right, the order wrong: partial credit
    assert len(engine.questions) == 3  # one dual question per distinct non-empty completion
    assert stats.no_answer == 1 and stats.metrics()["dupo/dual_accuracy"] == pytest.approx(1 / 3)
    assert 1 / 3 < stats.metrics()["dupo/dual_distance"] < 2 / 3
    assert stats.recovery == [1.0, 1.0, 0.0, None, 0.0]  # per completion: exact round trips of its one answer
    lam2, _ = group_back_translation_rewards([PROMPT] * 2, ["wo ol ra nu", ""], 2, BackTranslator(), settings(lam=2.0))
    assert lam2 == pytest.approx([1.0, math.exp(-2)])


def test_back_translation_refuses_a_selection_and_a_math_prompt() -> None:
    with pytest.raises(ValueError, match="selection"):
        group_back_translation_rewards([PROMPT], ["wo"], 1, BackTranslator(),
                                       DualSettings(1, 1, 1.0, "online", SamplingParams(), None, 256))
    with pytest.raises(ValueError, match="not a translation request"):
        group_back_translation_rewards(["Ann has 3 pens, gets 4. How many?"], ["7"], 1, BackTranslator(), settings())


def test_dupo_scores_translations_with_the_back_translation_dual() -> None:
    engine = BackTranslator()
    ctx = AlgoContext(tokenizer=None, reward_fn=None, is_correct=None, timer=PhaseTimer(), device=torch.device("cpu"),
                      engines={"policy": engine})
    algo = DuPO(DuPOConfig(algo="dupo", dual_task="translation", dual_selection="none", dual_solver="policy",
                           task="word-translation", group_size=2), ctx)
    rewards, stats = algo.dual_rewards([PROMPT] * 2, ["wo ol ra nu", "xx"], step=1)
    assert rewards == pytest.approx([1.0, math.exp(-1)]) and stats.groups == 1
    assert engine.questions and all("Translate Zed to English" in q for q in engine.questions)
