"""Text2Grad span -> token rewards: fuzzy matching, the per-task rules by hand, and token offsets on the
character, byte-BPE (SmolLM2) and SentencePiece (built here) tokenizers, unicode included."""

from __future__ import annotations

import math

import pytest

from posttrain.algos.span_reward.alignment import (
    SpanRule,
    char_rewards,
    length_decay,
    match_span,
    score_characters,
    token_char_spans,
    token_rewards,
)
from posttrain.models.tiny import build_tokenizer
from posttrain.tasks.span_feedback import SpanFeedback

TEXT = "I saw the quick brown fox jump over the lazy dog today"


def spans(good=(), poor=()):
    return SpanFeedback("spans", "c", good=tuple(good), poor=tuple(poor))


# -- fuzzy matching ---------------------------------------------------------------------------------
def test_exact_and_normalised_matches():
    assert match_span("quick brown", TEXT) == (10, 21)
    assert match_span("  The Quick, brown!  ", TEXT) == (6, 21)  # case, punctuation, surrounding space


def test_window_match_at_the_thresholds():
    assert match_span("the quick brown fax", TEXT) == (6, 25)  # one letter off: ratio ~0.9
    assert match_span("alpha beta gamma delta epsilon zeta", TEXT) is None  # under 0.5 everywhere
    assert match_span("", TEXT) is None and match_span("fox", "") is None


def test_a_misquoted_step_covers_its_wrong_result():
    # issue 41: the critic quotes 12-3=9 for the wrong step 12-3=8; the match is on "12-3=", and the extent must
    # also cover the result digit (the part that is wrong), past the best window's end too
    response = "7+5=12,12-3=8,8+8=16"
    start, end = match_span("12-3=9", response)
    assert response[start:end] == "12-3=8"
    assert match_span("12-3=9", "7+5=12,12-3=8") == (7, 13)  # at the response's end
    assert match_span("x2-3=8", "12-3=8,8+8=16") == (0, 6)  # a misquote at the front: extended backwards
    rewards = char_rewards(spans(poor=["12-3=9"]), response, "spans")
    assert rewards[response.index("=8") + 1] == -1.0 and rewards[response.index(",8+8")] == 0.0


def test_short_spans_get_the_relaxed_floor():
    # 'cta' vs 'cat' has ratio 2/3: under 0.7, accepted because spans under 5 characters start at 0.5
    assert match_span("cta", "a cat") is not None


def test_front_and_back_half_fallbacks():
    front = "the quick brown fox ZZZZZZZZZZZZZZZZZZZZZZZZ"  # back half garbage: located from the front
    assert match_span(front, TEXT) == (6, min(len(TEXT), 6 + len(front)))
    back = "QQQQQQQQQQQQQQQQQQQQQQQQ over the lazy dog"  # front half garbage: located from the back half
    start, end = match_span(back, TEXT)
    assert TEXT[start:end].endswith("over the lazy dog") and end == TEXT.index(" today")


# -- per-task rules ----------------------------------------------------------------------------------
def test_spans_rule_by_hand():
    assert char_rewards(spans(["ab"], ["ef"]), "ab cd ef", "spans") == [1, 1, 0, 0, 0, 0, -1, -1]
    assert char_rewards(spans(["ab cd"]), "ab cd", "spans") == [1, 1, 1, 1, 1]  # interior space in the span


def test_poor_wins_overlaps():
    assert char_rewards(spans(["abc"], ["bc"]), "abcd", "spans") == [1, -1, -1, 0]


def test_point_one_fallback_when_no_span_matches():
    scores = score_characters(spans(["zzzzqqqq xxxxyyyy"]), "ab cd", "spans")
    assert scores.rewards == [0.1, 0.1, 0.0, 0.1, 0.1] and scores.matched == 0 and scores.unmatched == 1


def test_nothing_marked_is_all_zero():
    assert char_rewards(spans(), "ab cd", "spans") == [0.0] * 5
    assert char_rewards(spans(), "ab cd", SpanRule("paper", empty=0.1)) == [0.1, 0.1, 0.0, 0.1, 0.1]


def test_code_rule_by_hand():
    code = "x = 1\ny = 2"
    fb = SpanFeedback("code", "c", wrong=("y = 2",), improvable=("x = 1",))
    assert char_rewards(fb, code, "code") == [0] * 5 + [0] + [-1] * 5
    assert char_rewards(SpanFeedback("code", "fine"), code, "code") == [1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1]


def test_words_rule_and_length_decay_by_hand():
    assert length_decay(48) == pytest.approx(1 / (1 + math.exp(-6)))
    assert length_decay(54) == pytest.approx(0.5) and length_decay(60) == pytest.approx(1 / (1 + math.exp(6)))
    fb = SpanFeedback("words", "c", word_scores=(("good", 1), ("junk", 0), ("bad", -1)))
    rewards = char_rewards(fb, "good, bad!", "words")  # 'junk' is not in the response: skipped
    assert rewards[:5] == [pytest.approx(length_decay(0))] * 5 and rewards[5] == 0
    assert rewards[6:] == [pytest.approx(-length_decay(1))] * 4
    long = " ".join(f"w{i}" for i in range(60))
    scored = score_characters(SpanFeedback("words", "c", word_scores=tuple((f"w{i}", 1) for i in range(60))),
                              long, "words")
    assert scored.matched == 60
    start = long.index("w54 ")
    assert scored.rewards[start] == pytest.approx(0.5)  # t is the word index: word 54 weighs 0.5


# -- tokens -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def smollm2():
    from posttrain.models.loading import load_tokenizer
    from posttrain.models.pretrained import resolve_model_name

    return load_tokenizer(resolve_model_name("smollm2-135m"))


@pytest.fixture(scope="module")
def sentencepiece():
    from tokenizers import SentencePieceBPETokenizer
    from transformers import PreTrainedTokenizerFast

    backend = SentencePieceBPETokenizer()
    backend.train_from_iterator(["The café serves crème brûlée.", "Emoji 🙂 and 世界 here.", "12+7=19,19-5=14"] * 20,
                                vocab_size=120, min_frequency=1, special_tokens=["<unk>", "<s>", "</s>"])
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>")


def check_spans(tokenizer, ids):
    """Spans are within the decoded text, in order, cover every non-special character, specials empty."""
    text = tokenizer.decode(ids, skip_special_tokens=True)
    result = token_char_spans(tokenizer, ids)
    assert len(result) == len(ids)
    covered = set()
    for tid, (a, b) in zip(ids, result):
        assert 0 <= a <= b <= len(text)
        if tid in tokenizer.all_special_ids:
            assert a == b
        covered |= set(range(a, b))
    assert covered == set(range(len(text)))
    return text, result


UNICODE = "The café 🙂 serves 世界 crème"


def test_char_tokenizer_spans_and_rewards():
    tok = build_tokenizer()
    ids = tok("ab cd ef", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    text, result = check_spans(tok, ids)
    assert result == [(i, i + 1) for i in range(8)] + [(8, 8)]
    assert token_rewards(spans(["ab"], ["ef"]), text, ids, tok, "spans") == [1, 1, 0, 0, 0, 0, -1, -1, 0.0]


def test_byte_bpe_offsets_unicode_and_boundary_tokens(smollm2):
    ids = smollm2(UNICODE, add_special_tokens=False)["input_ids"] + [smollm2.eos_token_id]
    text, result = check_spans(smollm2, ids)
    assert text == UNICODE
    emoji = [k for k, (a, b) in enumerate(result) if text[a:b].strip() == "🙂"]
    assert len(emoji) >= 1 and all(result[k] == result[emoji[0]] or text[result[k][0]] == " " for k in emoji)
    assert any("世" in text[a:b] for a, b in result) and any("é" in text[a:b] for a, b in result)
    rewards = token_rewards(spans(poor=["caf"]), text, ids, smollm2, "spans")
    cafe = next(k for k, (a, b) in enumerate(result) if "café" in text[a:b])
    assert rewards[cafe] == pytest.approx(-3 / 4)  # ' café': 3 of its 4 letters in the span, space left out
    assert rewards[-1] == 0.0  # eos


def test_byte_bpe_non_canonical_ids_use_the_incremental_fallback(smollm2):
    ids = smollm2("hel", add_special_tokens=False)["input_ids"] + smollm2("lo 🙂 world", add_special_tokens=False)[
        "input_ids"]
    assert ids != smollm2("hello 🙂 world", add_special_tokens=False)["input_ids"]
    text, result = check_spans(smollm2, ids)
    assert text == "hello 🙂 world"
    assert [text[a:b] for a, b in result][:2] == ["hel", "lo"]
    rewards = token_rewards(spans(good=["hello"]), text, ids, smollm2, "spans")
    assert rewards[:2] == [1.0, 1.0] and rewards[-1] == 0.0


def test_sentencepiece_offsets_unicode(sentencepiece):
    text = "The café 🙂 世界 12+7=19,19-5=14"
    ids = sentencepiece(text, add_special_tokens=False)["input_ids"] + [sentencepiece.eos_token_id]
    decoded, result = check_spans(sentencepiece, ids)
    rewards = token_rewards(spans(good=["café"], poor=["19-5=14"]), decoded, ids, sentencepiece, "spans")
    for (a, b), r in zip(result, rewards):
        piece = decoded[a:b].strip()
        if piece == "café":
            assert r == 1.0
        if piece and decoded.index("19-5=14") <= a and b <= len(decoded):
            assert r == -1.0


def test_response_text_must_be_the_decoded_completion():
    tok = build_tokenizer()
    ids = tok("ab", add_special_tokens=False)["input_ids"]
    with pytest.raises(ValueError, match="not the decoded completion"):
        token_rewards(spans(["ab"]), " ab", ids, tok, "spans")
