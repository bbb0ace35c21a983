"""After training, does the colocated vLLM engine hold the trainer's weights? Run like the entry point:

    deepspeed --num_gpus 2 tests/e2e/vllm_sync_check.py --algo grpo --rollout vllm --model PATH ...

It trains ``--steps`` GRPO steps through the real ``Trainer`` (weights synced after every step), then on
every rank decodes held-out prompts greedily with the engine (rendered as the run renders them, with its
``--system_prompt``) and records the engine's log-probs of its tokens, the trainer's own module's (ZeRO-3
parameters gathered) and the starting checkpoint's teacher-forced log-probs of the same tokens
(``sync_harness.assert_synced`` compares them). Writes ``OUTPUT_DIR/sync_check_rank{R}.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch

from posttrain.algos import get_algorithm
from posttrain.config import build_config
from posttrain.engines.base import SamplingParams
from posttrain.models.loading import load_causal_lm
from posttrain.tasks.prompts import encode_prompts
from posttrain.trainer import Trainer
from tests.e2e.sync_harness import completion_logprobs


def trainer_copy(trainer: Trainer) -> torch.nn.Module:
    """A plain HF model holding the trainer's current (full, un-partitioned) weights."""
    from posttrain.dist import gathered_named_parameters
    from posttrain.engines.weight_sync import WeightReceiver

    model = load_causal_lm(trainer.config.model)
    WeightReceiver(model).update(gathered_named_parameters(trainer.deepspeed_model.module, trainer.config.zero_stage))
    return model


def main(argv: list[str]) -> None:
    argv = [a for a in argv if not a.startswith("--local_rank")]
    config = build_config(get_algorithm("grpo").config_class, argv)
    trainer = Trainer.from_config(config)
    trainer.fit()
    prompts = encode_prompts(trainer.tokenizer, trainer.eval_examples[:16], config.system_prompt,
                             config.max_prompt_tokens)
    greedy = SamplingParams(max_new_tokens=config.max_new_tokens, temperature=0.0)
    engine = trainer.rollout.generate(prompts, greedy)
    pad_id = trainer.tokenizer.pad_token_id
    out = Path(config.output_dir) / f"sync_check_rank{trainer.info.rank}.json"
    out.write_text(json.dumps({"engine_logprobs": engine.logprobs,
                               "trainer_logprobs": completion_logprobs(trainer_copy(trainer), engine, pad_id),
                               "initial_logprobs": completion_logprobs(load_causal_lm(config.model), engine, pad_id),
                               "weight_version": trainer.rollout.weight_version,
                               "rollout_version": engine.weight_version}))


if __name__ == "__main__":
    main(sys.argv[1:])
