"""A drafter benchmark run: recorded (or not), read back from its events' fold, and summed
up per configuration (the fastest of its repeats, its speedup over plain decode)."""

from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from engine.config import BackendKind, RunConfig
from eventlog.fold import LogFold, fold_log, fold_session
from fsm.turn_metrics import TurnMetrics
from specbench.common import WARMUP_TOKENS, BenchOptions, group_by, timed
from specledger.api import run_session

PLAIN = "none"


@dataclass
class Run:
    """One run: its configuration's identity, its numbers and its answer. `acceptance` is
    the synthetic drafter's per-token setting (sim), 0 elsewhere; `session` is 0 for an
    unrecorded run."""

    backend: str
    drafter: str
    acceptance: float
    draft: int
    repeat: int
    session: int
    wall_s: float
    generated: int
    rounds: int
    draft_rounds: int
    drafted: int
    accepted: int
    decode_s: float
    draft_s: float
    answer: list[int]

    @classmethod
    def of(cls, config: RunConfig, turns: Sequence[TurnMetrics], fold: LogFold, *,
           session: int = 0, repeat: int = 0, wall_s: float = 0.0) -> "Run":
        """A run of `config` from its turn metrics and its events' fold (the committed
        answer, the draft phase's seconds, the rounds that verified drafts)."""
        synthetic = config.drafter == "synthetic"
        records = fold.records.values()
        return cls(
            backend=config.backend.value, drafter=config.drafter,
            acceptance=config.acceptance if synthetic else 0.0,
            draft=0 if config.drafter == PLAIN else config.draft_max, repeat=repeat,
            session=session, wall_s=wall_s,
            generated=sum(t.generated_tokens for t in turns),
            rounds=sum(t.rounds for t in turns), draft_rounds=sum(r.verifies for r in records),
            drafted=sum(t.drafted for t in turns), accepted=sum(t.accepted for t in turns),
            decode_s=sum(t.decode_s for t in turns),
            draft_s=sum(r.phase_s.get("draft", 0.0) for r in records),
            answer=[tok for r in records for tok in r.committed])

    @property
    def key(self) -> tuple[str, float, int]:
        """The configuration this run repeats."""
        return (self.drafter, self.acceptance, self.draft)

    @property
    def plain(self) -> bool:
        """Plain decode (no drafter)."""
        return self.drafter == PLAIN

    @property
    def rate(self) -> float:
        """Accepted over drafted tokens."""
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def accepted_per_round(self) -> float:
        """Mean accepted tokens per round that verified drafts."""
        return self.accepted / self.draft_rounds if self.draft_rounds else 0.0

    @property
    def s_per_token(self) -> float:
        """Decode seconds per generated token."""
        return self.decode_s / max(self.generated, 1)

    @property
    def tok_s(self) -> float:
        """Generated tokens per decode second."""
        return self.generated / self.decode_s if self.decode_s else 0.0

    @property
    def draft_share(self) -> float:
        """Draft phase over decode time."""
        return self.draft_s / self.decode_s if self.decode_s else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-able mapping with the derived numbers (the answer as its length)."""
        return asdict(self) | {
            "answer": len(self.answer), "acceptance_rate": self.rate,
            "accepted_per_round": self.accepted_per_round, "s_per_token": self.s_per_token,
            "tok_s": self.tok_s, "draft_share": self.draft_share}


def run_unrecorded(config: RunConfig, ckpt: Any = None, repeat: int = 0) -> Run:
    """Run `config` into memory, not the log (warm-ups, the lossless sweep); `ckpt` is a
    loaded checkpoint the torch backend shares across runs."""
    from engine.session import MemoryJournal, Session

    journal = MemoryJournal()
    turns, wall = timed(Session(config, journal, backend=_backend(config, ckpt)).run)
    return Run.of(config, turns, fold_log(journal.events), repeat=repeat, wall_s=wall)


def _backend(config: RunConfig, ckpt: Any) -> Any:
    """Our torch backend over the shared checkpoint `ckpt` for a torch `config`; None (the
    session builds its own) for any other."""
    if config.backend is not BackendKind.TORCH:
        return None
    from engine.hybrid.backend import TorchBackend

    return TorchBackend(config, ckpt)


def record(config: RunConfig, opts: BenchOptions, log: Any, ckpt: Any = None,
           repeat: int = 0) -> Run:
    """Run and record `config` (a torch backend over the shared checkpoint `ckpt`), then
    read its events back from the log."""
    result, wall = timed(run_session, config, opts.db, backend=_backend(config, ckpt))
    return Run.of(config, result.turns, fold_session(log, result.session_id),
                  session=result.session_id, repeat=repeat, wall_s=wall)


def recorded_passes(opts: BenchOptions, configs: Sequence[RunConfig], repeats: int, log: Any,
                    ckpt: Any, progress: Callable[[int], str]) -> list[Run]:
    """`repeats` interleaved passes of `configs` on our torch engine over the shared
    checkpoint `ckpt`, recorded into `log` (interleaved: a burst of load on the shared
    CPU hits them all); `progress(i)` is pass i's log line. Unrecorded warm-ups first (one
    short turn of one slot each), so that first-call costs (allocations, the drafters'
    first forwards) land on no measured run."""
    import torch

    torch.set_num_threads(opts.threads)
    for c in configs:
        run_unrecorded(c.replace(turns=1, slots=1, max_answer_tokens=WARMUP_TOKENS), ckpt)
    runs: list[Run] = []
    for i in range(repeats):
        opts.log(progress(i))
        runs += [record(c, opts, log, ckpt, repeat=i) for c in configs]
    return runs


def fastest(runs: Iterable[Run]) -> dict[tuple[str, float, int], Run]:
    """Each configuration's fastest run (least decode time per token): load from other
    jobs on a shared CPU only ever adds time, so the minimum is the steadiest estimate."""
    return {key: min(repeats, key=lambda r: r.s_per_token)
            for key, repeats in group_by(runs, lambda r: r.key).items()}


def summary(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """One row per configuration, plain decode first: the fastest run's numbers, its
    speedup over plain decode's fastest run, and whether every run of it committed plain
    decode's answer."""
    best = fastest(runs)
    plain = next(r for r in best.values() if r.plain)
    reference = next(r.answer for r in runs if r.plain)
    every = group_by(runs, lambda r: r.key)
    return [{
        "drafter": r.drafter, "setting": r.acceptance, "draft": r.draft,
        "sessions": [x.session for x in every[key]], "best_session": r.session,
        "generated": r.generated, "rounds": r.rounds, "draft_rounds": r.draft_rounds,
        "drafted": r.drafted, "accepted": r.accepted, "acceptance": r.rate,
        "accepted_per_round": r.accepted_per_round, "tok_s": r.tok_s,
        "s_per_token": r.s_per_token, "s_per_token_runs": [x.s_per_token
                                                            for x in every[key]],
        "speedup": plain.s_per_token / r.s_per_token if r.s_per_token else 0.0,
        "draft_share": r.draft_share,
        "lossless": all(x.answer == reference for x in every[key]),
    } for key, r in sorted(best.items(), key=lambda kv: not kv[1].plain)]  # plain first
