"""The embedded tiny span reward model (recipe ``reward-text2grad``; Text2Grad, arXiv 2505.22338).

A character-level model of the policies' size and tokenizer, warm-started by plain SFT on the task
``step-arithmetic-feedback`` (``posttrain.tasks.step_arithmetic``): compact requests
``T2G|spans|<problem>|<response>|`` over responses with injected step errors, targets the program's
feedback as compact JSON of the "spans" form (critique, good steps, poor steps). The loop is the shared
``posttrain.algos.warm_start.sft_warm_start`` (prompts through the chat template, loss on the JSON and EOS),
so the recipe's model reads its input exactly as ``scorer.SpanRewardModel(style="compact")`` renders it
and as ``--algo sft --task dataset`` trains on the output of ``data_pipelines.text2grad.sft``. The recipe
``reward-text2grad-nocritique`` runs the same warm start on ``step-arithmetic-feedback-nocritique`` (the same
targets without the critique field): the paper's "spans without critique" ablation.

Deviation from the paper: Text2Grad fine-tunes Llama-3.1-8B with LoRA on GPT-4o annotations; here a
program writes the annotations (it knows which step is wrong) and the model is a 3-layer character
model, so the critique is short and templated. Its span precision / recall against the program's labels
is measured by ``rewards.text2grad.evaluate`` (``posttrain text2grad-eval``).
"""

from __future__ import annotations

from typing import Any

import torch

from posttrain.algos.warm_start import sft_warm_start


def warm_start(model: Any, tokenizer: Any, recipe: Any, generator: torch.Generator) -> None:
    """``recipe.warm_start_steps`` SFT steps on ``recipe.task`` (``step-arithmetic-feedback`` or its
    ``-nocritique`` twin), in place, with one intra-op thread (restored afterwards): on a shared 2-core machine
    a tiny model trains faster single-threaded."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        sft_warm_start(model, tokenizer, recipe, generator)
    finally:
        torch.set_num_threads(threads)
