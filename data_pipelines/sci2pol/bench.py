"""Sci2Pol-Bench runner: load a release-format folder (``taskN.jsonl`` rows ``{id, query, answer}``),
generate with the model under test, judge tasks 7-15, score every task with a bootstrap SE.

Stages run on ``StageRunner`` (resumable part files); both the generation and the judge stage also go
through a ``ResultCache`` keyed by (task, id, model, prompt hash), so a killed run resumes and a rerun,
even into a fresh output folder, makes no model call. Decoding is greedy (the paper uses provider
defaults), so reruns are identical. Judge outputs are validated; a parse failure is retried up to
``retries`` times with seeded sampling, and what still fails is counted per task (``judge_failures``)
and left out of that task's mean, never scored as zero.

The paper a judge of tasks 11-14 reads is found as the release's ``Eval.py`` finds it: the ``task16.jsonl``
record with the same id (``release_papers``), its ``Scientific Research Paper:`` block up to three newlines,
else its whole query; no item is dropped for want of a paper. Deviations: a record's own ``paper`` field
(the built-in items carry one) comes first, and an id that ``task16.jsonl`` lacks (or a bench folder without
it) reads the item's own query the same way, where ``Eval.py`` would judge against an empty paper. Task 15
reads its own query, as ``Eval.py``.
The judge is asked for schema-constrained JSON (``judge.rubric_schema`` as ``SamplingParams.json_schema``:
the engine decodes only documents with the rubric's keys and value ranges), an aid the paper's judge did
not need; ``structured=False`` (``--no_structured_output``) is the ablation: free text whose answer is
prefilled with ``{"<first criterion>":`` so that small judges start the JSON object the rubric asks for.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from data_pipelines.common.runner import Process
from data_pipelines.sci2pol.judge import (
    RUBRICS,
    judge_calls,
    judge_prompt,
    parse_judgement,
    rubric_schema,
    task_score,
)
from data_pipelines.sci2pol.scoring import bootstrap_se, extract_label, micro_f1
from posttrain.common.jsonl import iter_jsonl
from posttrain.engines.base import SamplingParams
from posttrain.models.chat import render_chat

STAGES = {"autocompletion": [1, 2, 3, 4], "understanding": [5, 6], "summarization": [7, 8, 9, 10],
          "generation": [11, 12, 13, 14, 15], "verification": [16, 17, 18]}
CLASSIFICATION = {f"task{n}" for n in (1, 2, 3, 4, 5, 6, 16, 17, 18)}
PAPER_TASKS = {"task11", "task12", "task13", "task14"}
"""The tasks whose paper ``Eval.py`` looks up in ``task16.jsonl`` by id."""
_PAPER = re.compile(r"Scientific Research Paper:\s*(.+?)\n{3}", re.DOTALL)


def load_bench(bench_dir: str | Path, tasks: list[str] | None = None) -> dict[str, list[dict]]:
    """``taskN`` -> rows of ``bench_dir/taskN.jsonl``; a bad row raises naming file, line and field
    (``posttrain.common.jsonl``)."""
    folder = Path(bench_dir)
    names = tasks or sorted((p.stem for p in folder.glob("task*.jsonl")), key=lambda s: int(s[4:]))
    if not names:
        raise ValueError(f"{folder}: no taskN.jsonl files")
    out: dict[str, list[dict]] = {}
    for name in names:
        path = folder / f"{name}.jsonl"
        rows = []
        for line_no, row in iter_jsonl(path):
            missing = [field for field in ("id", "query", "answer") if field not in row]
            if missing:
                raise ValueError(f"{path}, line {line_no}: missing field {missing[0]!r}")
            rows.append({**row, "task": name, "id": str(row["id"])})
        out[name] = rows
    return out


def gold_label(answer: str) -> str:
    """The label of a gold answer: a JSON ``verdict`` (task 18) or the stripped string."""
    try:
        obj = json.loads(answer)
    except (json.JSONDecodeError, TypeError):
        return str(answer).strip()
    return str(obj["verdict"]).strip() if isinstance(obj, dict) and "verdict" in obj else str(answer).strip()


def paper_block(query: str) -> str:
    """The ``Scientific Research Paper:`` block of a query (up to the first three newlines), else the whole
    query (``Eval.py``'s fallback)."""
    found = _PAPER.search(query)
    return found.group(1).strip() if found else query


def release_papers(bench_dir: str | Path) -> dict[str, str]:
    """id -> ``paper_block`` of each ``task16.jsonl`` record in ``bench_dir`` (empty without that file): where
    ``Eval.py`` finds the paper of tasks 11-14."""
    path = Path(bench_dir) / "task16.jsonl"
    if not path.exists():
        return {}
    return {row["id"]: paper_block(row["query"]) for row in load_bench(bench_dir, ["task16"])["task16"]}


def paper_of(row: dict, papers: dict[str, str] | None = None) -> str:
    """The paper text of a task 11-15 item (module docstring): its ``paper`` field, else for tasks 11-14 the
    ``papers`` entry (``release_papers``) of its id, else ``paper_block`` of its own query."""
    if isinstance(row.get("paper"), str):
        return row["paper"]
    if row["task"] in PAPER_TASKS and papers and row["id"] in papers:
        return papers[row["id"]]
    return paper_block(row["query"])


def prompt_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class ResultCache:
    """Append-only JSONL of ``key -> value``, flushed and fsynced per entry; a torn last line is ignored."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.entries: dict[str, dict] = {}
        if self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue
                self.entries[entry["key"]] = entry["value"]

    @staticmethod
    def key(task: str, item_id: str, model: str, prompt: str) -> str:
        return f"{task}|{item_id}|{model}|{prompt_hash(prompt)}"

    def get(self, key: str) -> dict | None:
        return self.entries.get(key)

    def put(self, key: str, value: dict) -> None:
        self.entries[key] = value
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"key": key, "value": value}) + "\n")
            handle.flush()
            os.fsync(handle.fileno())


def _encode(engine, text: str, prefill: str | None, max_new_tokens: int) -> tuple[list[int], bool]:
    """Chat-rendered prompt ids that leave ``max_new_tokens`` of the model's context free, and whether they had
    to be truncated. Only the user message is cut, from its start (the instructions are at its end); the chat
    template around it and the prefill stay whole. ``ValueError`` when the template and prefill alone leave no
    room."""
    from data_pipelines.common.backends import tokenize

    def render(content: str) -> list[int]:
        messages = [{"role": "user", "content": content}]
        if prefill is None:
            return tokenize(engine.tokenizer, render_chat(engine.tokenizer, messages))
        return tokenize(engine.tokenizer, render_chat(engine.tokenizer, messages + [
            {"role": "assistant", "content": prefill}], add_generation_prompt=False, continue_final=True))

    ids = render(text)
    limit = getattr(getattr(getattr(engine, "model", None), "config", None), "max_position_embeddings", None)
    if not limit or len(ids) + max_new_tokens <= limit:
        return ids, False
    content = tokenize(engine.tokenizer, text)
    while len(ids) + max_new_tokens > limit:  # re-tokenising the cut text may shift a token or two: repeat
        excess = len(ids) + max_new_tokens - limit
        if excess >= len(content):
            raise ValueError(f"the chat template and prefill take {len(ids) - len(content)} tokens: with "
                             f"{max_new_tokens} new tokens nothing of the prompt fits the {limit}-token context")
        content = content[excess:]
        ids = render(engine.tokenizer.decode(content))
    return ids, True


def make_generate_stage(engine_factory: Callable, model_name: str, cache_path: str, max_new_tokens: int,
                        open_tokens: int) -> Process:
    """Stage: bench rows -> rows with ``response`` (greedy; ``open_tokens`` for tasks 7-15)."""
    engine = engine_factory()
    cache = ResultCache(cache_path)

    def process(rows: list[dict]) -> list[dict]:
        out: list[dict | None] = [None] * len(rows)
        todo: dict[int, list[tuple[int, list[int], str, bool]]] = {}
        for i, row in enumerate(rows):
            budget = open_tokens if row["task"] not in CLASSIFICATION else max_new_tokens
            key = ResultCache.key(row["task"], row["id"], model_name, f"max_new_tokens={budget}\n{row['query']}")
            hit = cache.get(key)
            if hit is not None:
                out[i] = {**row, **hit}
                continue
            ids, truncated = _encode(engine, row["query"], None, budget)
            todo.setdefault(budget, []).append((i, ids, key, truncated))
        for budget, group in todo.items():
            result = engine.generate([g[1] for g in group], SamplingParams(max_new_tokens=budget, temperature=0.0))
            for (i, _, key, truncated), text in zip(group, result.texts):
                value = {"response": text, "prompt_truncated": truncated}
                cache.put(key, value)
                out[i] = {**rows[i], **value}
        return out  # type: ignore[return-value]

    return process


def _judge_sources(row: dict, rubric_name: str, papers: dict[str, str] | None) -> dict:
    task = row["task"]
    if task in ("task7", "task8", "task9", "task10"):
        return {"source": row["query"], "candidate": row["response"]}
    paper = paper_of(row, papers)
    if rubric_name == "task11_importance":
        return {"source": paper, "candidate": None}
    if task == "task15":
        return {"source": paper, "candidate": row["response"], "reference": row["answer"]}
    return {"source": paper, "candidate": row["response"]}


def make_judge_stage(engine_factory: Callable, judge_name: str, cache_path: str, max_new_tokens: int,
                     retries: int, structured: bool = True, papers: dict[str, str] | None = None) -> Process:
    """Stage: generated rows -> rows with ``judgements``, ``judge_attempts`` and ``score`` (None plus
    ``judge_error`` when the judge output stayed invalid after ``retries`` retries). ``structured``: the
    judge decodes under the rubric's JSON Schema; else free text after a prefilled first key. ``papers``:
    the release's papers by id (``release_papers``) for tasks 11-14."""
    engine = engine_factory()
    cache = ResultCache(cache_path)

    def judge_one(row: dict, rubric_name: str) -> dict:
        prompt = judge_prompt(rubric_name, **_judge_sources(row, rubric_name, papers))
        schema = rubric_schema(rubric_name) if structured else None
        prefill = None if structured else '{"' + next(iter(RUBRICS[rubric_name].criteria)) + '":'
        key = ResultCache.key(rubric_name, row["id"], judge_name, f"max_new_tokens={max_new_tokens} "
                              f"retries={retries} structured={structured}\n{prompt}")
        hit = cache.get(key)
        if hit is not None:
            return hit
        ids, _ = _encode(engine, prompt, prefill, max_new_tokens)
        errors = []
        for attempt in range(retries + 1):
            params = (SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0, json_schema=schema)
                      if attempt == 0 else SamplingParams(max_new_tokens=max_new_tokens, temperature=0.7,
                                                          seed=attempt, json_schema=schema))
            text = (prefill or "") + engine.generate([ids], params).texts[0]
            try:
                value = {"values": parse_judgement(text, rubric_name), "attempts": attempt + 1, "raw": text}
                break
            except ValueError as err:
                errors.append(str(err))
        else:
            value = {"values": None, "attempts": retries + 1, "raw": text, "error": "; ".join(errors)}
        cache.put(key, value)
        return value

    def process(rows: list[dict]) -> list[dict]:
        out: list[dict] = []
        for row in rows:
            if row["task"] in CLASSIFICATION:
                out.append(row)
                continue
            results = {name: judge_one(row, name) for name in judge_calls(row["task"])}
            failed = [f"{n}: {r['error']}" for n, r in results.items() if r["values"] is None]
            judgements = {n: r["values"] for n, r in results.items()}
            out.append({**row, "judgements": judgements,
                        "judge_attempts": sum(r["attempts"] for r in results.values()),
                        "judge_error": "; ".join(failed) or None,
                        "score": None if failed else task_score(row["task"], judgements)})
        return out

    return process


def score_tasks(rows: list[dict], resamples: int = 1000, seed: int = 42, rejected: list[dict] = ()) -> dict:
    """Per-task scores (0-100) with bootstrap SEs, stage means and the overall mean of stage means.
    ``rejected``: the input items a stage refused; each still counts in its task's ``n`` (``rejected``), as a
    wrong label for a classification task and as unscored for a judged one, so ``n`` is every input item:
    scored + judge failures + rejected."""
    by_task: dict[str, list[dict]] = {}
    for row in rows:
        by_task.setdefault(row["task"], []).append(row)
    for row in rejected:
        by_task.setdefault(row["task"], []).append({**row, "response": None, "rejected": True})
    tasks: dict[str, dict] = {}
    for task, items in sorted(by_task.items(), key=lambda kv: int(kv[0][4:])):
        if task in CLASSIFICATION:
            gold = [gold_label(r["answer"]) for r in items]
            labels = sorted(set(gold))
            raw_to_label = {str(r["answer"]).strip(): gold_label(r["answer"]) for r in items}
            strict = [raw_to_label.get((r["response"] or "").strip()) for r in items]  # the paper: raw match
            robust = [None if r["response"] is None else extract_label(r["response"], labels) for r in items]
            g = np.array(gold, dtype=object)
            entry = {"n": len(items), "rejected": sum(1 for r in items if r.get("rejected")), "metric": "micro_f1",
                     "labels": labels}
            for name, pred in (("strict", strict), ("robust", robust)):
                p = np.array(pred, dtype=object)
                entry[name] = 100 * micro_f1(gold, pred)
                entry[f"{name}_se"] = 100 * bootstrap_se(len(items), lambda ix, g=g, p=p: micro_f1(
                    list(g[ix]), list(p[ix])), resamples, seed)
            entry["score"], entry["se"] = entry["robust"], entry["robust_se"]
        else:
            scores = np.array([r["score"] for r in items if r.get("score") is not None], dtype=float)
            entry = {"n": len(items), "metric": "judge", "judged": len(scores),
                     "rejected": sum(1 for r in items if r.get("rejected")),
                     "judge_failures": sum(1 for r in items if r.get("score") is None and not r.get("rejected")),
                     "judge_calls": sum(len(judge_calls(task)) for r in items if not r.get("rejected")),
                     "judge_attempts": sum(r.get("judge_attempts", 0) for r in items),
                     "score": float(scores.mean()) if len(scores) else None,
                     "se": bootstrap_se(len(scores), lambda ix, scores=scores: float(scores[ix].mean()), resamples,
                                        seed)}
            if task == "task15":
                entry["at_least_60"] = int((scores >= 60).sum())
                entry["at_least_80"] = int((scores >= 80).sum())
        tasks[task] = entry
    stages = {}
    for stage, numbers in STAGES.items():
        values = [tasks[f"task{n}"]["score"] for n in numbers
                  if f"task{n}" in tasks and tasks[f"task{n}"]["score"] is not None]
        stages[stage] = float(np.mean(values)) if values else None
    present = [v for v in stages.values() if v is not None]
    return {"tasks": tasks, "stages": stages, "overall": float(np.mean(present)) if present else None,
            "rubrics": sorted(RUBRICS)}
