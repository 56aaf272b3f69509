"""The stored configuration of a llama.cpp session: which engine and build ran, with which
flags and model files, what the imported source was (its digest and how its lines were
counted), and which fields the source provides at all, so every reader can tell an
unknown value from a zero.

Our drafter and rollback names stand for llama.cpp's: `draft-mtp` is `mtp`,
`draft-simple` is `draft-model`; the rollback is `checkpoint` when the log says
verification uses checkpoints (FULL memory, then every restore verifies the accepted
tokens again: replay policy `reverify`), `per_token` when the target keeps per-sequence
recurrent states (`n_rs_seq`).
"""

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.llama.builds.exposed import build_exposure
from adapters.llama.ledger.responses import Responses
from adapters.llama.ledger.sampler import DRAW, claimed
from adapters.llama.ledger.tasks import TaskFold
from adapters.llama.log.reader import LogReading
from adapters.llama.log.records import RecordKind, SamplerChain, SamplerParams, SpecStats
from adapters.llama.server.options import our_drafter
from engine.config import ReplayPolicy, Strategy

ENGINE = "llama.cpp"
BACKEND = "llama"
TRACE_VERBOSITY = 4  # common/log.h: LOG_LEVEL_TRACE; the server's default is 3


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file, read in chunks (GGUF files are large)."""
    with Path(path).open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


@dataclass(frozen=True)
class Provenance:
    """What is known about a session besides its log: the source files, the server's
    flags and version output, the model files' digests, the run settings."""

    log_path: str | None = None
    responses_path: str | None = None
    flags: tuple[str, ...] | None = None
    version: str | None = None
    model_sha256: str | None = None
    draft_model_sha256: str | None = None
    prompt_ids: bool = False
    run: dict[str, Any] | None = None
    runs_in_file: int = 1
    prefixes: tuple[str, ...] = ()
    parts: tuple[str, ...] = ()
    """The log file's server runs, the shapes of the outer prefixes its lines carry, and
    the files of a rotated set it was read from, oldest first (empty: one file)."""


_PROMPT_PHASE = frozenset((RecordKind.CACHED, RecordKind.CTX_CREATED, RecordKind.CTX_RESTORED,
                           RecordKind.FULL_REPROCESS))


def shows_prompt_phase(reading: LogReading) -> bool:
    """Whether the log shows each request's prompt phase (where its prefill starts, the
    context checkpoints restored and made): with -v, and at the default verbosity of the
    builds that log these lines as information and warnings."""
    return any(r.kind in _PROMPT_PHASE for r in reading.records)


def provides(reading: LogReading, prompt_ids: bool) -> dict[str, Any]:
    """Which payload fields the source fills: what `-v` shows and what no log shows."""
    kinds = {r.kind for r in reading.records}
    verbose = bool(kinds & {RecordKind.DRAFT, RecordKind.DECODE, RecordKind.TOKEN})
    rs = verbose and not reading.server.spec_checkpoints and bool(reading.server.n_rs_seq)
    return {
        "rounds": verbose,
        "answer_ids": verbose,
        "prompt_ids": prompt_ids,
        "draft_ids": "logged" if RecordKind.CANDIDATE in kinds else
                     "accepted only" if verbose else False,
        "targets": "through the first rejection" if verbose else False,
        "context_checkpoints": shows_prompt_phase(reading),
        "select_restores": "inferred from n_rs_seq" if rs else False,
        "timestamps": any(r.t is not None for r in reading.records),
        "sampler": RecordKind.SAMPLER_CHAIN in kinds,
        "digests": False,
        "rollback_time": False,
    }


def drafter_name(reading: LogReading) -> str | None:
    """Our drafter chain as the log's speculative setup names it, in llama-server's order
    of precedence (the order it tries them in each round, whatever order it was given), or
    None (unknown). The setup names the chain at trace level (-v, or -lv 4 and up) while
    the server loads; below it only a model drafter shows (an MTP context, a draft model),
    never an n-gram drafter chained with it, so such a log names no chain. 'none' is known
    only from a log that shows the trace level and goes past the load without a drafter:
    one cut before, or without trace lines, names no drafter it did not see."""
    server = reading.server
    if server.implementations:
        return ",".join(our_drafter(t) for t in server.implementations)
    traced = server.verbosity is not None and server.verbosity >= TRACE_VERBOSITY
    if traced and server.loaded and not server.spec_types:
        return "none"
    return None


def drafter_stats(reading: LogReading) -> dict[str, dict[str, int]]:
    """Each drafter's cumulative statistics as the run's last `statistics` line of it
    prints them (since the server started: a piece of a log counts what came before)."""
    last: dict[str, SpecStats] = {}
    for r in reading.records:
        if isinstance(r, SpecStats):
            last[r.spec_type] = r
    return {name: {"line": s.line, "calls_draft": s.calls_draft, "calls_accept": s.calls_accept,
                   "gen_drafts": s.gen_drafts, "acc_drafts": s.acc_drafts,
                   "gen_tokens": s.gen_tokens, "acc_tokens": s.acc_tokens}
            for name, s in last.items()}


def sampling(reading: LogReading) -> dict[str, int]:
    """How the run's requests sampled, as their `sampler chain` and (-v) `sampler params`
    lines say: chains logged, how many draw (`dist`; at temperature 0 the temperature
    sampler leaves one token to draw), how many of those leave the temperature sampler idle
    (`?temp-ext`: temperature 1.0), and how many requests' parameters say temperature 0
    (greedy) or above it (sampled)."""
    chains = [r for r in reading.records if isinstance(r, SamplerChain)]
    draws = [c for c in chains if DRAW in c.active]
    temps = [p.get("temp") for p in reading.records if isinstance(p, SamplerParams)]
    return {"chains": len(chains), "draws": len(draws),
            "temperature_1": sum(1 for c in draws if {"temp-ext", "temp"} & set(c.idle)),
            "greedy": sum(1 for t in temps if t is not None and t <= 0.0),
            "sampled": sum(1 for t in temps if t is not None and t > 0.0)}


ALL_ACCEPTED_MIN = 8
"""A request counts towards `acceptance`'s all-accepted tally only with at least this many
drafted tokens: one with two drafts accepted says nothing."""


def acceptance(fold: TaskFold) -> dict[str, int]:
    """The requests' own draft totals (print_timing): how many print them, how many of
    those drafted at least ALL_ACCEPTED_MIN tokens, how many of these accepted every one,
    and the tokens drafted and accepted in all."""
    totals = [t.totals for t in fold.tasks if t.totals is not None]
    sized = [x for x in totals if x.generated >= ALL_ACCEPTED_MIN]
    return {"requests": len(totals), "sized": len(sized),
            "all_accepted": sum(1 for x in sized if x.accepted == x.generated),
            "generated": sum(x.generated for x in totals),
            "accepted": sum(x.accepted for x in totals), "min_drafts": ALL_ACCEPTED_MIN}


def session_config(reading: LogReading, fold: TaskFold, prov: Provenance,
                   responses: Responses | None, matched: int) -> dict[str, Any]:
    """The session's stored configuration."""
    server = reading.server
    speculative = drafter_name(reading) != "none"
    strategy = (Strategy.CHECKPOINT if server.spec_checkpoints else
                Strategy.PER_TOKEN if server.n_rs_seq else None) if speculative else None
    source: dict[str, Any] = {
        "kind": "llama-server log", "path": prov.log_path, "sha256": reading.sha256,
        "lines": reading.lines, "parsed": reading.parsed, "skipped": reading.skipped,
        "unknown": reading.unknown, "unknown_examples": reading.unknown_examples,
        "partial_line": reading.partial_line,
        "gzip_cut": reading.gzip_cut.to_dict() if reading.gzip_cut is not None else None,
        "tasks": len(fold.tasks),
        "truncated_tasks": [t.to_dict() for t in fold.truncated], "orphan_records": fold.orphans,
        "drafter_resets": fold.resets,
        "head_cut_tasks": [t.task for t in fold.tasks if t.head_cut],
        "unknown_shapes": reading.unknown_shapes.most_common(10),
        "prefixes": list(prov.prefixes), "parts": list(prov.parts),
        "run": {"index": reading.index + 1, "of": prov.runs_in_file,
                "first_line": reading.first_line, "last_line": reading.last_line,
                "pid": reading.pid, "wall_start": reading.wall_start,
                "ending": reading.ending.value, "last_lines": reading.last_lines},
        "server_log": reading.server_log.to_dict(),
        "overflows": [o.to_dict() for o in fold.overflows],
        "drafter_stats": drafter_stats(reading),
        "sampling": sampling(reading),
        "acceptance": acceptance(fold),
    }
    if responses is not None:
        source["responses"] = {"path": prov.responses_path, "sha256": responses.sha256,
                               "answers": len(responses.facts),
                               "without_timings": responses.without_timings,
                               "matched": matched}
    fingerprints = sorted({f.fingerprint for f in responses.facts if f.fingerprint}
                          ) if responses is not None else []
    run = prov.run or {}
    config = {
        "backend": BACKEND, "engine": ENGINE, "build": server.build,
        "version": prov.version, "fingerprint": fingerprints[0] if fingerprints else None,
        "flags": list(prov.flags) if prov.flags is not None else None,
        "drafter": drafter_name(reading), "spec_types": server.spec_types,
        "draft_max": server.draft_n_max,
        "strategy": strategy.value if strategy is not None else None,
        "replay_policy": ReplayPolicy.REVERIFY.value if strategy is Strategy.CHECKPOINT
        else None,
        "eog_policy": None, "slots": server.n_slots, "n_ctx_slot": server.n_ctx_slot,
        "ctx_checkpoints": server.ctx_checkpoints, "n_rs_seq": server.n_rs_seq,
        "n_ctx": server.n_ctx, "kv_unified": server.kv_unified,
        "spec_refused": server.spec_refused,  # the build refused speculation on this model
        "model": server.model, "model_sha256": prov.model_sha256,
        "draft_model": server.draft_model, "draft_model_sha256": prov.draft_model_sha256,
        "temperature": run.get("temperature"), "seed": run.get("seed"),
        "sampler": claimed(run["temperature"], run["top_k"], run["top_p"])
        if run else None,
        "turns": run.get("turns"), "source": source,
        "log_verbose": server.verbose, "provides": provides(reading, prov.prompt_ids),
        "run": prov.run, "structured_log": server.structured_log,
    }
    config["known_incidents"] = known_incidents(config)
    return config


def known_incidents(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Each known incident's verdict for the session's build (adapters/llama/builds/exposed.py),
    stored with the session so its postmortem can name a bug the build is known for."""
    exposure = build_exposure(config)
    if exposure is None:
        return []
    return [{"key": j.incident.key, "title": j.incident.title, "finding": j.incident.finding,
             "fix": j.incident.fix, "status": j.verdict.value} for j in exposure.judged]
