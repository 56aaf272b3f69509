"""The stored configuration of a vLLM session: which engine and version ran, with which
arguments and model directory, what the recorded answers were (their file's digest),
which fields the source provides at all (so every reader can tell an unknown value from a
zero), and what the engine's settings cost the conversation.

Our drafter and rollback names stand for vLLM's: `ngram-simple` is its `ngram` (prompt
lookup), `mtp` its MTP method; the rollback is
`per_token` (vLLM keeps the recurrent state of every verified position of a hybrid model
and continues from the accepted one).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from adapters.vllm.answers import Answer, Answers
from adapters.vllm.ledger import VllmLedgerResult
from adapters.vllm.options import KV_CACHE_GIB, VllmOptions
from adapters.vllm.paths import workarounds
from engine.config import Strategy

ENGINE = "vLLM"
BACKEND = "vllm"
PREFIX_CACHING_OFF = ("vLLM's CPU build cannot keep a hybrid model's prefix cache under "
                      "speculative decoding: the 'align' Mamba cache mode copies GDN states "
                      "with a Triton kernel the CPU build lacks "
                      "(mamba_utils.run_fused_precopy: \"'function' object is not "
                      "subscriptable\"); so every turn prefills the whole conversation again")


@dataclass(frozen=True)
class Provenance:
    """What is known about a session besides its answers: the server's arguments and log,
    vLLM's version (`/version`), the model directory's digest (engine/model_digest.py, the
    same as our engine's), the run settings, and the answers file."""

    args: tuple[str, ...]
    log_path: str
    answers_path: str
    version: str | None
    model: str
    model_sha256: str | None
    run: dict[str, Any]


def provides(opts: VllmOptions, placed: int, turns: int) -> dict[str, Any]:
    """Which payload fields the source fills (`placed` of `turns` turns have rounds)."""
    speculative = opts.method is not None
    rounds: bool | str = (True if placed == turns else
                          f"where the stream places them ({placed} of {turns} turns)"
                          if placed else False)
    return {
        "rounds": rounds,
        "answer_ids": True,
        "prompt_ids": True,
        "draft_ids": "accepted only" if speculative else False,
        "targets": "through the first rejection" if speculative else True,
        "context_checkpoints": True,  # the kept prefix and what is prefilled again
        "select_restores": "inferred from vLLM's per-token states" if speculative else False,
        "timestamps": "per request",
        "sampler": False,
        "digests": False,
        "rollback_time": False,
        "counters": "Prometheus, per request",
    }


def reprefill_cost(answers: Sequence[Answer], result: VllmLedgerResult) -> dict[str, Any]:
    """What the engine's prefix setting cost the conversation: history tokens prefilled
    again and the prefill time that took (in proportion of the turn's prefill), against
    the tokens first seen."""
    again = sum(t.reprefill_tokens or 0 for t in result.turns)
    prefilled = sum(t.prefill_tokens or 0 for t in result.turns)
    seconds = sum(t.reprefill_s or 0.0 for t in result.turns)
    return {"reprefill_tokens": again, "prefill_tokens": prefilled,
            "new_tokens": prefilled - again, "reprefill_s": round(seconds, 6),
            "prompt_tokens": [a.prompt_tokens for a in answers]}


def session_config(opts: VllmOptions, prov: Provenance, answers: Answers,
                   result: VllmLedgerResult, failure: str | None) -> dict[str, Any]:
    """The session's stored configuration."""
    run = prov.run
    spec = opts.speculative_config()
    fingerprints = sorted({a.fingerprint for a in answers.answers if a.fingerprint})
    return {
        "backend": BACKEND, "engine": ENGINE, "version": prov.version,
        "fingerprint": fingerprints[0] if fingerprints else None,
        "flags": list(prov.args),
        "drafter": run.get("drafter"), "method": opts.method.value if opts.method else None,
        "speculative_config": spec,
        "draft_max": opts.draft_max if spec is not None else None,
        "strategy": Strategy.PER_TOKEN.value if spec is not None else None,
        "replay_policy": None, "eog_policy": None, "slots": 1,
        "dtype": "bfloat16", "max_model_len": opts.max_model_len, "eager": opts.eager,
        "kv_cache_gib": KV_CACHE_GIB, "workarounds": workarounds(),
        "prefix_caching": opts.prefix_caching,
        "prefix_caching_off_why": PREFIX_CACHING_OFF if not opts.prefix_caching else None,
        "reprefill": reprefill_cost(answers.answers, result),
        "model": prov.model, "model_dir": str(opts.model), "model_sha256": prov.model_sha256,
        "temperature": run.get("temperature"), "seed": run.get("seed"),
        "turns": run.get("turns"),
        "source": {"kind": "vLLM answers", "path": prov.answers_path,
                   "sha256": answers.sha256, "answers": len(answers.answers),
                   "placed": result.placed, "log": prov.log_path, "failure": failure},
        "provides": provides(opts, result.placed, len(answers.answers)),
        "run": run,
    }
