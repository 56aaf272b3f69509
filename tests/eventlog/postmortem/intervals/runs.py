"""Interval runs built in tests, recorded as a vLLM log's would be, and their postmortem."""

from adapters.logs.intervals.record import Source, record_run
from adapters.logs.intervals.run import IntervalKind, IntervalLine, ServerRun
from eventlog.postmortem.analyze import analyze
from eventlog.postmortem.finding import Finding
from specledger.observed import UnitJournal


def window(line: int, **figures: object) -> IntervalLine:
    """An Engine interval at `line` (one second a line) with `figures`."""
    return IntervalLine(line, IntervalKind.ENGINE, f"05-08 16:25:{line % 60:02d}",
                        float(line), 0, **figures)  # type: ignore[arg-type]


def spec(line: int, accepted: int, drafted: int, pos: list[float], **more: object
         ) -> IntervalLine:
    """A window that drafted: its counts, positions and the figures they imply."""
    return window(line, accepted=accepted, drafted=drafted, acc_per_pos=pos,
                  draft_acceptance=round(accepted / drafted, 3),
                  mean_accept_len=round(1 + sum(pos), 2), **more)


def batch(line: int, **figures: object) -> IntervalLine:
    """An SGLang `Decode batch` interval at `line` with `figures`: its acceptance length
    and rate, never drafted counts or per-position rates (SGLang prints none)."""
    return IntervalLine(line, IntervalKind.DECODE_BATCH, f"2026-06-14 15:28:{line % 60:02d}",
                        float(line), None, **figures)  # type: ignore[arg-type]


def findings(run: ServerRun, peers: tuple[dict[str, object], ...] = ()) -> list[Finding]:
    """The postmortem of `run` recorded as a session."""
    journal = UnitJournal()
    rec = record_run(run, Source("t.log", "0" * 64, 1 + len(peers), peers=peers), journal)
    return analyze(journal.events, rec.config)[0]


def run_of(*intervals: IntervalLine, **facts: object) -> ServerRun:
    """A vLLM run of these intervals and start-up facts."""
    return ServerRun("vllm", 0, 1, 100, intervals=list(intervals), **facts)  # type: ignore[arg-type]
