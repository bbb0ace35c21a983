"""The engine contracts shared by the trainer, the reward server and the data pipelines.

- ``GenerationEngine``: ``generate(prompt_ids, SamplingParams) -> Rollouts`` on token-id prompts, and the
  ``tokenizer`` that made those ids (hf, diffusion, vLLM and the OpenAI-compatible HTTP client).
- ``RolloutEngine``: a generation engine the trainer can push new policy weights into
  (``update_weights``): hf, diffusion, vLLM.
- Capabilities an engine declares by subclassing them, which callers check with ``isinstance``:
  ``SyncsWeights`` (``sync_from``: takes the trainer's ``TrainerWeights`` whole, the colocated and remote vLLM
  engines) and ``Sleeps`` (``sleep`` / ``wake_up``: frees its accelerator memory while the trainer trains, the
  colocated vLLM engine). ``engines.weight_sync.load_weights`` / ``rest_rollout`` / ``wake_rollout`` use them.
- ``SamplingParams.json_schema``: structured output. The completion must be one JSON document valid under
  the schema; the hf engine masks every step's logits with an xgrammar token bitmask
  (``engines/grammar.py``), vLLM uses its structured outputs, the HTTP client sends the schema as
  ``response_format``; an engine that cannot constrain decoding (the diffusion sampler) raises
  ``SamplingParamsError`` naming itself (``refuse_json_schema``), never ignores it.
- ``ScoringEngine``: ``score(sequences) -> list[TokenScores]`` (per-token log-probs, entropies, the DMAP
  mass above the observed token, full distributions where the engine has them; see
  ``posttrain.engines.scores``): exact on the HF engine, top-k approximations on vLLM and HTTP.

Scoring convention (the same as ``posttrain.models.likelihood.causal_token_logprobs``): a sequence of ids
``x_0..x_{T-1}`` gets values for positions ``1..T-1``, ``logprobs[t-1] = log p(x_t | x_<t)``; callers that
score text prepend the BOS token themselves so that the first real token is scored too.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import torch

from posttrain.common.seeds import derive_seed
from posttrain.engines.scores import TokenScores

if TYPE_CHECKING:  # the annotation of SyncsWeights only; its module, not the package, whose sync.py imports this one
    from posttrain.engines.weight_sync.weights import TrainerWeights


class SamplingParamsError(ValueError):
    """An engine cannot honour these sampling params (a JSON-schema constraint it cannot apply, or a schema
    its grammar compiler rejects); the message names the engine. The reward server answers it with 400."""


def check_json_schema(text: str) -> None:
    """``ValueError`` naming ``json_schema`` unless ``text`` is a JSON Schema document: valid JSON, an
    object, and valid under its metaschema (``jsonschema``)."""
    try:
        schema = json.loads(text)
    except (TypeError, json.JSONDecodeError) as err:
        raise ValueError(f"json_schema is not valid JSON ({err})") from None
    if not isinstance(schema, dict):
        raise ValueError(f"json_schema must be a JSON object (a JSON Schema), got a {type(schema).__name__}")
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as err:
        where = "/".join(str(p) for p in err.absolute_path) or "(root)"
        raise ValueError(f"json_schema is not a valid JSON Schema at {where}: {err.message}") from None


PROCESSED_LOGPROBS = "processed_logprobs"
"""vLLM's ``logprobs_mode`` every vLLM engine here runs with: the log-probs of the distribution actually sampled
from (after temperature, top-k, top-p), as the HF engine records them and the importance weights need."""


@dataclass(frozen=True)
class SamplingParams:
    """How to sample completions. Sampling log-probs are those of the *processed* distribution
    (after the JSON-schema mask, temperature, top-k and top-p), which is what the importance ratio needs."""

    max_new_tokens: int = 32
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 disables top-k
    seed: int | None = None
    stop_token_ids: tuple[int, ...] = ()  # besides the tokenizer's eos
    # A JSON Schema (as text, so the params stay hashable) the completion must satisfy: decoding is
    # constrained to one JSON document valid under it, ended by a stop token; None = free text.
    json_schema: str | None = None

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if self.json_schema is not None:
            check_json_schema(self.json_schema)


@dataclass
class Rollouts:
    """One completion per input prompt, in input order."""

    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]  # includes the eos token when generation stopped on it
    texts: list[str]  # decoded completions, special tokens removed
    logprobs: list[list[float]]  # per completion token, under the sampling distribution
    finish_reasons: list[str] = field(default_factory=list)  # "stop" or "length"
    weight_version: int = 0  # the engine's weight version that produced these completions
    FINISH_REASONS: ClassVar[tuple[str, ...]] = ("stop", "length")
    """The finish reasons a rollout may have; an engine treats any other (vLLM's ``"abort"``, ``"error"``,
    ``"repetition"``) as a failed request, whose partial output is no rollout."""

    def __len__(self) -> int:
        return len(self.completion_ids)


@runtime_checkable
class GenerationEngine(Protocol):
    """Generates one completion per tokenised prompt; ``tokenizer`` is the one the ids belong to."""

    tokenizer: Any

    def generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> Rollouts: ...


@runtime_checkable
class RolloutEngine(GenerationEngine, Protocol):
    """A generation engine that also receives new policy weights (the trainer's rollout engine)."""

    def update_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None: ...


@runtime_checkable
class SyncsWeights(Protocol):
    """Capability: the engine takes the trainer's weights whole for a sync (vLLM's weight-transfer protocol
    pulls them a decoder layer at a time), instead of ``update_weights``' named tensors one at a time."""

    def sync_from(self, weights: TrainerWeights, version: int) -> None:
        """Load ``weights`` (the trainer's state after step ``version``) and record ``version``; under ZeRO-3
        every training rank calls it together (iterating ``weights`` runs the gathers)."""
        ...


@runtime_checkable
class Sleeps(Protocol):
    """Capability: the engine frees its accelerator memory while the trainer trains (``sleep``; its weights too
    when ``discard_weights``, because a sync replaces them before the engine is used again), takes back the weights
    alone before a sync (``wake_weights``) and everything before it is used (``wake_up``)."""

    def sleep(self, discard_weights: bool = False) -> None: ...

    def wake_weights(self) -> None: ...

    def wake_up(self) -> None: ...


@runtime_checkable
class ScoringEngine(Protocol):
    """Scores token-id sequences under the engine's model (see the module docstring's convention).

    ``entropy`` / ``mass_above`` ask for per-position entropies and DMAP mass-above values, ``full`` for
    the ``[T-1, V]`` log-prob distributions (engines that only see top-k log-probs refuse ``full``).
    ``TokenScores.exact`` is False where values come from a top-k approximation.
    """

    tokenizer: Any

    def score(self, sequences: list[list[int]], *, entropy: bool = True, mass_above: bool = False,
              full: bool = False) -> list[TokenScores]: ...


def refuse_json_schema(params: SamplingParams, engine: str) -> None:
    """For engines that cannot constrain decoding: ``SamplingParamsError`` naming ``engine`` when
    ``params`` asks for a JSON schema."""
    if params.json_schema is not None:
        raise SamplingParamsError(f"{engine} cannot constrain decoding to a JSON schema (SamplingParams.json_schema); "
                                  "use the hf, vllm or HTTP engine")


def sample_seed(seed: int, index: int) -> int:
    """The seed of sample ``index`` of a call seeded with ``seed``, for engines and servers that seed each
    sample on its own (so that G copies of one prompt still differ): ``derive_seed(seed, index)`` in 31 bits,
    which every engine's seed type takes."""
    return derive_seed(seed, index, bits=31)


def stop_token_ids(params: SamplingParams, eos_token_id: int | None) -> tuple[int, ...]:
    """The token ids that end a completion, for every engine alike (in process or remote): ``params.stop_token_ids``
    and the tokenizer's eos, sorted. The ending token is kept in the completion."""
    ids = set(params.stop_token_ids)
    if eos_token_id is not None:
        ids.add(int(eos_token_id))
    return tuple(sorted(ids))


def sample_seeds(seed: int, prompt_ids: list[list[int]]) -> list[int]:
    """The seed of every sample of a call seeded ``seed``: a run of identical consecutive prompts (G copies of
    one prompt) starting at index ``i`` is seeded ``sample_seed(seed, i) + j`` for its copy ``j``, the seeds
    vLLM gives the ``n`` samples of one request seeded ``sample_seed(seed, i)`` (its parallel sampling seeds
    child ``j`` with ``seed + j``). So a remote worker can draw a whole group in one request (``n`` > 1) and
    get the samples the colocated engine draws one request each; a prompt unlike its predecessor gets
    ``sample_seed(seed, i)``.

    >>> a = sample_seed(5, 0)
    >>> sample_seeds(5, [[1], [1], [2]]) == [a, a + 1, sample_seed(5, 2)]
    True
    """
    seeds: list[int] = []
    for i, prompt in enumerate(prompt_ids):
        continues_run = i > 0 and list(prompt) == list(prompt_ids[i - 1])
        seeds.append(seeds[-1] + 1 if continues_run else sample_seed(seed, i))
    return seeds


def check_prompts(prompt_ids: list[list[int]]) -> None:
    """Every prompt is a non-empty token-id list (text must be tokenised by the caller)."""
    for i, prompt in enumerate(prompt_ids):
        if isinstance(prompt, str):
            raise TypeError(f"prompt {i} is text; generate takes token-id lists (tokenize it first)")
        if len(prompt) == 0:
            raise ValueError(f"prompt {i} is empty; every prompt needs at least one token")


def start_generation(prompt_ids: list[list[int]], params: SamplingParams, device: torch.device | str) -> torch.Generator:
    """Checks shared by every engine's ``generate`` (``check_prompts``) and its sampling generator:
    seeded from ``params.seed``, or freshly seeded when there is none (global RNG never touched)."""
    check_prompts(prompt_ids)
    generator = torch.Generator(device=device)
    if params.seed is None:
        generator.seed()
    else:
        generator.manual_seed(params.seed)
    return generator


def check_score_inputs(sequences: list[list[int]]) -> list[list[int]]:
    """Checks shared by every engine's ``score``: token-id lists (not text) of at least 2 tokens each.
    Returns the sequences as plain lists."""
    checked = []
    for i, seq in enumerate(sequences):
        if isinstance(seq, str):
            raise TypeError(f"sequence {i} is text; score takes token-id lists (tokenize it first, with the BOS "
                            "token in front to score its first token too)")
        ids = list(seq)
        if len(ids) < 2:
            raise ValueError(f"sequence {i} has {len(ids)} token(s); scoring needs at least 2")
        checked.append(ids)
    return checked
