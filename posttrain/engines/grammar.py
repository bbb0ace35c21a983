"""JSON-schema constrained decoding for the HF engine's loop (``SamplingParams.json_schema``): xgrammar
token bitmasks.

``SchemaCompiler`` holds xgrammar's view of one tokenizer (``TokenizerInfo``, built once per engine: it
scans the vocabulary) and compiles a schema once per ``generate`` call; ``RowGrammars`` holds one
``GrammarMatcher`` per row of a batch. Each decoding step the engine asks ``mask_`` to set every token
the row's grammar forbids to ``-inf`` (before temperature, top-k and top-p, so the recorded log-probs are
those of the masked distribution), then ``accept``s the sampled tokens.

The grammar is the one vLLM's xgrammar backend compiles for our vLLM engine (started with
``disable_any_whitespace``), so constrained greedy decoding agrees across the engines:
``compile_json_schema`` with ``any_whitespace=False`` and strict mode (no properties beyond those the schema
names unless it allows them), and the matcher's stop tokens are the engine's (the eos and
``SamplingParams.stop_token_ids``), which the grammar allows only once the JSON document is complete.
Compact JSON (no whitespace between tokens) because a small model under a grammar that allows whitespace
can spend its whole budget on it: a random tiny model loops on spaces, and SmolLM2-135M writes each value
on its own indented line, so that a five-key judge answer no longer fits in 48 tokens.

xgrammar is imported lazily: it is the ``structured`` extra (``pip install -e ".[structured]"``; vLLM
installs it too), because on x86-64 Linux it pulls triton.
"""

from __future__ import annotations

from typing import Any

import torch

from posttrain.engines.base import SamplingParamsError

INSTALL_HINT = 'JSON-schema constrained decoding needs xgrammar: pip install -e ".[structured]"'


def import_xgrammar() -> Any:
    """``xgrammar``, or an ImportError naming the extra to install."""
    try:
        import xgrammar
    except ImportError as err:
        raise ImportError(INSTALL_HINT) from err
    return xgrammar


class SchemaCompiler:
    """Compiles JSON schemas into grammars over ``tokenizer``'s tokens, for logits of width ``vocab_size``
    (the model's; ids past the tokenizer's vocabulary are never allowed)."""

    def __init__(self, tokenizer: Any, vocab_size: int) -> None:
        self.xgr = import_xgrammar()
        self.vocab_size = vocab_size
        info = self.xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
        self._compiler = self.xgr.GrammarCompiler(info, max_threads=1)

    def compile(self, schema: str, engine: str) -> JsonGrammar:
        """The grammar of ``schema``; ``SamplingParamsError`` naming ``engine`` when xgrammar cannot
        compile it."""
        try:
            compiled = self._compiler.compile_json_schema(schema, any_whitespace=False)
        except RuntimeError as err:
            raise SamplingParamsError(f"{engine}: xgrammar cannot compile json_schema ({str(err).strip()})") from None
        return JsonGrammar(self.xgr, compiled, self.vocab_size)


class JsonGrammar:
    """One compiled schema; ``rows`` starts the matchers of one batch."""

    def __init__(self, xgr: Any, compiled: Any, vocab_size: int) -> None:
        self.xgr, self.compiled, self.vocab_size = xgr, compiled, vocab_size

    def rows(self, count: int, stop_ids: list[int]) -> RowGrammars:
        """Fresh matchers for ``count`` rows, allowing ``stop_ids`` once a row's document is complete."""
        return RowGrammars(self.xgr, self.compiled, count, stop_ids, self.vocab_size)


class RowGrammars:
    """One grammar matcher per row; see the module docstring."""

    def __init__(self, xgr: Any, grammar: Any, count: int, stop_ids: list[int], vocab_size: int) -> None:
        self.xgr = xgr
        self.matchers = [xgr.GrammarMatcher(grammar, override_stop_tokens=stop_ids) for _ in range(count)]
        self.bitmask = xgr.allocate_token_bitmask(count, vocab_size)

    def mask_(self, logits: torch.Tensor, live: list[bool]) -> torch.Tensor:
        """Float32 ``logits`` ``[B, V]`` with every token a live row's grammar forbids at ``-inf`` (done
        rows are left as they are: their tokens are discarded)."""
        logits = logits.float()
        rows = [row for row, alive in enumerate(live) if alive]
        for row in rows:
            self.matchers[row].fill_next_token_bitmask(self.bitmask, row)
        if rows:
            self.xgr.apply_token_bitmask_inplace(logits, self.bitmask.to(logits.device), indices=rows)
        return logits

    def accept(self, tokens: list[int], live: list[bool]) -> None:
        """Advance every live row's matcher by its sampled token (one its mask allowed)."""
        for row, (token, alive) in enumerate(zip(tokens, live)):
            if alive and not self.matchers[row].accept_token(token):
                raise RuntimeError(f"row {row}: the grammar rejected token {token}, which its own mask allowed")

    def terminated(self) -> list[bool]:
        """Per row: the grammar accepted a stop token after a complete JSON document."""
        return [m.is_terminated() for m in self.matchers]
