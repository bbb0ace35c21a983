"""A citation-linked paper/brief pair miner, after the Sci2Pol-Corpus pipeline (Wu et al., 2025, "Sci2Pol:
Evaluating and Fine-tuning LLMs on Scientific-to-Policy Brief Generation", arXiv 2509.21493).

1. ``candidate_pairs``: policy documents citing at most ``max_citations`` papers (paper: 3), one pair per
   cited paper found in the paper table; the rest are rejects with the reason.
2. Coarse judge: the paper's abstract and the document -> ``{"relevant": true|false}`` (decoded under
   ``RELEVANCE_SCHEMA``; ``structured=False``, the ablation: free text after a prefilled ``{"relevant":``).
3. Long documents (over ``long_chars`` characters; the paper: 10 pages): the executive summary becomes
   the pseudo-brief and the remainder the pseudo-paper; a long document with no executive summary is
   rejected.
4. Fine judge: the full texts -> ``{"relevant": ...}``; split pairs whose halves are too similar
   (word 5-gram Jaccard above ``max_split_similarity``) are rejected first (the paper's o3 similarity
   criterion, replaced here by a measured one).
5. Polishing: a k-shot prompt (k style examples, paper: 3 expert pairs) rewrites the document as a brief.

Outputs carry ``prompt`` (instruction + paper text) and ``answer`` (the polished brief), the columns
``--task dataset`` reads, next to ``{pair_id, paper_id, paper_text, policy_id, brief_raw,
brief_polished, filter_verdicts, models}``. Judges here are any project engine (the paper used o3).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from data_pipelines.common.dedup import shingles
from data_pipelines.common.runner import Process, Reject
from data_pipelines.sci2pol.bench import _encode
from posttrain.engines.base import SamplingParams

_EXEC = re.compile(r"executive summary\s*\n(.*?)(?:\n\s*\n|$)(.*)", re.IGNORECASE | re.DOTALL)
SFT_INSTRUCTION = "Write a policy brief for policy makers based on this scientific paper.\n\n"
RELEVANCE_SCHEMA = json.dumps({"type": "object", "properties": {"relevant": {"type": "boolean"}},
                               "required": ["relevant"], "additionalProperties": False})
RELEVANCE_TOKENS = 24  # '{"relevant": false}' and its stop token even one character a token, with room for whitespace


def candidate_pairs(documents: list[dict], papers: dict[str, dict], max_citations: int) -> tuple[list[dict], list[dict]]:
    """(pairs, rejects) of step 1; a document must have ``policy_id``, ``text`` and ``cited_papers``."""
    pairs, rejects = [], []
    for n, doc in enumerate(documents):
        where = doc.get("policy_id", f"record {n}")
        cited = doc.get("cited_papers")
        if not isinstance(doc.get("text"), str) or not doc["text"].strip():
            rejects.append({"policy_id": where, "reason": "field 'text' missing or empty"})
        elif not isinstance(cited, list) or not cited:
            rejects.append({"policy_id": where, "reason": "field 'cited_papers' missing or empty"})
        elif len(cited) > max_citations:
            rejects.append({"policy_id": where, "reason": f"cites {len(cited)} papers > max {max_citations}"})
        else:
            found = [p for p in cited if p in papers]
            if not found:
                rejects.append({"policy_id": where, "reason": f"none of the cited papers {cited} is in the paper table"})
            for paper_id in found:
                paper = papers[paper_id]
                pairs.append({"pair_id": f"{where}:{paper_id}", "policy_id": where, "paper_id": paper_id,
                              "abstract": paper.get("abstract") or paper["text"][:1500],
                              "paper_text": paper["text"], "brief_raw": doc["text"]})
    return pairs, rejects


def split_long(pair: dict, long_chars: int) -> dict | Reject:
    """Step 3: short documents pass unchanged; long ones become (executive summary, remainder)."""
    if len(pair["brief_raw"]) <= long_chars:
        return {**pair, "split": False}
    found = _EXEC.search(pair["brief_raw"])
    if not found or not found.group(1).strip() or not found.group(2).strip():
        return Reject(f"long document ({len(pair['brief_raw'])} chars > {long_chars}) without an executive summary")
    return {**pair, "split": True, "brief_raw": found.group(1).strip(), "paper_text": found.group(2).strip()}


def jaccard(a: str, b: str) -> float:
    sa, sb = shingles(a), shingles(b)
    return len(sa & sb) / len(sa | sb) if sa | sb else 0.0


def relevance_prompt(paper: str, document: str) -> str:
    return (f"Scientific paper:\n{paper}\n\nPolicy document:\n{document}\n\nIs the policy document mainly about "
            'this paper\'s research? Answer with one JSON object: {"relevant": true} or {"relevant": false}.')


def parse_relevance(text: str) -> bool:
    found = re.search(r'["\']?relevant["\']?\s*:\s*(true|false)', text, re.IGNORECASE)
    if not found:
        raise ValueError("no 'relevant': true|false in the judge output")
    return found.group(1).lower() == "true"


def polish_prompt(document: str, examples: list[tuple[str, str]]) -> str:
    shots = "\n\n".join(f"Example paper:\n{p}\nExample brief:\n{b}" for p, b in examples)
    return (f"{shots}\n\nRewrite the following policy document as a brief in the style of the examples. Keep "
            f"every fact and citation; change only structure and style.\nDocument:\n{document}\nBrief:")


def _generate(engine, prompt: str, prefill: str | None, max_new_tokens: int, temperature: float = 0.0,
              seed: int | None = None, json_schema: str | None = None) -> str:
    ids, _ = _encode(engine, prompt, prefill, max_new_tokens)
    text = engine.generate([ids], SamplingParams(max_new_tokens=max_new_tokens, temperature=temperature,
                                                 seed=seed, json_schema=json_schema)).texts[0]
    return (prefill or "") + text


def make_judge_stage(engine_factory: Callable, judge_name: str, which: str, retries: int,
                     long_chars: int = 0, max_split_similarity: float = 1.0, structured: bool = True) -> Process:
    """Stage 2 (``which="coarse"``: abstract vs. document) or stage 4 (``"fine"``: full texts, after the
    split of step 3 and its similarity check). ``structured``: verdicts decoded under
    ``RELEVANCE_SCHEMA``; else free text after a prefilled ``{"relevant":``."""
    engine = engine_factory()
    schema, prefill = (RELEVANCE_SCHEMA, None) if structured else (None, '{"relevant":')

    def verdict(paper: str, document: str) -> tuple[bool | None, int]:
        for attempt in range(retries + 1):
            text = _generate(engine, relevance_prompt(paper, document), prefill, RELEVANCE_TOKENS,
                             0.0 if attempt == 0 else 0.7, attempt or None, schema)
            try:
                return parse_relevance(text), attempt + 1
            except ValueError:
                continue
        return None, retries + 1

    def process(pairs: list[dict]) -> list[dict | Reject]:
        out: list[dict | Reject] = []
        for pair in pairs:
            if which == "fine":
                pair = split_long(pair, long_chars)
                if isinstance(pair, Reject):
                    out.append(pair)
                    continue
                similarity = jaccard(pair["paper_text"], pair["brief_raw"]) if pair["split"] else None
                if similarity is not None and similarity > max_split_similarity:
                    out.append(Reject(f"split halves too similar (jaccard {similarity:.2f} > {max_split_similarity})"))
                    continue
            paper = pair["abstract"] if which == "coarse" else pair["paper_text"]
            relevant, attempts = verdict(paper, pair["brief_raw"])
            verdicts = {**pair.get("filter_verdicts", {}), which: {"relevant": relevant, "attempts": attempts}}
            if relevant is None:
                out.append(Reject(f"{which} judge output unparsable after {attempts} attempts"))
            elif not relevant:
                out.append(Reject(f"{which} judge: document is not about the paper"))
            else:
                out.append({**pair, "filter_verdicts": verdicts,
                            "models": {**pair.get("models", {}), f"{which}_judge": judge_name}})
        return out

    return process


def make_polish_stage(engine_factory: Callable, model_name: str, examples: list[tuple[str, str]],
                      max_new_tokens: int) -> Process:
    """Stage 5: the k-shot rewrite; an empty rewrite is a reject. Adds the SFT columns."""
    engine = engine_factory()

    def process(pairs: list[dict]) -> list[dict | Reject]:
        out: list[dict | Reject] = []
        for pair in pairs:
            polished = _generate(engine, polish_prompt(pair["brief_raw"], examples), None, max_new_tokens).strip()
            if not polished:
                out.append(Reject("polishing produced an empty brief"))
                continue
            record = {k: pair[k] for k in ("pair_id", "paper_id", "paper_text", "policy_id", "brief_raw")}
            out.append({**record, "brief_polished": polished, "filter_verdicts": pair["filter_verdicts"],
                        "models": {**pair["models"], "polisher": model_name},
                        "prompt": SFT_INSTRUCTION + pair["paper_text"], "answer": polished})
        return out

    return process

