"""The privileged context c of GPO on LLMs: the guider's prompt is the learner's prompt plus a hint.

One template and one renderer, shared by ``--algo gpo`` (``GPOConfig.privileged_template`` defaults to
``PRIVILEGED_TEMPLATE``) and by the tiny warm starts that show the policy hinted prompts
(``TinyRecipe.hint_fraction``), so the guider is asked in exactly the form it was trained on.
"""

from __future__ import annotations

from posttrain.tasks.base import Example

PRIVILEGED_TEMPLATE = "{prompt}\nHint: the answer is {answer}."
"""Default guider prompt: ``str.format`` over ``prompt``, ``answer`` and the example's dataset columns."""


def privileged_examples(examples: list[Example], template: str = PRIVILEGED_TEMPLATE) -> list[Example]:
    """The privileged (hinted) version of each example: its prompt rendered through ``template``.

    Fails naming the example when ``template`` refers to a column the example does not have.
    """
    out = []
    for i, ex in enumerate(examples):
        try:
            text = template.format(prompt=ex.prompt, answer=ex.answer, **ex.columns)
        except KeyError as err:
            raise ValueError(f"privileged_template names column {err} that example {i} does not have") from None
        out.append(Example(prompt=text, answer=ex.answer, columns=ex.columns))
    return out
