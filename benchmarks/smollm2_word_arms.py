"""The arms of ``bench_smollm2_learning.py --task multistep-word`` (issue 44, section 2): SmolLM2-135M-Instruct
on the multi-step word problems (``posttrain.tasks.multistep_word``), every method against GRPO with the same
samples, steps and evaluation.

    python benchmarks/bench_smollm2_learning.py --task multistep-word --arms grpo-vllm --seeds 0 1 2
    python benchmarks/bench_smollm2_learning.py --task multistep-word --print_commands   # the train.py lines

Shared by every arm (``COMMON``, ``STEPS``): 8 prompts x G = 4 per step (32 sampled answers), 64 new tokens at
temperature 0.8 (the headroom measurement's, ``results/smollm2_task_headroom.json``: greedy 0.055, pass@16
0.281, 0.367 with the worked solution in the prompt), lr 2e-5, 100 steps, greedy held-out accuracy on 256
problems every 10 steps, bf16 autocast of the policy where the CPU multiplies bf16 natively (``--autocast
auto``; the bench records what this CPU resolves it to), ``--max_prompt_tokens 512`` (the worked example makes
the prompt longer than the 256-token default), a checkpoint every 5 steps and ``--resume auto``. The arms:

- ``grpo-vllm`` / ``grpo-hf``: GRPO, rollouts and evaluation by the colocated vLLM engine or our HF engine;
- ``grpo-vllm-lora``: ``grpo-vllm`` training a rank-8 LoRA adapter at lr 2e-4 (the usual LoRA setting; an
  adapter moves the weights far less per step than a full update at the same lr); its peak RSS and s/step are
  what the bench's summary sets against ``grpo-vllm``'s;
- ``gpo``: GPO (``--algo gpo``), rollouts from the guider, whose prompt is the problem followed by its worked
  solution (``--privileged_template`` = ``SOLUTION_TEMPLATE``), the learner trained on the plain prompt; the
  held-out evaluation answers the plain prompt, so its curve is the learner's;
- ``dupo-vllm``: DuPO (``--algo dupo``), no labels: each group's distinct ``Answer:`` values go into the task's
  dual questions (``multistep_word.story_masked_problems``: one number of the story hidden, ``Given that the
  answer is 9, what is Vqe?``, at most 3 per problem: the start count and two operands) and the live policy
  answers them greedily in at most ``DUAL_TOKENS`` tokens (``--dual_solver policy``); the dual answers are
  generated on top of the same 32 policy samples, and its ``perf/step_seconds`` includes them;
- ``prefix-rl``: Prefix-RL (self-prefix form, as on arithmetic): the trainable copy writes the first
  ``PREFIX_TOKENS`` tokens, the frozen SmolLM2 (its own HF engine) the rest of the 64-token budget, both
  sampled at the shared temperature 0.8 (``--target_temperature``; its default is 0.7).
  ``PREFIX_TOKENS`` = 16 is not measured on this task (no ceiling run, unlike arithmetic's k = 8): the base
  model's answers open with the story's first sentence and first equation (``Eva has 2 cups. 2 + 5 = 7.``,
  13-16 tokens), so 16 tokens let the adapter choose the solution's form and its first step, and leave the
  later steps and the ``Answer:`` line to the target.
"""

from __future__ import annotations

from posttrain.tasks.multistep_word import SOLUTION_TEMPLATE

STEPS = 100
"""Training steps of every arm (the issue's minimum)."""
COMMON = ["--model", "smollm2-135m", "--task", "multistep-word", "--prompts_per_step", "8", "--group_size", "4",
          "--micro_batch_size", "8", "--max_new_tokens", "64", "--temperature", "0.8", "--lr", "2e-5",
          "--max_prompt_tokens", "512", "--eval_every", "10", "--eval_examples", "256", "--pass_k", "1",
          "--autocast", "auto", "--save_every", "5", "--keep_last", "1", "--resume", "auto", "--progress", "false",
          "--num_threads", "1"]
DUAL_TOKENS = 24
"""DuPO's dual answer budget: room for a sentence before the number (``Vqe is 7.``), which the dual reads last."""
PREFIX_TOKENS = 16
"""Prefix-RL's k on this task (module docstring: chosen, not measured)."""
ARMS: dict[str, list[str]] = {
    "grpo-vllm": ["--algo", "grpo", "--rollout", "vllm"],
    "grpo-hf": ["--algo", "grpo", "--rollout", "hf"],
    "grpo-vllm-lora": ["--algo", "grpo", "--rollout", "vllm", "--lora_r", "8", "--lr", "2e-4"],
    "gpo": ["--algo", "gpo", "--rollout", "vllm", "--privileged_template", SOLUTION_TEMPLATE],
    "dupo-vllm": ["--algo", "dupo", "--rollout", "vllm", "--dual_solver", "policy", "--dual_max_new_tokens",
                  str(DUAL_TOKENS)],
    "prefix-rl": ["--algo", "prefix-rl", "--rollout", "hf", "--target_rollout", "hf", "--prefix_tokens",
                  str(PREFIX_TOKENS), "--target_temperature", "0.8"],
}
