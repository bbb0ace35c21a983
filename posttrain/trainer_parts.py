"""What the training loop runs on, built from a validated config: ``build_parts(config, info)`` returns a
``TrainerParts`` holding the task and its splits, the tokenizer, the model of every role the algorithm declares,
their DeepSpeed engines, the policy's rollout engine (or None), the complete ``AlgoContext``, the algorithm (built
last, on that context), the sampler, the asynchronous driver and the metrics logger. ``posttrain.trainer.Trainer``
runs the loop over them and builds nothing itself.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from typing import Any

import torch

from posttrain.algos import get_algorithm
from posttrain.algos.base import AlgoContext, Algorithm
from posttrain.algos.roles import INITIAL_POLICY, POLICY, ModelRole, check_roles, check_same_tokenizer
from posttrain.async_rollouts import AsyncStepDriver
from posttrain.config import ConfigError, TrainConfig, resolve_model_path
from posttrain.dist import DistInfo, initialize_deepspeed_model, set_cpu_threads
from posttrain.engines.base import GenerationEngine, RolloutEngine
from posttrain.engines.build import build_engine
from posttrain.engines.spec import EngineSpec
from posttrain.metrics import MetricsLogger, PhaseTimer
from posttrain.models.autocast import autocast_dtype, autocast_forward
from posttrain.models.diffusion import load_diffusion_lm
from posttrain.models.loading import disable_dropout, load_causal_lm, load_tokenizer
from posttrain.models.pretrained import resolve_model_name
from posttrain.models.tiny import build_tiny
from posttrain.models.value import ValueModel
from posttrain.sampler import EpochSampler
from posttrain.tasks import load_reward, load_task
from posttrain.tasks.base import Example, Task

log = logging.getLogger("posttrain")


@dataclass(frozen=True)
class TrainerParts:
    """Everything ``Trainer`` runs, fully built; nothing is added to it afterwards. ``ctx`` is what the algorithm
    was built on (the reward function, the frozen and trained role models, every role's engine)."""

    config: TrainConfig
    info: DistInfo
    task: Task
    train_examples: list[Example]
    eval_examples: list[Example]
    tokenizer: Any
    timer: PhaseTimer
    ctx: AlgoContext
    algo: Algorithm
    policy_role: ModelRole
    deepspeed_model: Any
    """The policy's DeepSpeed engine."""
    role_deepspeed_models: dict[str, Any]
    """The DeepSpeed engines of the trained roles besides the policy (e.g. PPO's critic), by role name."""
    refreshed_roles: dict[str, ModelRole]
    """The frozen snapshots of the policy (e.g. DuPO's solver), by role name; ``refreshed_modules`` their modules."""
    refreshed_modules: dict[str, torch.nn.Module]
    rollout: RolloutEngine | None
    """The policy's engine (``ctx.engines["policy"]``); None where the policy declares none and nothing evaluates."""
    sampler: EpochSampler
    async_driver: AsyncStepDriver | None
    """The ``--async_rollouts`` driver; None in a synchronous run."""
    logger: MetricsLogger


def build_parts(config: TrainConfig, info: DistInfo) -> TrainerParts:
    """Build what ``config`` runs on this rank. ``config`` is validated already (``Trainer.from_config`` does it,
    once); this builder checks only what needs the algorithm's class (``--async_rollouts``). Rank 0 records the
    resolved config in ``config.output_dir``."""
    set_cpu_threads(config.num_threads)
    algo_cls: type[Algorithm] = get_algorithm(config.algo)
    if config.async_rollouts and not algo_cls.supports_async_rollouts:
        raise ConfigError("async_rollouts", True, f"--algo {config.algo} builds its rollouts inside "
                          "make_experience, so they cannot run ahead; use --algo grpo or rloo")
    torch.manual_seed(config.seed)  # model-construction randomness (e.g. LoRA init), same on every rank

    task = load_task(config)
    train_examples = task.split("train")
    eval_examples = task.split("test")
    if config.eval_examples:
        eval_examples = eval_examples[: config.eval_examples]
    reward_fn = load_reward(config.reward, task)

    model_path = resolve_model_path(config, kind=config.model_kind)
    tokenizer = load_tokenizer(model_path, trust_remote_code=config.trust_remote_code)
    dtype = torch.bfloat16 if config.precision == "bf16" else torch.float32
    policy = _load_policy(model_path, config.model_kind, dtype, config.trust_remote_code)
    if config.disable_dropout:  # before the copies: roles copied from the initial policy train without it too
        disable_dropout(policy)
    if config.gradient_checkpointing:
        policy.gradient_checkpointing_enable()
        policy.config.use_cache = False

    timer = PhaseTimer()

    roles = check_roles(algo_cls.declared_roles(config))
    policy_role = roles[POLICY]
    engine_spec = policy_engine_spec(policy_role, config)
    # A frozen copy of the initial weights only where something runs one: an in-process engine without a
    # checkpoint of its own (hf, diffusion) or a role copied from the initial policy. The vLLM engines
    # need no copy: the colocated one reads only the policy's checkpoint name and dtype, the remote one
    # pushes its weights once, when it is built.
    needs_copy = ((engine_spec is not None and engine_spec.borrows_module)
                  or any(role.source == INITIAL_POLICY for role in roles.values()))
    initial_policy = copy.deepcopy(policy).eval().requires_grad_(False) if needs_copy else None
    if config.lora_r:
        policy = apply_lora(policy, config)
    amp_dtype = autocast_dtype(config.autocast, config.precision, info.device.type)
    if amp_dtype is not None:  # after the engine's copy above: only the trained policy runs under autocast
        autocast_forward(policy, info.device.type, amp_dtype)
        log.info("policy forwards under %s autocast (--autocast %s)", amp_dtype, config.autocast)

    built = _RoleBuilder(config, info, tokenizer, dtype, initial_policy)
    for role in roles.values():
        if role.name == POLICY:
            continue
        if role.trains:
            built.add_trained(role)
        else:
            built.add_frozen(role)
    rollout: RolloutEngine | None = None
    if engine_spec is not None:  # a PEFT-wrapped policy serves as is: its adapters start at zero
        engine_module = initial_policy if engine_spec.borrows_module else policy
        if amp_dtype is not None and engine_spec.borrows_module:
            # Under autocast the rollouts decode with bf16 weights, not fp32 ones cast at every matmul: decoding
            # reads every weight once per token, so half the bytes is about half the time. The roles above have
            # taken their copies of the initial policy already, so the engine's copy is cast in place; weight
            # syncs cast the trainer's fp32 tensors on copy (``WeightReceiver``).
            engine_module = engine_module.to(amp_dtype)
        rollout = built.engine(engine_spec, engine_module, tokenizer, dtype=amp_dtype)
        built.engines[POLICY] = rollout
    deepspeed_model = initialize_deepspeed_model(policy, config, info.world_size)
    ctx = AlgoContext(tokenizer=tokenizer, reward_fn=reward_fn, is_correct=task.is_correct, timer=timer,
                      device=info.device, rank=info.rank, world_size=info.world_size, models=built.models,
                      engines=built.engines)
    algo = algo_cls(config, ctx)  # last: its context is complete

    sampler = EpochSampler(train_examples, config.prompts_per_step, config.seed, config.shuffle)
    async_driver = None
    if config.async_rollouts:
        if rollout is None:
            raise ConfigError("async_rollouts", True, f"--algo {config.algo}'s policy role declares no engine, so "
                              "no rollouts can run ahead")
        async_driver = AsyncStepDriver(algo, rollout, sampler, info.rank, config.per_rank_prompts(info.world_size),
                                       config.max_staleness, config.steps, info.device)
    logger = MetricsLogger(config.output_dir, config.report_to, info.rank, run_name=f"{config.algo}-{config.task}",
                           config=config.to_dict())
    if info.is_main:
        config.save(config.output_dir)
    return TrainerParts(config=config, info=info, task=task, train_examples=train_examples,
                        eval_examples=eval_examples, tokenizer=tokenizer, timer=timer, ctx=algo.ctx, algo=algo,
                        policy_role=policy_role, deepspeed_model=deepspeed_model,
                        role_deepspeed_models=built.deepspeed_models, refreshed_roles=built.refreshed_roles,
                        refreshed_modules=built.refreshed_modules, rollout=rollout, sampler=sampler,
                        async_driver=async_driver, logger=logger)


def policy_engine_spec(policy_role: ModelRole, config: TrainConfig) -> EngineSpec | None:
    """The policy's engine: the one its role declares; else, where the run evaluates (``--eval_every``), the run's
    ``--rollout`` (SFT samples nothing but evaluates through it); else none."""
    if policy_role.engine is not None:
        return policy_role.engine
    if config.eval_every:
        return config.rollout
    return None


def apply_lora(model: torch.nn.Module, config: TrainConfig) -> torch.nn.Module:
    """``model`` wrapped by peft with a LoRA of rank ``config.lora_r`` on every linear layer."""
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, target_modules="all-linear", task_type="CAUSAL_LM")
    return get_peft_model(model, lora)


def _load_policy(path: str, kind: str, dtype: torch.dtype, trust_remote_code: bool) -> torch.nn.Module:
    if kind == "diffusion":
        return load_diffusion_lm(path, dtype=dtype, trust_remote_code=trust_remote_code)
    return load_causal_lm(path, dtype=dtype, trust_remote_code=trust_remote_code)


@dataclass
class _RoleBuilder:
    """Builds the roles besides the policy (``posttrain.algos.roles``) into the dictionaries the parts hold."""

    config: TrainConfig
    info: DistInfo
    tokenizer: Any
    dtype: torch.dtype
    initial_policy: torch.nn.Module | None
    models: dict[str, torch.nn.Module] = field(default_factory=dict)
    engines: dict[str, GenerationEngine] = field(default_factory=dict)
    deepspeed_models: dict[str, Any] = field(default_factory=dict)
    refreshed_roles: dict[str, ModelRole] = field(default_factory=dict)
    refreshed_modules: dict[str, torch.nn.Module] = field(default_factory=dict)

    def engine(self, spec: EngineSpec, model: torch.nn.Module, tokenizer: Any, dtype: torch.dtype | None = None) -> Any:
        """The engine ``spec`` names for ``model``: moved to this rank's device only when the engine runs it;
        ``dtype`` is the weights' dtype an engine that loads or receives its own weights serves (the model's
        when None)."""
        config, info = self.config, self.info
        if spec.borrows_module:
            model = model.to(info.device)
        return build_engine(spec, model=model, tokenizer=tokenizer, device=info.device,
                            max_batch_size=config.rollout_batch_size or config.per_rank_samples(info.world_size),
                            seed=config.seed, dtype=dtype)

    def module(self, role: ModelRole) -> tuple[torch.nn.Module, Any]:
        """A role's own module and tokenizer: a copy of the initial policy (the policy's tokenizer) or its
        checkpoint (whose tokenizer must be the policy's unless the role says otherwise), as a ``ValueModel``
        when the role's head is a value head."""
        if role.source == INITIAL_POLICY:
            module, tokenizer = copy.deepcopy(self.initial_policy), self.tokenizer
        else:
            path = resolve_model_name(role.checkpoint) if role.checkpoint else str(build_tiny(role.recipe))
            remote_code = self.config.trust_remote_code
            tokenizer = load_tokenizer(path, trust_remote_code=remote_code)
            if role.shares_tokenizer:
                check_same_tokenizer(role, self.tokenizer, tokenizer)
            module = load_causal_lm(path, dtype=self.dtype, trust_remote_code=remote_code)
        return (ValueModel(module) if role.head == "value" else module), tokenizer

    def add_trained(self, role: ModelRole) -> None:
        """A trained role besides the policy: its own DeepSpeed model and optimizer; its plain module is lent as
        ``ctx.models[name]``."""
        module = self.module(role)[0].requires_grad_(True)
        if self.config.disable_dropout:
            disable_dropout(module)
        deepspeed_model = initialize_deepspeed_model(module, self.config, self.info.world_size, lr=role.lr)
        self.deepspeed_models[role.name] = deepspeed_model
        self.models[role.name] = deepspeed_model.module
        log.info("model role %s: trained, from %s%s (lr %g)", role.name, role.checkpoint or role.recipe or role.source,
                 " with a value head" if role.head == "value" else "", role.lr or self.config.lr)

    def add_frozen(self, role: ModelRole) -> None:
        """A frozen role as declared: its module in ``ctx.models``, or, when it declares an engine, that engine in
        ``ctx.engines`` (refreshed from the policy if the role says so)."""
        module, tokenizer = self.module(role)
        module = module.eval().requires_grad_(False)
        if role.engine is None:
            self.models[role.name] = module.to(self.info.device)
        else:
            engine = self.engines[role.name] = self.engine(role.engine, module, tokenizer)
            if role.refresh_every:
                if getattr(engine, "model", None) is not module:  # the checkpoint saves and restores the module
                    raise ConfigError(role.config_field or role.name, role.engine,
                                      f"the refreshed {role.name} model needs an engine that runs the module it is "
                                      "given in process (hf)")
                self.refreshed_roles[role.name], self.refreshed_modules[role.name] = role, module
        log.info("model role %s: %s%s", role.name, role.checkpoint or role.recipe or role.source,
                 f", served by the {role.engine} engine" if role.engine else "")
