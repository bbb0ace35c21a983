"""DESIGNER's prompts (annotation, design-logic extraction, logic-guided and exemplar-guided generation,
long-CoT response), each with the assistant-turn prefix that starts the structured reply, and the JSON
Schemas of the two JSON replies (annotation, generation), which the engine decodes under.

Paraphrased from the stage descriptions of DESIGNER (Liu et al., 2025); the paper's exact prompts are
not public. Each prompt opens with one worked example exchange (a one-shot demonstration, as the paper's
few-shot difficulty labelling does), which small models need to follow the format at all.
``PROMPT_VERSIONS`` names each stage's prompt; it is part of the stage's config (a changed prompt
invalidates that stage's stored results only) and of every output record.
"""

from __future__ import annotations

import json

from data_pipelines.designer.builtin import QUESTION_TYPES
from data_pipelines.designer.sampling import DIFFICULTIES

PROMPT_VERSIONS = {"annotate": "designer-v2", "extract": "designer-v2", "generate": "designer-v3",
                   "respond": "designer-v2"}

_GENERATE_EXAMPLE = (("Friction opposes sliding. A crate needs a push larger than the friction force mu m g "
                     "before it moves."), [("L-q900", ("flowchart TD\n    A[Pick a law] --> B[Give values]\n"
                                                     "    B --> C[Ask for the unknown]"))],
                     ('{"selected_id": "L-q900", "question": "A 10 kg crate rests on a floor with friction '
                     'coefficient 0.3. What is the smallest horizontal push that moves it (g = 10 m/s^2)?", '
                     '"reference_answer": "30 N"}'))

_ANNOTATE_EXAMPLE = ("A 2 kg block slides down a frictionless 30 degree incline. What is its acceleration?",
                     '{"discipline": "Physics", "difficulty": "Medium", "question_type": "calculation"}')
_LOGIC_EXAMPLE = ("flowchart TD\n    A[Choose a core law] --> B[Build a concrete setting with given values]\n"
                  "    B --> C[Hide one quantity as the unknown]\n    C --> D[Require a multi-step derivation]\n"
                  "    D --> E[Check the answer is unique]")


def annotate_messages(question: str, disciplines: tuple[str, ...]) -> tuple[list[dict[str, str]], str]:
    text = _annotate_text(question, disciplines)
    example = _annotate_text(_ANNOTATE_EXAMPLE[0], disciplines)
    return ([{"role": "user", "content": example}, {"role": "assistant", "content": _ANNOTATE_EXAMPLE[1]},
             {"role": "user", "content": text}], '{"discipline": "')


def annotate_schema(disciplines: tuple[str, ...]) -> str:
    """The annotation reply: one of the allowed values for each of the three labels."""
    return _object_schema({"discipline": {"enum": list(disciplines)}, "difficulty": {"enum": list(DIFFICULTIES)},
                           "question_type": {"enum": list(QUESTION_TYPES)}})


def generate_schema(candidate_ids: list[str], max_new_tokens: int) -> str:
    """The generation reply: a selected id among the candidates', a question of at most 2 characters per
    token of the budget and an answer of at most 1 (about 3/4 of the budget at ~4 characters a token), so
    that the document closes within it."""
    return _object_schema({"selected_id": {"enum": list(candidate_ids)},
                           "question": {"type": "string", "minLength": 1, "maxLength": 2 * max_new_tokens},
                           "reference_answer": {"type": "string", "minLength": 1, "maxLength": max_new_tokens}})


def _object_schema(properties: dict) -> str:
    return json.dumps({"type": "object", "properties": properties, "required": list(properties),
                       "additionalProperties": False})


def _annotate_text(question: str, disciplines: tuple[str, ...]) -> str:
    return (f"Label this exam question.\nQuestion: {question}\n\n"
            f"discipline: one of {', '.join(disciplines)}\n"
            f"difficulty: one of {', '.join(DIFFICULTIES)}\n"
            f"question_type: one of {', '.join(QUESTION_TYPES)}\n"
            'Reply with JSON only: {"discipline": "...", "difficulty": "...", "question_type": "..."}')


def extract_messages(question: str, discipline: str, qtype: str) -> tuple[list[dict[str, str]], str]:
    example = _extract_text(_ANNOTATE_EXAMPLE[0], "Physics", "calculation")
    return ([{"role": "user", "content": example},
             {"role": "assistant", "content": f"```mermaid\n{_LOGIC_EXAMPLE}\n```"},
             {"role": "user", "content": _extract_text(question, discipline, qtype)}],
            "```mermaid\nflowchart TD\n    A[")


def _extract_text(question: str, discipline: str, qtype: str) -> str:
    return (f"Here is a {discipline} {qtype} exam question.\nQuestion: {question}\n\n"
            "Infer how its designer built it: the objective, the knowledge points, the reasoning path, how the "
            "answer is fixed and how distractors are added. Abstract this into reusable steps that do not "
            "mention the question's specific content, as a Mermaid flowchart (flowchart TD, nodes like "
            "A[step] --> B[step]).")


def generate_messages(segment: str, discipline: str, candidates: list[tuple[str, str]],
                      mode: str) -> tuple[list[dict[str, str]], str]:
    """``candidates``: (id, text) of the retrieved design logics (``mode="logic"``) or exemplar questions
    (``mode="exemplar"``, the paper's "w/o design logic" ablation)."""
    example_segment, example_candidates, example_reply = _GENERATE_EXAMPLE
    if mode == "exemplar":
        example_candidates = [("E-q900", "A 5 kg box is pushed with 20 N on ice. What is its acceleration?")]
        example_reply = example_reply.replace("L-q900", "E-q900")
    return ([{"role": "user", "content": _generate_text(example_segment, "Physics", example_candidates, mode)},
             {"role": "assistant", "content": example_reply},
             {"role": "user", "content": _generate_text(segment, discipline, candidates, mode)}],
            '{"selected_id": "')


def _generate_text(segment: str, discipline: str, candidates: list[tuple[str, str]], mode: str) -> str:
    if mode == "logic":
        listing = "\n\n".join(f"[{cid}]\n{text}" for cid, text in candidates)
        task = ("Pick the design logic that suits the text best and write one graduate-level exam question "
                "that strictly follows that logic's steps and is grounded in the text")
    else:
        listing = "\n\n".join(f"[{cid}] {text}" for cid, text in candidates)
        task = ("Pick the example question that suits the text best and write one new graduate-level exam "
                "question in its style that is grounded in the text")
    kind = "Design logics" if mode == "logic" else "Example questions"
    return (f"Discipline: {discipline}\nSource text:\n{segment}\n\n{kind}:\n{listing}\n\n{task}, plus a concise "
            "reference answer. A multiple-choice question lists options A) B) C) D) and its answer is a letter.\n"
            'Reply with JSON only: {"selected_id": "...", "question": "...", "reference_answer": "..."}')


def demonstration_questions() -> list[str]:
    """The questions of the prompts' worked examples: a small model often copies them verbatim, so the
    filter step drops generated questions that share a 13-gram with them."""
    return [_ANNOTATE_EXAMPLE[0], json.loads(_GENERATE_EXAMPLE[2])["question"],
            "A 5 kg box is pushed with 20 N on ice. What is its acceleration?"]


def respond_messages(question: str) -> tuple[list[dict[str, str]], str]:
    text = f"{question}\n\nThink step by step, then give the result on a last line 'Final answer: ...'."
    return [{"role": "user", "content": text}], ""
