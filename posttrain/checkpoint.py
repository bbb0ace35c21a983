"""Checkpoints: save and resume everything a run needs to continue exactly where it stopped.

Layout of ``<output_dir>/checkpoints/step_<N>/``:
  hf/                 the policy in Hugging Face format (safetensors + tokenizer), loadable on its own
  ds/                 the policy's DeepSpeed state: weights, optimizer, LR scheduler (every rank writes its part)
  ds_<role>/          the same for each trained role besides the policy (e.g. ds_critic/ for PPO's critic)
  role_<role>.pt      the weights of each frozen role the trainer refreshes from the policy (e.g. DuPO's solver)
  rng_rank<r>.pt      every RNG of rank r (python, numpy, torch) and the trainer's generators
  trainer_state.json  step, data position and anything an algorithm keeps between steps
  COMPLETE            written last; a directory without it is an interrupted save and is ignored

A save goes to ``step_<N>.partial`` and is renamed once every rank has finished, so a run killed
mid-save never leaves a checkpoint that looks complete.
"""

from __future__ import annotations

import copy
import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from posttrain.dist import DistInfo, barrier, gathered_named_parameters

_STEP_DIR = re.compile(r"^step_(\d+)$")


def checkpoint_root(output_dir: str | os.PathLike) -> Path:
    return Path(output_dir) / "checkpoints"


def list_checkpoints(output_dir: str | os.PathLike) -> list[Path]:
    """Complete checkpoints, oldest first."""
    root = checkpoint_root(output_dir)
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _STEP_DIR.match(p.name)) and (p / "COMPLETE").exists()]
    return [p for _, p in sorted(found)]


def resolve_resume(resume: str | None, output_dir: str | os.PathLike) -> Path | None:
    """'auto' -> newest complete checkpoint (or None for a fresh run); a path -> that checkpoint."""
    if resume is None:
        return None
    if resume == "auto":
        found = list_checkpoints(output_dir)
        return found[-1] if found else None
    path = Path(resume)
    if not (path / "COMPLETE").exists():
        raise FileNotFoundError(f"--resume {resume}: not a complete checkpoint (no COMPLETE marker)")
    return path


def _rng_state(generators: dict[str, torch.Generator]) -> dict[str, Any]:
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "generators": {k: g.get_state() for k, g in generators.items()},
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _restore_rng(state: dict[str, Any], generators: dict[str, torch.Generator]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    for key, gen_state in state["generators"].items():
        generators[key].set_state(gen_state)


def export_hf(deepspeed_model: Any, tokenizer: Any, directory: Path, zero_stage: int, is_main: bool) -> None:
    """Write the policy as a standalone Hugging Face checkpoint (LoRA adapters merged into a copy)."""
    module = deepspeed_model.module
    if hasattr(module, "merge_and_unload"):  # PEFT; LoRA with ZeRO-3 is rejected at start-up
        if is_main:
            copy.deepcopy(module).merge_and_unload().save_pretrained(directory, safe_serialization=True)
            tokenizer.save_pretrained(directory)
        return
    state: dict[str, torch.Tensor] = {}
    for name, tensor in gathered_named_parameters(module, zero_stage):  # every rank joins each gather
        if is_main:
            state[name] = tensor.clone()
    if is_main:
        module.save_pretrained(directory, state_dict=state, safe_serialization=True)
        tokenizer.save_pretrained(directory)


def save_checkpoint(
    deepspeed_model: Any,
    tokenizer: Any,
    output_dir: str | os.PathLike,
    step: int,
    trainer_state: dict[str, Any],
    generators: dict[str, torch.Generator],
    info: DistInfo,
    zero_stage: int,
    keep_last: int,
    role_deepspeed_models: dict[str, Any] | None = None,
    refreshed_roles: dict[str, torch.nn.Module] | None = None,
) -> Path:
    """Save the run at ``step`` (module docstring); ``role_deepspeed_models`` are the trained roles besides the
    policy, ``refreshed_roles`` the modules of the frozen roles the trainer refreshes."""
    root = checkpoint_root(output_dir)
    final = root / f"step_{step}"
    partial = root / f"step_{step}.partial"
    if info.is_main:
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
    barrier(info.world_size)
    deepspeed_model.save_checkpoint(str(partial / "ds"), tag="state")
    for name, role_model in (role_deepspeed_models or {}).items():
        role_model.save_checkpoint(str(partial / f"ds_{name}"), tag="state")
    if info.is_main:  # every rank holds the same copy
        for name, module in (refreshed_roles or {}).items():
            torch.save({k: v.detach().cpu() for k, v in module.state_dict().items()}, partial / f"role_{name}.pt")
    torch.save(_rng_state(generators), partial / f"rng_rank{info.rank}.pt")
    export_hf(deepspeed_model, tokenizer, partial / "hf", zero_stage, info.is_main)
    barrier(info.world_size)
    if info.is_main:
        (partial / "trainer_state.json").write_text(json.dumps(trainer_state, indent=2))
        (partial / "COMPLETE").write_text(str(step))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(partial, final)
        if keep_last:
            for old in list_checkpoints(output_dir)[:-keep_last]:
                shutil.rmtree(old, ignore_errors=True)
    barrier(info.world_size)
    return final


def load_checkpoint(
    deepspeed_model: Any, path: Path, generators: dict[str, torch.Generator], info: DistInfo,
    role_deepspeed_models: dict[str, Any] | None = None, refreshed_roles: dict[str, torch.nn.Module] | None = None,
) -> dict[str, Any]:
    """Restore the trained models (the policy's and ``role_deepspeed_models``: weights, optimizer, scheduler),
    the refreshed frozen roles' weights and the RNGs in place; returns the trainer state."""
    for name, module in (refreshed_roles or {}).items():
        role_file = path / f"role_{name}.pt"
        if not role_file.exists():
            raise FileNotFoundError(f"{role_file} is missing: was the checkpoint written by another --algo?")
        module.load_state_dict(torch.load(role_file, map_location="cpu"))
    models = [("ds", deepspeed_model), *((f"ds_{name}", m) for name, m in (role_deepspeed_models or {}).items())]
    for folder, each in models:
        if not (path / folder).is_dir():
            raise FileNotFoundError(f"{path / folder} is missing: was the checkpoint written by another --algo?")
        load_path, _ = each.load_checkpoint(str(path / folder), tag="state", load_optimizer_states=True,
                                            load_lr_scheduler_states=True)
        if load_path is None:
            raise RuntimeError(f"DeepSpeed could not load the checkpoint in {path / folder}")
    rng_file = path / f"rng_rank{info.rank}.pt"
    if not rng_file.exists():
        raise FileNotFoundError(f"{rng_file} is missing: was the checkpoint written with a different world size?")
    _restore_rng(torch.load(rng_file, weights_only=False), generators)
    return json.loads((path / "trainer_state.json").read_text())
