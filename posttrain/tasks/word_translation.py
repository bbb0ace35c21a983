"""A synthetic translation task: DuPO's translation dual (back-translation scored by BLEU) offline and tiny.

``word-translation`` prompts read "Translate English to Zed: ann sees big dog"; Zed is a made-up language
whose translation is a reversible transformation of the English: every word is replaced through a fixed
dictionary (``ZED``) and the word order is reversed ("ta wo kil gub"). The English sentences are
name + verb + adjective + noun, 4 x 4 x 4 x 4 = 256 of them, shuffled once with a fixed seed; the first 64
are held out, so the test sentences are word combinations the training split never shows (every word is
seen). Reward and verifier: exact match of the translation (whitespace normalised).

``word-translation-sft`` is the warm start's supervised data (recipe ``causal-word-translation``): every
training sentence once as the primal question (English to Zed) and once as the dual question (Zed to
English, the back-translation DuPO asks). The primal's distractor, which the recipe's label noise teaches on
half the visits, is a systematic error: the words translated but their order not reversed. The dual targets
stay clean, as in ``word-arithmetic``: DuPO presumes a dual solver more reliable than the primal one.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from posttrain.tasks.base import TASKS, Example, head_tail_split
from posttrain.tasks.dual_questions import TRANSLATION_TEMPLATE

SOURCE_LANGUAGE, TARGET_LANGUAGE = "English", "Zed"
NAMES = ("ann", "bob", "sam", "eva")
VERBS = ("sees", "gets", "has", "hugs")
ADJECTIVES = ("red", "big", "old", "new")
NOUNS = ("cat", "dog", "cup", "pen")
ZED: dict[str, str] = {
    "ann": "nu", "bob": "ko", "sam": "zi", "eva": "ep",
    "sees": "kil", "gets": "mo", "has": "ra", "hugs": "fu",
    "red": "ol", "big": "gub", "old": "ve", "new": "is",
    "cat": "ta", "dog": "wo", "cup": "ke", "pen": "pa",
}
"""The Zed word of every English word (one-to-one, so the translation is reversible)."""


def to_zed(sentence: str, reverse: bool = True) -> str:
    """The Zed translation of an English ``sentence``: each word through ``ZED``, the order reversed (without
    ``reverse``: the warm start's systematic error)."""
    words = [ZED[word] for word in sentence.split()]
    return " ".join(reversed(words) if reverse else words)


def sentences(seed: int = 1234) -> list[str]:
    """All 256 English sentences, shuffled with ``random.Random(seed)``."""
    all_sentences = [" ".join(words) for words in itertools.product(NAMES, VERBS, ADJECTIVES, NOUNS)]
    random.Random(seed).shuffle(all_sentences)
    return all_sentences


def translation_prompt(sentence: str, source: str = SOURCE_LANGUAGE, target: str = TARGET_LANGUAGE) -> str:
    return TRANSLATION_TEMPLATE.format(source=source, target=target, text=sentence)


def same_text(completion: str, answer: str) -> bool:
    """Exact match up to whitespace."""
    return completion.split() == answer.split()


class _ExactMatch:
    """Exact-match reward and verifier shared by both word-translation tasks."""

    def reward(self, prompts: list[str], completions: list[str], **columns: list[Any]) -> list[float | None]:
        """1.0 for a completion equal (up to whitespace) to ``columns['answer']``, else 0.0."""
        return [1.0 if same_text(c, a) else 0.0 for c, a in zip(completions, columns["answer"], strict=True)]

    def is_correct(self, completion: str, example: Example) -> bool:
        return same_text(completion, example.answer)


@TASKS.register("word-translation")
class WordTranslationTask(_ExactMatch):
    """English to Zed (``ZED``, word order reversed); 64 sentences held out."""

    name = "word-translation"

    def __init__(self, test_size: int = 64, seed: int = 1234) -> None:
        self.test_size, self.seed = test_size, seed

    def sentences(self, split: str) -> list[str]:
        """The English sentences of ``split`` (``test``: the first ``test_size`` of ``sentences``)."""
        return head_tail_split(sentences(self.seed), split, self.test_size, self.name)

    def split(self, name: str) -> list[Example]:
        return [Example(prompt=translation_prompt(s), answer=to_zed(s)) for s in self.sentences(name)]


@TASKS.register("word-translation-sft")
class WordTranslationSFTTask(_ExactMatch):
    """word-translation's sentences as primal (English to Zed) and dual (Zed to English) questions."""

    name = "word-translation-sft"

    def split(self, name: str) -> list[Example]:
        """Each sentence of word-translation's ``name`` split as a primal question (distractor: the order not
        reversed) and as a dual question (clean)."""
        examples = []
        for sentence in WordTranslationTask().sentences(name):
            zed = to_zed(sentence)
            examples.append(Example(translation_prompt(sentence), zed, {"distractor": to_zed(sentence, reverse=False)}))
            examples.append(Example(translation_prompt(zed, TARGET_LANGUAGE, SOURCE_LANGUAGE), sentence,
                                    {"distractor": sentence}))
        return examples

    def distractor(self, example: Example) -> str:
        """The systematic error of the warm start's noisy targets (module docstring)."""
        return example.columns["distractor"]
