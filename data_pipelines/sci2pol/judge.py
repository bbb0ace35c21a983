"""Sci2Pol-Bench LLM-judge rubrics (tasks 7-15), judge-output parsing and validation, and score formulas.

Rubrics and formulas follow the paper's evaluation (Wu et al., 2025, arXiv 2509.21493), reworded:

* tasks 7-10 (reference-free summaries): clarity, accuracy, coverage, overall, each 1-5; score = sum x 5;
  the judge is told which section the summary restates (``SUMMARY_SECTIONS``, ``Eval.py``'s names);
* task 11: call 1 (paper only) gives importance weights 0-1 of five components, call 2 the candidate's
  quality 0-1 on them; score = sum_c importance_c x quality_c / 5 x 100;
* task 12: five criteria 0-1, score = sum / 5 x 100;
* task 13: score = (2 clarity + 2 technicality + terms) / 5 x 100;
* task 14: four criteria 0-1, score = sum / 4 x 100;
* task 15 (sees the expert brief): four criteria 0-5, score = sum x 5.

``rubric_schema`` is the JSON Schema of a rubric's answer, which the judge stage asks the engine to
constrain decoding to (``SamplingParams.json_schema``). ``parse_judgement`` strips code fences, tries
single-quote JSON, and validates keys and ranges (the backstop for free-text judges and truncated
replies); a failure is an error message (the caller retries a bounded number of times and counts what
still fails).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

TASK11_COMPONENTS = ("background", "existing_problem", "consequence", "attention", "supporting_detail")


@dataclass(frozen=True)
class Rubric:
    """What a judge call asks: criteria with their descriptions and the value range."""

    criteria: dict[str, str]
    low: float
    high: float
    integer: bool = False


SUMMARY = Rubric({"clarity": "easy to read for a policy maker", "accuracy": "faithful to the passage",
                  "coverage": "keeps the passage's key points", "overall": "overall quality as a brief section"},
                 1, 5, integer=True)
SUMMARY_SECTIONS = {"task7": "Policy Problem", "task8": "Scientific Research Findings",
                    "task9": "Scientific Research Study Methods", "task10": "Policy Implications"}
"""The section type each summarization task's candidate restates, as ``Eval.py`` names it to its judge."""
RUBRICS: dict[str, Rubric] = {
    **{f"task{n}": SUMMARY for n in (7, 8, 9, 10)},
    "task11_importance": Rubric({c: f"how much the paper's policy problem rests on its {c.replace('_', ' ')}"
                                 for c in TASK11_COMPONENTS}, 0, 1),
    "task11_quality": Rubric({c: f"how well the candidate states the {c.replace('_', ' ')}"
                              for c in TASK11_COMPONENTS}, 0, 1),
    "task12": Rubric({"completeness": "reports all main findings", "importance": "leads with the most important ones",
                      "accuracy": "every finding matches the paper", "summarization": "summarises, not copies",
                      "specification": "states scope and conditions of the findings"}, 0, 1),
    "task13": Rubric({"clarity": "clear about what was done and why",
                      "technicality": "technical level suited to policy readers",
                      "terms": "explains technical terms in plain language"}, 0, 1),
    "task14": Rubric({"accuracy": "nothing invented beyond the paper", "coverage": "covers the paper's implications",
                      "conciseness": "concise and distinct points", "alignment": "matches the paper's intent"}, 0, 1),
    "task15": Rubric({"contextual_depth": "situates the research in its policy context",
                      "hallucination_risk": "high means safe: no unsupported claims",
                      "readability": "readable, with a policy brief's tone",
                      "actionability": "gives concrete, usable recommendations"}, 0, 5, integer=True),
}


def judge_calls(task: str) -> list[str]:
    """The rubric names a task's judging needs, in call order."""
    if task == "task11":
        return ["task11_importance", "task11_quality"]
    return [task] if task in RUBRICS else []


def rubric_schema(rubric_name: str) -> str:
    """The JSON Schema (as text) of a judge answer to ``rubric_name``: exactly the rubric's keys, each an
    integer or number within the rubric's range."""
    rubric = RUBRICS[rubric_name]
    value = {"type": "integer" if rubric.integer else "number", "minimum": rubric.low, "maximum": rubric.high}
    return json.dumps({"type": "object", "properties": dict.fromkeys(rubric.criteria, value),
                       "required": list(rubric.criteria), "additionalProperties": False})


def judge_prompt(rubric_name: str, *, source: str, candidate: str | None, reference: str | None = None) -> str:
    """The judge's user message: material first, then the instructions and the JSON keys to return."""
    rubric = RUBRICS[rubric_name]
    parts = [f"Source material:\n{source.strip()}"]
    if reference is not None:
        parts.append(f"Expert-written policy brief (reference):\n{reference.strip()}")
    if candidate is not None:
        parts.append(f"Candidate text to grade:\n{candidate.strip()}")
    kind = "an integer" if rubric.integer else "a number"
    lines = "\n".join(f"- {key}: {desc}" for key, desc in rubric.criteria.items())
    what = "Rate the source paper" if candidate is None else "Grade the candidate"
    if rubric_name in SUMMARY_SECTIONS:
        what = (f"The candidate is a summary, in policy-brief style, that restates the "
                f"{SUMMARY_SECTIONS[rubric_name]} described in the source material. {what}")
    parts.append(f"{what} strictly; be conservative. Give each criterion {kind} from {rubric.low:g} to "
                 f"{rubric.high:g}:\n{lines}\nAnswer with one JSON object with exactly these keys and nothing else.")
    return "\n\n".join(parts)


def _loads(text: str) -> object:
    text = re.sub(r"```(?:json)?", "", text).strip()
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if not match:
        raise ValueError("no JSON object in the judge output")
    body = match.group(0)
    try:
        return json.loads(body)
    except json.JSONDecodeError:
        try:
            return json.loads(body.replace("'", '"'))
        except json.JSONDecodeError as err:
            raise ValueError(f"invalid JSON ({err.msg})") from None


def parse_judgement(text: str, rubric_name: str) -> dict[str, float]:
    """The validated criterion -> value dict of a judge output; ``ValueError`` naming what is wrong."""
    rubric = RUBRICS[rubric_name]
    obj = _loads(text)
    if not isinstance(obj, dict):
        raise ValueError(f"judge output is a {type(obj).__name__}, not an object")
    missing = [k for k in rubric.criteria if k not in obj]
    if missing:
        raise ValueError(f"missing keys {missing}")
    values: dict[str, float] = {}
    for key in rubric.criteria:
        value = obj[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"key {key!r} is {value!r}, not a number")
        if not rubric.low <= value <= rubric.high:
            raise ValueError(f"key {key!r} = {value} outside [{rubric.low:g}, {rubric.high:g}]")
        if rubric.integer and value != int(value):
            raise ValueError(f"key {key!r} = {value} is not an integer")
        values[key] = float(value)
    return values


def task_score(task: str, judgements: dict[str, dict[str, float]]) -> float:
    """The 0-100 score of one candidate from its validated judgements (keyed by rubric name)."""
    if task in ("task7", "task8", "task9", "task10"):
        return sum(judgements[task].values()) * 5
    if task == "task11":
        importance, quality = judgements["task11_importance"], judgements["task11_quality"]
        return sum(importance[c] * quality[c] for c in TASK11_COMPONENTS) / 5 * 100
    if task == "task12":
        return sum(judgements[task].values()) / 5 * 100
    if task == "task13":
        j = judgements[task]
        return (2 * j["clarity"] + 2 * j["technicality"] + j["terms"]) / 5 * 100
    if task == "task14":
        return sum(judgements[task].values()) / 4 * 100
    if task == "task15":
        return sum(judgements[task].values()) * 5
    raise ValueError(f"{task} is not a judged task")
