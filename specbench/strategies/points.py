"""The strategies suite's grid points: one recorded run folded from its events into phase
times, tokens and answer, and what the points say together (speedups, losslessness)."""

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Engine

from engine.config import BackendKind, RunConfig, Strategy
from eventlog.fold import fold_session
from specbench.common import group_by
from specledger.api import run_session

STRATEGIES = tuple(s.value for s in Strategy)
CORRECT = ("checkpoint", "per_token", "input_replay")  # `none` keeps rejected tokens
COST_PHASES = ("checkpoint", "verify", "rollback", "commit")


@dataclass
class Point:
    """One recorded run: where it sits in the grid and what its events say. `profile` is
    the sim's cost profile, or the torch model's folder."""

    backend: str
    profile: str
    strategy: str
    acceptance: float
    draft: int
    repeat: int
    session: int
    generated: int
    rounds: int
    drafted: int
    accepted: int
    violations: int
    phase_s: dict[str, float]
    rollback_s: float
    extra_bytes: float
    answer: list[int]

    @property
    def strategy_s(self) -> float:
        """The strategy's time: every phase but drafting."""
        return sum(self.phase_s.get(p, 0.0) for p in COST_PHASES)

    @property
    def ms_per_token(self) -> float:
        """Strategy time per committed token, in milliseconds."""
        return 1e3 * self.strategy_s / max(self.generated, 1)

    @property
    def rollback_share(self) -> float:
        """Rollback phase over the strategy's time."""
        return self.phase_s.get("rollback", 0.0) / self.strategy_s if self.strategy_s else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-able mapping with the derived numbers (the answer tokens left out)."""
        out = asdict(self)
        del out["answer"]
        return out | {"strategy_s": self.strategy_s, "ms_per_token": self.ms_per_token,
                      "rollback_share": self.rollback_share}


def measure(config: RunConfig, db: str, log: Engine, extra_bytes: float,
            repeat: int = 0) -> Point:
    """Run and record `config`, then fold its events into a `Point`."""
    result = run_session(config, db)
    phases: dict[str, float] = defaultdict(float)
    answer: list[int] = []
    for rec in fold_session(log, result.session_id).records.values():
        for phase, seconds in rec.phase_s.items():
            phases[phase] += seconds
        answer += rec.committed
    turns = result.turns
    return Point(
        backend=config.backend.value,
        profile=config.profile if config.backend is BackendKind.SIM else config.model,
        strategy=config.strategy.value, acceptance=config.acceptance,
        draft=config.draft_max, repeat=repeat, session=result.session_id,
        generated=sum(t.generated_tokens for t in turns), rounds=sum(t.rounds for t in turns),
        drafted=sum(t.drafted for t in turns), accepted=sum(t.accepted for t in turns),
        violations=sum(t.violations for t in turns), phase_s=dict(phases),
        rollback_s=sum(t.rollback_s for t in turns), extra_bytes=extra_bytes, answer=answer,
    )


def speedups(points: Sequence[Point]) -> dict[tuple[str, float, int], dict[str, float]]:
    """checkpoint's time per token over each strategy's, per (profile, acceptance, draft),
    from each strategy's fastest repeat: load from other jobs on a shared CPU only ever
    adds time, so the minimum is the steadiest estimate (as `timeit` advises)."""
    out: dict[tuple[str, float, int], dict[str, float]] = {}
    for key, pts in group_by(points, lambda pt: (pt.profile, pt.acceptance, pt.draft)).items():
        best = {s: min(pt.ms_per_token for pt in repeats)
                for s, repeats in group_by(pts, lambda pt: pt.strategy).items()}
        out[key] = {s: best["checkpoint"] / m if m else 0.0 for s, m in best.items()}
    return out


def lossless(points: Sequence[Point]) -> dict[str, bool]:
    """Whether the correct strategies committed the same answer at every grid point and
    repeat, per profile (or model)."""
    runs = group_by((pt for pt in points if pt.strategy in CORRECT),
                    lambda pt: (pt.profile, pt.acceptance, pt.draft, pt.repeat))
    out: dict[str, bool] = {}
    for (profile, *_), pts in runs.items():
        out[profile] = out.get(profile, True) and len({tuple(pt.answer) for pt in pts}) == 1
    return out
