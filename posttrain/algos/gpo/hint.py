"""The privileged context c of GPO on LLMs: the guider's prompt is the learner's prompt plus a hint.

One template and one renderer, shared by ``--algo gpo`` (``GPOConfig.privileged_template`` defaults to
``PRIVILEGED_TEMPLATE``) and by the tiny warm starts that show the policy hinted prompts
(``TinyRecipe.hint_template``), so the guider is asked in exactly the form it was trained on.

The default hint is the example's ``hint`` column, privileged information that helps without stating
the answer (the built-in arithmetic task's is an intermediate result, see ``posttrain.tasks.arithmetic``).
GPO's guider sees privileged state, not the label (Li, Xie, Lu, ICLR 2026): a hint that states the answer
makes it an "impossibly good teacher" whose groups are almost all correct (zero advantage) and whose
answers the learner can only copy as labels.
"""

from __future__ import annotations

from posttrain.tasks.base import Example

PRIVILEGED_TEMPLATE = "{prompt}\nHint: {hint}."
"""Default guider prompt: ``str.format`` over the example's dataset columns, ``prompt`` and ``answer``."""

HINT_RECIPE = "causal-arithmetic-hint"
"""The tiny recipe (``posttrain.models.tiny``) whose warm start saw ``PRIVILEGED_TEMPLATE`` prompts:
``--algo gpo``'s embedded default on the arithmetic task."""


def privileged_examples(examples: list[Example], template: str = PRIVILEGED_TEMPLATE) -> list[Example]:
    """The privileged (hinted) version of each example: its prompt rendered through ``template``.

    ``{prompt}`` and ``{answer}`` are the example's own prompt and answer, even when the dataset also has
    columns of those names (e.g. with ``--prompt_column question``); every other name is a column. Fails
    naming the example and the column when ``template`` refers to a column the example does not have.
    """
    out = []
    for i, ex in enumerate(examples):
        fields = {**ex.columns, "prompt": ex.prompt, "answer": ex.answer}
        try:
            text = template.format(**fields)
        except KeyError as err:
            raise ValueError(f"privileged_template {template!r} names column {err} that example {i} "
                             f"(prompt {ex.prompt!r}) does not have; its columns: {sorted(fields)}") from None
        out.append(Example(prompt=text, answer=ex.answer, columns=ex.columns))
    return out
