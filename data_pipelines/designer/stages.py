"""DESIGNER's LLM stages as runner ``Process`` factories: annotation, design-logic extraction,
retrieve-then-generate's generation step, and long-CoT responses.

DESIGNER (Liu et al., 2025). Each ``make_*_stage(engine, ...)`` takes an engine (a ``GenerationEngine``
or a ``load_backend`` spec, loaded once per process) and returns ``process(records) -> list[dict |
Reject]``: one structured call per record (``structured.generate_structured``: JSON replies decoded
under their schema unless ``CallSettings.structured`` is off, validated, retried ``retries`` times), a record whose every attempt fails is a ``Reject`` naming the reason. Outputs carry
``attempts``. The paper uses Qwen3-30B-A3B (annotation), DeepSeek-R1 (extraction, generation) and a
Qwen3-235B thinking model (responses); here one engine of the user's choice does all four.
"""

from __future__ import annotations

from dataclasses import dataclass

from data_pipelines.common.runner import Reject
from data_pipelines.designer import prompts
from data_pipelines.designer.builtin import QUESTION_TYPES
from data_pipelines.designer.mermaid import MermaidError, extract_flowchart, parse_flowchart
from data_pipelines.designer.sampling import DIFFICULTIES
from data_pipelines.designer.structured import (
    InvalidOutput,
    Request,
    check_multiple_choice,
    generate_structured,
    parse_json_object,
    require_string,
)
from posttrain.engines.base import GenerationEngine, SamplingParams


@dataclass(frozen=True)
class CallSettings:
    """Sampling of one stage: new-token cap, first-attempt temperature (0 = greedy), retries, seed, and
    whether JSON replies are decoded under their schema (else free text after a prefix: the ablation)."""

    max_new_tokens: int
    temperature: float = 0.0
    retries: int = 2
    seed: int = 0
    structured: bool = True

    def schema(self, json_schema: str) -> str | None:
        """``json_schema`` when replies are schema-constrained, else None."""
        return json_schema if self.structured else None

    def params(self) -> SamplingParams:
        return SamplingParams(max_new_tokens=self.max_new_tokens, temperature=self.temperature)


def _load(spec: str, device: str) -> GenerationEngine:
    from data_pipelines.common.backends import load_backend

    return load_backend(spec, device=device, cached=True)


def resolve_engine(engine: GenerationEngine | str, device: str = "cpu") -> GenerationEngine:
    """An engine object as is; a spec loaded (once per process and spec)."""
    return _load(engine, device) if isinstance(engine, str) else engine


def _run(engine, requests: list[Request], call: CallSettings, batch: list[dict], build) -> list[dict | Reject]:
    outcomes = generate_structured(engine, requests, call.params(), call.retries, call.seed)
    out: list[dict | Reject] = []
    for record, outcome in zip(batch, outcomes, strict=True):
        if not outcome.ok:
            out.append(Reject(f"invalid output after {outcome.attempts} attempts: {outcome.reason}"))
        else:
            out.append({**build(record, outcome.value), "attempts": outcome.attempts})
    return out


def make_annotate_stage(engine: GenerationEngine | str, call: CallSettings, disciplines: tuple[str, ...],
                        question_field: str = "question", device: str = "cpu"):
    """Stage A: labels ``discipline`` / ``difficulty`` / ``question_type`` from the allowed sets."""
    def validate(reply: str) -> dict:
        obj = parse_json_object(reply)
        return {"discipline": require_string(obj, "discipline", disciplines),
                "difficulty": require_string(obj, "difficulty", DIFFICULTIES),
                "question_type": require_string(obj, "question_type", QUESTION_TYPES)}

    def process(batch: list[dict]) -> list[dict | Reject]:
        llm = resolve_engine(engine, device)
        schema = call.schema(prompts.annotate_schema(disciplines))
        requests = [Request(*prompts.annotate_messages(r[question_field], disciplines), validate, schema)
                    for r in batch]
        return _run(llm, requests, call, batch, lambda r, v: {**r, **v})
    return process


def validate_flowchart(reply: str) -> str:
    """The reply's flowchart, parsed (``InvalidOutput`` with the parser's message if it is not one)."""
    try:
        chart = extract_flowchart(reply)
        parse_flowchart(chart)
    except MermaidError as err:
        raise InvalidOutput(f"not a Mermaid flowchart: {err}") from None
    return chart


def make_extract_stage(engine: GenerationEngine | str, call: CallSettings, question_field: str = "question",
                       device: str = "cpu"):
    """Stage B: one design logic (a validated Mermaid flowchart) per seed question, as ``logic_mermaid``."""
    def process(batch: list[dict]) -> list[dict | Reject]:
        llm = resolve_engine(engine, device)
        requests = [Request(*prompts.extract_messages(r[question_field], r["discipline"], r["question_type"]),
                            validate_flowchart) for r in batch]
        return _run(llm, requests, call, batch, lambda r, chart: {**r, "logic_mermaid": chart})
    return process


def generation_validator(candidates: list[dict], id_key: str = "id"):
    """Checks a generation reply: ``selected_id`` among the candidates, a question of at least 5 words,
    a reference answer, and for a multiple-choice candidate consistent options and key."""
    by_id = {c[id_key]: c for c in candidates}

    def validate(reply: str) -> dict:
        obj = parse_json_object(reply)
        selected = require_string(obj, "selected_id")
        if selected not in by_id:
            raise InvalidOutput(f"selected_id {selected!r} is not one of the candidates {sorted(by_id)}")
        question = require_string(obj, "question")
        if len(question.split()) < 5:
            raise InvalidOutput(f"question {question!r} is shorter than 5 words")
        answer = require_string(obj, "reference_answer")
        if by_id[selected].get("question_type") == "multiple-choice":
            check_multiple_choice(question, answer)
        return {"selected_id": selected, "question": question, "reference_answer": answer}
    return validate


def make_generate_stage(engine: GenerationEngine | str, call: CallSettings, mode: str, device: str = "cpu"):
    """Stage E (fine selection + generation): a record holds ``segment``, ``discipline`` and
    ``candidates`` (retrieved logics or exemplars, each ``{id, text, question_type, difficulty}``)."""
    if mode not in ("logic", "exemplar"):
        raise ValueError(f"mode must be 'logic' or 'exemplar', got {mode!r}")

    def build(record: dict, value: dict) -> dict:
        chosen = next(c for c in record["candidates"] if c["id"] == value["selected_id"])
        return {"segment_id": record["segment_id"], "source_id": record["source_id"],
                "discipline": record["discipline"], "logic_id": chosen["id"],
                "logic_mermaid": chosen["text"] if mode == "logic" else None,
                "question_type": chosen["question_type"], "difficulty": chosen["difficulty"],
                "candidate_ids": [c["id"] for c in record["candidates"]],
                "question": value["question"], "reference_answer": value["reference_answer"]}

    def process(batch: list[dict]) -> list[dict | Reject]:
        llm = resolve_engine(engine, device)
        requests = []
        for r in batch:
            listing = [(c["id"], c["text"]) for c in r["candidates"]]
            schema = call.schema(prompts.generate_schema([c["id"] for c in r["candidates"]], call.max_new_tokens))
            requests.append(Request(*prompts.generate_messages(r["segment"], r["discipline"], listing, mode),
                                    generation_validator(r["candidates"]), schema))
        return _run(llm, requests, call, batch, build)
    return process


def validate_response(reply: str) -> dict:
    """A long-CoT reply: non-empty reasoning; ``final_answer`` from a last 'Final answer:' line, or None."""
    text = reply.strip()
    if len(text.split()) < 3:
        raise InvalidOutput("response shorter than 3 words")
    final = None
    for line in reversed(text.splitlines()):
        if line.lower().strip().startswith("final answer:"):
            final = line.split(":", 1)[1].strip() or None
            break
    return {"response_cot": text, "final_answer": final}


def make_respond_stage(engine: GenerationEngine | str, call: CallSettings, device: str = "cpu"):
    """Stage F's response synthesis: a step-by-step response per question (``response_cot``)."""
    def process(batch: list[dict]) -> list[dict | Reject]:
        llm = resolve_engine(engine, device)
        requests = [Request(*prompts.respond_messages(r["question"]), validate_response) for r in batch]
        return _run(llm, requests, call, batch, lambda r, v: {**r, **v})
    return process
