"""The training loop. It knows no algorithm: over the parts ``posttrain.trainer_parts`` builds (models, engines,
data, the algorithm) it repeats rollout -> reward -> experience (all inside ``Algorithm.make_experience``) -> ``mu``
passes of micro-batched loss and optimizer steps -> weight sync -> eval, logging and checkpoints.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import torch

from posttrain.algos.base import TrainedModel
from posttrain.checkpoint import load_checkpoint, resolve_resume, save_checkpoint
from posttrain.config import TrainConfig
from posttrain.dist import DistInfo, all_reduce_mean, barrier, init_distributed, optimizer_step
from posttrain.engines.weight_sync import WorkerError, rest_rollout, wake_rollout, wake_rollout_weights
from posttrain.evaluation import evaluate
from posttrain.metrics import ProgressBar, peak_memory_mb
from posttrain.trainer_parts import TrainerParts, build_parts
from posttrain.weight_sync import push_weights

log = logging.getLogger("posttrain")


class Trainer:
    """Runs ``fit`` over ``TrainerParts`` (``posttrain.trainer_parts``); ``Trainer.from_config`` builds them."""

    def __init__(self, parts: TrainerParts) -> None:
        self.config, self.info, self.algo, self.ctx = parts.config, parts.info, parts.algo, parts.ctx
        self.task, self.train_examples, self.eval_examples = parts.task, parts.train_examples, parts.eval_examples
        self.tokenizer, self.timer, self.policy_role = parts.tokenizer, parts.timer, parts.policy_role
        self.deepspeed_model, self.role_deepspeed_models = parts.deepspeed_model, parts.role_deepspeed_models
        self.refreshed_roles, self.refreshed_modules = parts.refreshed_roles, parts.refreshed_modules
        self.rollout, self.sampler, self.async_driver = parts.rollout, parts.sampler, parts.async_driver
        self.logger = parts.logger
        self.policy = _trained_model(self.deepspeed_model)
        self.role_models = {name: _trained_model(m) for name, m in self.role_deepspeed_models.items()}
        self._synced_step = 0  # the trainer step whose weights the rollout engine holds
        self.generators: dict[str, torch.Generator] = {"algo": self.algo.generator}

    @classmethod
    def from_config(cls, config: TrainConfig, info: DistInfo | None = None) -> Trainer:
        """The trainer of ``config`` on this rank (``info``, or the process group it joins), after validating
        ``config`` for the run's world size: the one place a run's config is validated, for the entry point and
        library callers alike."""
        config.validate(info.world_size if info is not None else int(os.environ.get("WORLD_SIZE", "1")))
        info = info or init_distributed(config.dist_timeout_s)
        return cls(build_parts(config, info))

    # ------------------------------------------------------------------------------------------
    def _sync_weights(self, step: int) -> None:
        """Push the weights after ``step`` into the rollout engine, every rank together. A rank that fails or
        hangs in a sync fails the others within ``--dist_timeout_s`` (their barrier or ZeRO-3 gather times out);
        an error that is not a worker's own (``WorkerError`` names the worker) is raised naming this rank, the
        step and that bound."""
        rollout = self.rollout
        if rollout is None:
            raise RuntimeError(f"step {step}: no weight sync without a rollout engine (--algo {self.config.algo}'s "
                               "policy declares none and the run does not evaluate)")
        if self.async_driver is not None:
            self.async_driver.wait()  # never change an engine's weights in the middle of a batch
        try:
            if self.async_driver is not None:
                # ...of any rank: ranks share remote workers, and rank 0 starts the update (vLLM's layerwise
                # reload puts the layers on the meta device until it finishes) as soon as it enters the sync
                barrier(self.info.world_size)
            wake_rollout_weights(rollout)  # the KV cache wakes when the engine is next used
            push_weights(rollout, self.deepspeed_model.module, self.config.zero_stage, step)
        except WorkerError:
            raise
        except RuntimeError as err:
            raise RuntimeError(f"rank {self.info.rank}: the weight sync after step {step} failed: {err}. A collective "
                               "of the training ranks (barrier, ZeRO-3 gather) waits at most --dist_timeout_s "
                               f"({self.config.dist_timeout_s:g} s) for the others: if one timed out here, another "
                               "rank failed or hangs and its log names the cause. Continue with --resume auto."
                               ) from err
        self._synced_step = step
        if self.async_driver is not None:
            self.async_driver.synced(step)

    def _evaluate(self, step: int) -> dict[str, float]:
        if self.async_driver is not None:
            self.async_driver.wait()  # the engine serves one caller at a time (the HF engine is not thread-safe)
        if self.policy_role.engine is None or self._synced_step != step:  # SFT, or between --sync_every syncs
            with self.timer.phase("sync"):
                self._sync_weights(step)
        if self.rollout is not None:
            wake_rollout(self.rollout)
        with self.timer.phase("eval"):
            metrics = evaluate(self.algo.evaluation_engine(), self.tokenizer, self.task, self.eval_examples,
                               self.config, self.info, step)
        barrier(self.info.world_size)  # every rank's evaluation requests are done before any rank syncs again
        return metrics

    def _resume(self) -> int:
        path = resolve_resume(self.config.resume, self.config.output_dir)
        if path is None:
            return 0
        state = load_checkpoint(self.deepspeed_model, path, self.generators, self.info, self.role_deepspeed_models,
                                self.refreshed_modules)
        self.sampler.load_state_dict(state["sampler"])
        self.algo.load_state_dict(state.get("algo", {}))
        self.logger.truncate_after(state["step"])
        if self.async_driver is not None and "async_rollouts" in state:
            self.async_driver.load_state_dict(state["async_rollouts"][self.info.rank])
        if self.rollout is not None:
            self._sync_weights(int(state["step"]))
        log.info("resumed from %s at step %d", path, state["step"])
        return int(state["step"])

    def _save(self, step: int) -> None:
        with self.timer.phase("checkpoint"):
            state = {"step": step, "sampler": self.sampler.state_dict(), "algo": self.algo.state_dict()}
            if self.async_driver is not None:
                state["async_rollouts"] = self.async_driver.state_dict_all_ranks(self.info.world_size)
            save_checkpoint(self.deepspeed_model, self.tokenizer, self.config.output_dir, step, state, self.generators,
                            self.info, self.config.zero_stage, self.config.keep_last, self.role_deepspeed_models,
                            self.refreshed_modules)

    def _refresh_roles(self, step: int) -> None:
        """Copy the policy's weights (after step ``step - 1``) into each refreshed role whose turn it is."""
        for name, role in self.refreshed_roles.items():
            if (step - 1) % role.refresh_every == 0:
                push_weights(self.ctx.engines[name], self.deepspeed_model.module, self.config.zero_stage, step - 1)

    def _train_on(self, experience: Any) -> dict[str, float]:
        """``mu`` passes of micro-batched loss, backward and step over ``experience``: the mean of each metric over
        the micro-batches, and ``train/grad_norm`` (``NAME/grad_norm`` for a trained role), the mean over the
        optimizer steps of the global gradient norm before clipping."""
        sums: dict[str, float] = {}
        count = 0
        grad_norms: dict[str, list[float | None]] = {"train": [], **{name: [] for name in self.role_models}}
        micro = min(self.config.micro_batch_size, len(experience))
        for iteration in range(self.config.mu):
            for batch in experience.split(micro):
                batch = batch.to(self.info.device)
                out = self.algo.loss(self.policy, batch, iteration)
                loss = out.loss * 0.0 if out.skip else out.loss  # a skipped micro-batch still counts for DeepSpeed
                self.deepspeed_model.backward(loss)
                grad_norms["train"].append(optimizer_step(self.deepspeed_model, self.config))
                metrics = {**out.metrics, "loss": float(loss.detach())}
                for name, role_model in self.role_models.items():  # after the policy, on the same micro-batch
                    role_out = self.algo.role_loss(name, role_model, batch, iteration)
                    role_loss = role_out.loss * 0.0 if out.skip else role_out.loss
                    self.role_deepspeed_models[name].backward(role_loss)
                    grad_norms[name].append(optimizer_step(self.role_deepspeed_models[name], self.config))
                    metrics.update(role_out.metrics)
                    metrics[f"{name}/loss"] = float(role_loss.detach())
                for k, v in metrics.items():
                    sums[k] = sums.get(k, 0.0) + float(v)
                count += 1
        out = {(k if "/" in k else f"train/{k}"): v / count for k, v in sums.items()}  # "rollout/..." keep theirs
        out["train/lr"] = self.deepspeed_model.get_lr()[0]
        for prefix, norms in grad_norms.items():  # None: a micro-step that only accumulated gradients
            updates = [norm for norm in norms if norm is not None]
            if not updates:
                raise RuntimeError(f"{prefix}: {len(norms)} micro-batches of {micro} samples reached no optimizer step "
                                   f"(DeepSpeed's gradient accumulation boundary): the step's weights never moved")
            out[f"{prefix}/grad_norm"] = sum(updates) / len(updates)
        return out

    def _one_step(self, step: int) -> dict[str, float]:
        cfg, info = self.config, self.info
        start = time.perf_counter()
        modules = [self.deepspeed_model.module, *(m.module for m in self.role_deepspeed_models.values())]
        for module in modules:
            module.eval()  # no dropout while scoring rollouts
        if self.rollout is not None:
            wake_rollout(self.rollout)
        self._refresh_roles(step)
        if self.async_driver is not None:
            experience, metrics = self.async_driver.experience(step, self.deepspeed_model.module)
        else:
            batch = self.sampler.next_batch()
            per_rank = cfg.per_rank_prompts(info.world_size)
            local = batch[info.rank * per_rank : (info.rank + 1) * per_rank]
            experience, metrics = self.algo.make_experience(local, self.deepspeed_model.module, step)
        for module in modules:
            module.train()
        syncs_next = self.policy_role.engine is not None and step % cfg.sync_every == 0
        if self.async_driver is None and self.rollout is not None:
            rest_rollout(self.rollout, syncs_next)
        with self.timer.phase("train"):
            metrics.update(self._train_on(experience))
        if syncs_next:
            with self.timer.phase("sync"):
                self._sync_weights(step)
        elapsed = time.perf_counter() - start
        metrics.update(self.timer.pop())
        tokens = float(experience["attention_mask"].sum()) if "attention_mask" in experience.tensors else 0.0
        metrics["perf/tokens_per_s"] = tokens * info.world_size / max(elapsed, 1e-9)
        metrics["perf/step_seconds"] = elapsed
        metrics = all_reduce_mean(metrics, info.world_size)
        metrics.update(self.algo.end_step(step, metrics))
        metrics["perf/peak_memory_mb"] = peak_memory_mb(info.device)
        metrics["data/epoch"] = self.sampler.epoch
        return metrics

    def fit(self) -> dict[str, float]:
        """Train to ``config.steps``; returns the last evaluation's metrics."""
        cfg = self.config
        start_step = self._resume()
        if start_step == 0:
            self.logger.truncate_after(-1)  # a fresh run into a used output_dir starts a fresh metrics file
        last_eval: dict[str, float] = {}
        if start_step == 0 and cfg.eval_every:
            last_eval = self._evaluate(0)
            self.logger.log(0, last_eval)
            if self.info.is_main:
                log.info("step 0 eval: %s", _fmt(last_eval))
        bar = ProgressBar(total=cfg.steps, initial=start_step, enabled=cfg.progress and self.info.is_main)
        for step in range(start_step + 1, cfg.steps + 1):
            metrics = self._one_step(step)
            evaluated = bool(cfg.eval_every) and (step % cfg.eval_every == 0 or step == cfg.steps)
            if evaluated:
                last_eval = self._evaluate(step)
                metrics.update(last_eval)
                metrics.update(self.timer.pop())
            if step % cfg.log_every == 0 or step == cfg.steps or evaluated:  # an evaluation is always logged
                self.logger.log(step, metrics)
            bar.update({k.split("/")[-1]: metrics[k] for k in ("reward/mean", "eval/accuracy") if k in metrics})
            if (cfg.save_every and step % cfg.save_every == 0) or step == cfg.steps:
                self._save(step)
        bar.close()
        if self.async_driver is not None:
            self.async_driver.close()
        self.logger.close()
        if self.info.is_main and last_eval:
            log.info("final eval: %s", _fmt(last_eval))
        return last_eval


def _trained_model(deepspeed_model: Any) -> TrainedModel:
    """What ``loss`` / ``role_loss`` get: the plain module, and a forward through DeepSpeed (whose hooks scale
    and reduce the gradients) that exposes no DeepSpeed object."""
    return TrainedModel(deepspeed_model.module, lambda *args, **kwargs: deepspeed_model(*args, **kwargs))


def _fmt(metrics: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:.4g}" for k, v in sorted(metrics.items()))
