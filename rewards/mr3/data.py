"""Build mR3-style SFT data from preference / rating / correctness records, with the paper's curriculum.

It lives with the reward model, not in ``data_pipelines``: the ``reward-mr3`` recipe's warm start
(``rewards.mr3.tiny``) draws its examples through it, and ``rewards`` sits below ``data_pipelines``.

Input: JSONL files or Hugging Face datasets whose records look like one of

- pairwise preference: ``{"prompt", "chosen", "rejected"}`` or ``{"prompt", "responses": [a, b], "label":
  "A" | "B" | 0 | 1 | "Assistant A" | "tie"}``;
- pointwise rating: ``{"prompt", "response", "score": 4}`` (scale = the rubric's numeric keys, default 1..5);
- binary correctness: ``{"prompt", "response", "label": true | "false" | 0 | 1}`` (the label is the
  verdict in the rubric's terms);
- binary safety: ``{"prompt", "response", "label": "safe" | "unsafe" | "harmful" | "harmless"}`` (or no
  ``response``, to judge the request itself): mR3's PolyGuard formats (``safety-response`` /
  ``safety-prompt``), whose verdict ``true`` means *harmful*, so ``unsafe`` -> ``"true"`` and
  ``safe`` -> ``"false"``;
- graded preference: ``{"template": "pairwise-graded", "prompt", "responses": [a, b], "label": 1..7}``
  (HelpSteer3: 1 = the first far better, 4 = equal);
- multiple choice: ``{"template": "mcq", "prompt": question, "options": "A. ...\\nB. ...", "label": "B"}``;

each optionally with ``mode``, ``template`` (a format of ``rewards.mr3.official``), ``good_verdict`` (binary,
required with a custom rubric), ``rubric`` (dict or JSON string), ``task_description``, ``language``,
``reasoning`` (a teacher's reasoning trace), ``explanation``, ``id`` and difficulty signals
(``teacher_consistency`` in [0, 1] = share of teacher settings/tries that were right, higher = easier;
or ``difficulty`` in [0, 1], higher = harder; ``teacher_correct``: false drops the record;
``easy`` / ``small_model_pass_rate`` = 1.0 marks an "easy" record that ``drop_easy`` removes).

Output: one JSON object per line, ``{"id", "prompt", "answer", "messages", "mode", "language",
"difficulty", "length"}``. ``prompt`` is the *fully rendered* judge prompt (chat template applied, ending
with ``<think>`` and, for target-language reasoning, mR3's forcing sentence), like mR3's HF data
(LLaMA-Factory ``template: empty``); ``answer`` is the target completion
``reasoning\\n</think>\\n\\n{"explanation": ..., "score": ...}``. ``messages`` holds the un-rendered
system + user turns for trainers that apply their own template.

Training with ``--algo sft``: ``posttrain/train.py --algo sft --task dataset --dataset OUT.jsonl
--raw_prompts true --shuffle false``: ``--raw_prompts`` takes ``prompt`` as *raw text* (not wrapped in the
chat template again: it is already rendered) and ``answer`` as the target, with the loss on the answer
tokens plus EOS; ``--shuffle false`` keeps the file order, so the curriculum ordering survives.

Curriculum (mR3, arXiv 2510.01146): orderings ``random``, ``easy_to_hard`` (the paper's final choice),
``hard_to_easy``, ``english_first``, ``english_first_easy_to_hard``, ``english_first_hard_to_easy``.
Difficulty = teacher consistency first (less consistent = harder), then token length (longer = harder).

Deviations: no teacher distillation happens here (records without ``reasoning`` get an empty trace and
a short templated explanation; plug in teacher traces to reproduce mR3); the 3-setting agreement filter
is applied through ``teacher_correct``; the HelpSteer3 "golden prompt" role-play is not reproduced.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posttrain.common.cli_help import CommandParser
from posttrain.common.files import atomic_write_jsonl
from posttrain.common.jsonl import JsonlError, iter_jsonl
from posttrain.models.tiny import build_tokenizer
from rewards.mr3.official import FORMATS
from rewards.mr3.templates import EvalItem, build_messages, format_verdict, render_prompt, stable_rng

CURRICULA = ("random", "easy_to_hard", "hard_to_easy", "english_first", "english_first_easy_to_hard",
             "english_first_hard_to_easy")
SETTINGS = {"en-en": ("en", "en"), "en-tgt": ("en", "tgt")}
"""Prompt / reasoning languages. Target-language prompts need mR3's translated templates, not shipped."""


class RecordError(ValueError):
    """A record that cannot be turned into an example; the message names the record."""


@dataclass
class SFTExample:
    id: str
    prompt: str
    answer: str
    messages: list[dict[str, str]]
    mode: str
    language: str
    difficulty: float
    length: int

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


# -- loading -------------------------------------------------------------------------------------------

def load_records(source: str, split: str = "train") -> Iterator[dict[str, Any]]:
    """Records from a JSONL / JSON file or a Hugging Face dataset id (loaded with ``datasets``)."""
    path = Path(source)
    if path.suffix in (".jsonl", ".json") or path.is_file():
        if path.suffix == ".json":
            with path.open() as handle:
                data = json.load(handle)
            yield from (data if isinstance(data, list) else data.get("data", []))
            return
        try:
            for _, record in iter_jsonl(path):
                yield record
        except JsonlError as err:
            raise RecordError(str(err)) from None
        return
    import datasets

    yield from datasets.load_dataset(source, split=split)


# -- one record -> one item ------------------------------------------------------------------------

def _first(record: dict[str, Any], *names: str) -> Any:
    for name in names:
        if record.get(name) is not None:
            return record[name]
    return None


def _rubric(record: dict[str, Any], where: str) -> dict[str, str] | None:
    rubric = record.get("rubric")
    if rubric is None:
        return None
    if isinstance(rubric, str):
        try:
            rubric = json.loads(rubric)
        except json.JSONDecodeError:
            raise RecordError(f"{where}: 'rubric' is a string but not a JSON object") from None
    if not isinstance(rubric, dict) or len(rubric) < 2:
        raise RecordError(f"{where}: 'rubric' must map at least two score values to descriptions")
    return {str(k): str(v) for k, v in rubric.items()}


def _pair_label(label: Any, where: str) -> str:
    text = str(label).strip().lower()
    mapping = {"a": "Assistant A", "assistant a": "Assistant A", "0": "Assistant A", "1": "Assistant B",
               "b": "Assistant B", "assistant b": "Assistant B", "tie": "Tie", "both bad": "Both Bad"}
    if text not in mapping:
        raise RecordError(f"{where}: pairwise label {label!r} is not A/B/0/1/tie")
    return mapping[text]


def _graded_label(label: Any, where: str) -> str:
    """A HelpSteer3-style 1-7 preference (1 = the first response far better, 4 = equal)."""
    try:
        return str(int(float(label)))
    except (TypeError, ValueError):
        raise RecordError(f"{where}: graded pairwise label {label!r} is not a number 1-7") from None


SAFETY_LABELS = {"safe": True, "harmless": True, "benign": True, "unsafe": False, "harmful": False}
"""Safety labels: whether the judged text is safe (the verdict they mean depends on the rubric's polarity)."""


def _is_safety_label(label: Any) -> bool:
    return str(label).strip().lower() in SAFETY_LABELS


def _binary_gold(label: Any, item: EvalItem, where: str) -> str:
    """The gold verdict of a binary record: a true/false label is the verdict itself; a safety label is
    the item's good verdict when safe and the other one when not (``true`` = harmful in mR3's rubrics)."""
    text = str(label).strip().lower()
    if text in SAFETY_LABELS:
        if not item.format().name.startswith("safety-"):
            raise RecordError(f"{where}: label {label!r} is a safety label but template {item.format().name!r} "
                              "is not a safety format (use safety-response or safety-prompt)")
        good = item.binary_good_verdict()
        return good if SAFETY_LABELS[text] else next(v for v in item.score_values() if v != good)
    if text in ("true", "1", "yes", "correct"):
        return "true"
    if text in ("false", "0", "no", "incorrect"):
        return "false"
    raise RecordError(f"{where}: binary label {label!r} is not true/false or safe/unsafe")


def _item(where: str, mode: str, prompt: str, responses: list[str], **fields: Any) -> EvalItem:
    """An ``EvalItem``, its errors (template, responses, good verdict, gold) naming the record."""
    try:
        return EvalItem(mode, prompt, responses, **fields)
    except ValueError as err:
        raise RecordError(f"{where}: {err}") from None


def record_to_item(record: dict[str, Any], index: int, setting: str = "en-en",
                   seed: int = 0) -> tuple[EvalItem, str]:
    """``(item, gold score)`` for one record; raises ``RecordError`` naming the record when it cannot."""
    rid = str(record.get("id", index))
    where = f"record {index} (id {rid})"
    prompt = _first(record, "prompt", "instruction", "question", "input")
    if not isinstance(prompt, str) or not prompt:
        raise RecordError(f"{where}: needs a non-empty 'prompt' (or 'instruction' / 'question')")
    prompt_lang, reason_lang = SETTINGS[setting]
    common: dict[str, Any] = {"rubric": _rubric(record, where), "task_description": record.get("task_description"),
                              "language": record.get("language") or "en", "prompt_language": prompt_lang,
                              "reasoning_language": reason_lang, "key": rid, "template": record.get("template"),
                              "good_verdict": record.get("good_verdict")}
    mode = record.get("mode")
    if mode is None and record.get("template") in FORMATS:
        mode = FORMATS[record["template"]].mode
    if mode is None:
        if "chosen" in record or isinstance(record.get("responses"), list) and len(record["responses"]) == 2:
            mode = "pairwise"
        elif _first(record, "score", "rating") is not None:
            mode = "pointwise"
        elif _first(record, "label", "correct") is not None:
            mode = "binary"
        else:
            raise RecordError(f"{where}: cannot tell the format; give 'mode' or chosen/rejected, score or label")
    if mode == "pairwise":
        if "chosen" in record:
            chosen, rejected = record.get("chosen"), record.get("rejected")
            if not isinstance(chosen, str) or not isinstance(rejected, str):
                raise RecordError(f"{where}: 'chosen' and 'rejected' must both be strings")
            first = stable_rng(rid, seed).random() < 0.5  # place the chosen one at A or B reproducibly
            responses = [chosen, rejected] if first else [rejected, chosen]
            gold = "Assistant A" if first else "Assistant B"
        else:
            responses = record.get("responses")
            if not (isinstance(responses, list) and len(responses) == 2 and all(isinstance(r, str) for r in responses)):
                raise RecordError(f"{where}: pairwise needs 'responses': [A, B] (strings) or chosen/rejected")
            label = _first(record, "label", "preference", "winner")
            gold = _graded_label(label, where) if common["template"] == "pairwise-graded" else _pair_label(label, where)
        item = _item(where, "pairwise", prompt, list(responses), **common)
    elif mode == "binary":
        label = _first(record, "label", "correct")
        response = _first(record, "response", "completion", "output")
        if common["template"] is None and _is_safety_label(label):
            common["template"] = "safety-prompt" if response is None else "safety-response"
        if common["template"] == "safety-prompt":
            responses = []
        elif isinstance(response, str):
            responses = [response]
        else:
            raise RecordError(f"{where}: binary needs a string 'response'")
        item = _item(where, "binary", prompt, responses, reference=record.get("reference"), **common)
        gold = _binary_gold(label, item, where)
    elif mode == "pointwise":
        raw = _first(record, "score", "rating", "label")
        if common["template"] == "mcq":
            options = record.get("options")
            if not isinstance(options, str) or not options:
                raise RecordError(f"{where}: a multiple-choice record needs its 'options' as one string")
            gold = str(raw).strip()
            item = _item(where, "pointwise", prompt, [options], gold=gold, **common)
        else:
            response = _first(record, "response", "completion", "output")
            if not isinstance(response, str):
                raise RecordError(f"{where}: pointwise needs a string 'response'")
            try:
                gold = str(int(float(raw)))
            except (TypeError, ValueError):
                raise RecordError(f"{where}: pointwise score {raw!r} is not a number") from None
            item = _item(where, "pointwise", prompt, [response], reference=record.get("reference"), **common)
    else:
        raise RecordError(f"{where}: mode {mode!r} is not pointwise, pairwise or binary")
    values = item.score_values(seed)
    if gold not in values:
        raise RecordError(f"{where}: gold score {gold!r} is not one of the rubric's values {values}")
    return item, gold


def _difficulty(record: dict[str, Any]) -> float:
    """In [0, 1], higher = harder: 1 - teacher_consistency, or the record's own ``difficulty``."""
    if record.get("teacher_consistency") is not None:
        return 1.0 - float(record["teacher_consistency"])
    if record.get("difficulty") is not None:
        return float(record["difficulty"])
    return 0.5


def _is_easy(record: dict[str, Any]) -> bool:
    if record.get("easy") is True:
        return True
    rate = record.get("small_model_pass_rate")
    return rate is not None and float(rate) >= 1.0


def build_examples(records: Iterable[dict[str, Any]], tokenizer: Any = None, style: str = "mr3",
                   setting: str = "en-en", seed: int = 0, drop_easy: bool = False,
                   skip_bad: bool = False, errors: list[str] | None = None) -> list[SFTExample]:
    """SFT examples from records (see the module doc). ``skip_bad`` collects bad records in ``errors``
    instead of raising; records with ``teacher_correct: false`` or (with ``drop_easy``) easy ones are
    filtered out."""
    if setting not in SETTINGS:
        raise ValueError(f"setting {setting!r} is not one of {list(SETTINGS)}")
    out: list[SFTExample] = []
    for index, record in enumerate(records):
        if record.get("teacher_correct") is False or (drop_easy and _is_easy(record)):
            continue
        try:
            item, gold = record_to_item(record, index, setting, seed)
        except RecordError as err:
            if not skip_bad:
                raise
            if errors is not None:
                errors.append(str(err))
            continue
        reasoning = str(record.get("reasoning") or "")
        explanation = str(record.get("explanation") or _stub_explanation(item, gold, seed))
        prompt = render_prompt(item, tokenizer, style, seed)
        answer = format_verdict(gold, explanation, reasoning, style=style)
        length = _length(tokenizer, prompt + answer)
        messages = build_messages(item, seed) if style == "mr3" else [{"role": "user", "content": prompt}]
        out.append(SFTExample(id=item.key, prompt=prompt, answer=answer, messages=messages, mode=item.mode,
                              language=item.language or "en", difficulty=_difficulty(record), length=length))
    return out


def _stub_explanation(item: EvalItem, gold: str, seed: int) -> str:
    """The rubric's description of the gold score (or the gold option), for records without a teacher's."""
    return item.resolved_rubric(seed).get(gold) or f"The correct option is {gold}."


def _length(tokenizer: Any, text: str) -> int:
    if tokenizer is None:
        return len(text.split())
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


# -- curriculum ------------------------------------------------------------------------------------

def order_examples(examples: list[SFTExample], curriculum: str = "easy_to_hard", seed: int = 0) -> list[SFTExample]:
    """Order examples by one of ``CURRICULA``. Difficulty sorts by (teacher inconsistency, length);
    ties keep a seeded random order so equal-difficulty examples are still mixed."""
    if curriculum not in CURRICULA:
        raise ValueError(f"curriculum {curriculum!r} is not one of {list(CURRICULA)}")
    rng = random.Random(seed)
    shuffled = list(examples)
    rng.shuffle(shuffled)
    if curriculum == "random":
        return shuffled
    english_first = curriculum.startswith("english_first")
    direction = curriculum.removeprefix("english_first").strip("_") or None

    def key(ex: SFTExample) -> tuple:
        lang = 0 if english_first and ex.language in ("en", "English") else (1 if english_first else 0)
        if direction is None:
            return (lang,)
        sign = 1 if direction == "easy_to_hard" else -1
        return (lang, sign * ex.difficulty, sign * ex.length)

    return sorted(shuffled, key=key)  # stable: ties keep the shuffled order


def write_jsonl(examples: Iterable[SFTExample], path: str | os.PathLike) -> Path:
    """Write atomically (temp file + rename), so a crash never leaves a half-written dataset."""
    target = Path(path)
    atomic_write_jsonl(target, (ex.to_json() for ex in examples))
    return target


def main(argv: list[str] | None = None) -> int:
    """``python -m rewards.mr3.data INPUT OUTPUT.jsonl``: build an mR3 SFT set in curriculum order."""
    p = CommandParser(prog="python -m rewards.mr3.data", description=main.__doc__)
    p.add_argument("input", help="JSONL/JSON file or Hugging Face dataset id")
    p.add_argument("output", help="output JSONL path")
    p.add_argument("--split", default="train")
    p.add_argument("--curriculum", default="easy_to_hard", choices=CURRICULA)
    p.add_argument("--setting", default="en-en", choices=list(SETTINGS), help="prompt/reasoning languages")
    p.add_argument("--style", default="mr3", choices=["mr3", "compact"])
    p.add_argument("--tokenizer", default=None, help="tokenizer whose chat template renders prompts ('tiny' = ours)")
    p.add_argument("--drop_easy", action="store_true")
    p.add_argument("--skip_bad", action="store_true", help="skip (and count) bad records instead of failing")
    p.add_argument("--limit", type=int, default=0, help="keep at most N examples (after filtering), 0 = all")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    tokenizer = None
    if args.tokenizer == "tiny":
        tokenizer = build_tokenizer()
    elif args.tokenizer:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    errors: list[str] = []
    try:
        examples = build_examples(load_records(args.input, args.split), tokenizer, args.style, args.setting,
                                  args.seed, args.drop_easy, args.skip_bad, errors)
    except RecordError as err:
        print(f"error: {err}")
        return 2
    if args.limit:
        examples = random.Random(args.seed).sample(examples, min(args.limit, len(examples)))
    examples = order_examples(examples, args.curriculum, args.seed)
    path = write_jsonl(examples, args.output)
    print(f"wrote {len(examples)} examples to {path} ({args.curriculum}); skipped {len(errors)} bad records")
    for err in errors[:5]:
        print("  skipped:", err)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
