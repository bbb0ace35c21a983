"""The training loop. It knows no algorithm: it builds models, engines and data, then repeats
rollout -> reward -> experience (all inside ``Algorithm.make_experience``) -> ``mu`` passes of
micro-batched loss and optimizer steps -> weight sync -> eval, logging and checkpoints.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any

import torch

from posttrain.algos import get_algorithm
from posttrain.algos.base import AlgoContext, Algorithm, TrainedModel
from posttrain.algos.roles import INITIAL_POLICY, POLICY, ModelRole, check_roles, check_same_tokenizer
from posttrain.async_rollouts import AsyncStepDriver
from posttrain.checkpoint import load_checkpoint, resolve_resume, save_checkpoint
from posttrain.config import ConfigError, TrainConfig, resolve_model_path
from posttrain.dist import (
    DistInfo,
    all_reduce_mean,
    barrier,
    init_distributed,
    initialize_deepspeed_model,
    optimizer_step,
    set_cpu_threads,
)
from posttrain.engines.build import build_engine
from posttrain.engines.spec import EngineSpec
from posttrain.engines.weight_sync import WorkerError, rest_rollout, wake_rollout
from posttrain.evaluation import evaluate
from posttrain.metrics import MetricsLogger, PhaseTimer, ProgressBar, peak_memory_mb
from posttrain.models.autocast import autocast_dtype, autocast_forward
from posttrain.models.diffusion import load_diffusion_lm
from posttrain.models.loading import load_causal_lm, load_tokenizer
from posttrain.models.pretrained import resolve_model_name
from posttrain.models.tiny import build_tiny
from posttrain.models.value import ValueModel
from posttrain.sampler import EpochSampler
from posttrain.tasks import load_reward, load_task
from posttrain.weight_sync import push_weights

log = logging.getLogger("posttrain")


def _load_policy(path: str, kind: str, dtype: torch.dtype, trust_remote_code: bool) -> torch.nn.Module:
    if kind == "diffusion":
        return load_diffusion_lm(path, dtype=dtype, trust_remote_code=trust_remote_code)
    return load_causal_lm(path, dtype=dtype, trust_remote_code=trust_remote_code)


def apply_lora(model: torch.nn.Module, config: TrainConfig) -> torch.nn.Module:
    """``model`` wrapped by peft with a LoRA of rank ``config.lora_r`` on every linear layer."""
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, target_modules="all-linear", task_type="CAUSAL_LM")
    return get_peft_model(model, lora)


class Trainer:
    """Builds everything from a validated config and runs ``fit``."""

    def __init__(self, config: TrainConfig, info: DistInfo | None = None) -> None:
        self.info = info or init_distributed(config.dist_timeout_s)
        config.validate(self.info.world_size)
        self.config = config
        set_cpu_threads(config.num_threads)
        algo_cls: type[Algorithm] = get_algorithm(config.algo)
        torch.manual_seed(config.seed)  # model-construction randomness (e.g. LoRA init), same on every rank

        self.task = load_task(config)
        self.train_examples = self.task.split("train")
        eval_examples = self.task.split("test")
        self.eval_examples = eval_examples[: config.eval_examples] if config.eval_examples else eval_examples
        reward_fn = load_reward(config.reward, self.task)

        model_path = resolve_model_path(config, kind=config.model_kind)
        self.tokenizer = load_tokenizer(model_path, trust_remote_code=config.trust_remote_code)
        dtype = torch.bfloat16 if config.precision == "bf16" else torch.float32
        policy = _load_policy(model_path, config.model_kind, dtype, config.trust_remote_code)
        if config.gradient_checkpointing:
            policy.gradient_checkpointing_enable()
            policy.config.use_cache = False

        self.timer = PhaseTimer()
        self.ctx = AlgoContext(tokenizer=self.tokenizer, reward_fn=reward_fn, is_correct=self.task.is_correct,
                               timer=self.timer, device=self.info.device, rank=self.info.rank,
                               world_size=self.info.world_size)
        self.algo = algo_cls(config, self.ctx)
        if config.async_rollouts and not self.algo.supports_async_rollouts:
            raise ConfigError("async_rollouts", True, f"--algo {config.algo} builds its rollouts inside "
                              "make_experience, so they cannot run ahead; use --algo grpo or rloo")
        roles = check_roles(self.algo.roles())
        self.policy_role = roles[POLICY]
        engine_spec = (self.policy_role.engine or config.rollout
                       if self.policy_role.engine is not None or config.eval_every else None)
        # A frozen copy of the initial weights only where something runs one: an in-process engine without a
        # checkpoint of its own (hf, diffusion) or a role copied from the initial policy. The vLLM engines
        # need no copy: the colocated one reads only the policy's checkpoint name and dtype, the remote one
        # pushes its weights once, when it is built.
        needs_copy = ((engine_spec is not None and engine_spec.borrows_module)
                      or any(role.source == INITIAL_POLICY for role in roles.values()))
        initial_policy = copy.deepcopy(policy).eval().requires_grad_(False) if needs_copy else None
        if config.lora_r:
            policy = apply_lora(policy, config)
        amp_dtype = autocast_dtype(config.autocast, config.precision, self.info.device.type)
        if amp_dtype is not None:  # after the engine's copy above: only the trained policy runs under autocast
            autocast_forward(policy, self.info.device.type, amp_dtype)
            log.info("policy forwards under %s autocast (--autocast %s)", amp_dtype, config.autocast)
        self.role_deepspeed_models: dict[str, Any] = {}  # trained roles besides the policy (e.g. PPO's critic)
        self.refreshed_roles: dict[str, ModelRole] = {}  # frozen snapshots of the policy (e.g. DuPO's solver)
        self.refreshed_modules: dict[str, torch.nn.Module] = {}
        for role in roles.values():
            if role.name == POLICY:
                continue
            if role.trains:
                self._build_trained_role(role, initial_policy, dtype)
            else:
                self._build_frozen_role(role, initial_policy, dtype)
        if engine_spec is not None:  # a PEFT-wrapped policy serves as is: its adapters start at zero
            self.rollout = self._build_engine(engine_spec, initial_policy if engine_spec.borrows_module else policy,
                                              self.tokenizer)
            self.ctx.engines[POLICY] = self.rollout
        self.deepspeed_model = initialize_deepspeed_model(policy, config, self.info.world_size)
        self.policy = _trained_model(self.deepspeed_model)
        self.role_models = {name: _trained_model(m) for name, m in self.role_deepspeed_models.items()}
        self.sampler = EpochSampler(self.train_examples, config.prompts_per_step, config.seed, config.shuffle)
        self.async_driver = (AsyncStepDriver(self.algo, self.rollout, self.sampler, self.info.rank,
                                             config.per_rank_prompts(self.info.world_size), config.max_staleness,
                                             config.steps, self.info.device) if config.async_rollouts else None)
        self._synced_step = 0  # the trainer step whose weights the rollout engine holds
        self.generators: dict[str, torch.Generator] = {"algo": self.algo.generator}
        self.logger = MetricsLogger(config.output_dir, config.report_to, self.info.rank,
                                    run_name=f"{config.algo}-{config.task}", config=config.to_dict())
        if self.info.is_main:
            config.save(config.output_dir)

    # ------------------------------------------------------------------------------------------
    def _build_engine(self, spec: EngineSpec, model: torch.nn.Module, tokenizer: Any) -> Any:
        """The engine ``spec`` names for ``model``: moved to this rank's device only when the engine runs it."""
        config = self.config
        if spec.borrows_module:
            model = model.to(self.info.device)
        return build_engine(spec, model=model, tokenizer=tokenizer, device=self.info.device,
                            max_batch_size=config.rollout_batch_size or config.per_rank_samples(self.info.world_size),
                            seed=config.seed)

    def _role_module(self, role: ModelRole, initial_policy: torch.nn.Module,
                     dtype: torch.dtype) -> tuple[torch.nn.Module, Any]:
        """A role's own module and tokenizer: a copy of the initial policy (the policy's tokenizer) or its
        checkpoint (whose tokenizer must be the policy's unless the role says otherwise), as a ``ValueModel``
        when the role's head is a value head."""
        if role.source == INITIAL_POLICY:
            module, tokenizer = copy.deepcopy(initial_policy), self.tokenizer
        else:
            path = resolve_model_name(role.checkpoint) if role.checkpoint else str(build_tiny(role.recipe))
            remote_code = self.config.trust_remote_code
            tokenizer = load_tokenizer(path, trust_remote_code=remote_code)
            if role.shares_tokenizer:
                check_same_tokenizer(role, self.tokenizer, tokenizer)
            module = load_causal_lm(path, dtype=dtype, trust_remote_code=remote_code)
        return (ValueModel(module) if role.head == "value" else module), tokenizer

    def _build_trained_role(self, role: ModelRole, initial_policy: torch.nn.Module, dtype: torch.dtype) -> None:
        """A trained role besides the policy: its own DeepSpeed model and optimizer; its plain module is lent as
        ``ctx.models[name]``."""
        module = self._role_module(role, initial_policy, dtype)[0].requires_grad_(True)
        deepspeed_model = initialize_deepspeed_model(module, self.config, self.info.world_size, lr=role.lr)
        self.role_deepspeed_models[role.name] = deepspeed_model
        self.ctx.models[role.name] = deepspeed_model.module
        log.info("model role %s: trained, from %s%s (lr %g)", role.name, role.checkpoint or role.recipe or role.source,
                 " with a value head" if role.head == "value" else "", role.lr or self.config.lr)

    def _build_frozen_role(self, role: ModelRole, initial_policy: torch.nn.Module, dtype: torch.dtype) -> None:
        """A frozen role as declared (``posttrain.algos.roles``): its module in ``ctx.models``, or, when it
        declares an engine, that engine in ``ctx.engines`` (refreshed from the policy if the role says so)."""
        module, tokenizer = self._role_module(role, initial_policy, dtype)
        module = module.eval().requires_grad_(False)
        if role.engine is None:
            self.ctx.models[role.name] = module.to(self.info.device)
        else:
            engine = self.ctx.engines[role.name] = self._build_engine(role.engine, module, tokenizer)
            if role.refresh_every:
                if getattr(engine, "model", None) is not module:  # the checkpoint saves and restores the module
                    raise ConfigError(role.config_field or role.name, role.engine,
                                      f"the refreshed {role.name} model needs an engine that runs the module it is "
                                      "given in process (hf)")
                self.refreshed_roles[role.name], self.refreshed_modules[role.name] = role, module
        log.info("model role %s: %s%s", role.name, role.checkpoint or role.recipe or role.source,
                 f", served by the {role.engine} engine" if role.engine else "")

    def _sync_weights(self, step: int) -> None:
        """Push the weights after ``step`` into the rollout engine, every rank together. A rank that fails or
        hangs in a sync fails the others within ``--dist_timeout_s`` (their barrier or ZeRO-3 gather times out);
        an error that is not a worker's own (``WorkerError`` names the worker) is raised naming this rank, the
        step and that bound."""
        if self.async_driver is not None:
            self.async_driver.wait()  # never change an engine's weights in the middle of a batch
        try:
            if self.async_driver is not None:
                # ...of any rank: ranks share remote workers, and rank 0 starts the update (vLLM's layerwise
                # reload puts the layers on the meta device until it finishes) as soon as it enters the sync
                barrier(self.info.world_size)
            wake_rollout(self.rollout)
            push_weights(self.rollout, self.deepspeed_model.module, self.config.zero_stage, step)
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
        if hasattr(self, "rollout"):
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
        if hasattr(self, "rollout"):
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
        if self.async_driver is None and hasattr(self, "rollout"):
            rest_rollout(self.rollout)
        with self.timer.phase("train"):
            metrics.update(self._train_on(experience))
        if self.policy_role.engine is not None and step % cfg.sync_every == 0:
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
