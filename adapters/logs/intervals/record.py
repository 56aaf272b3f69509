"""An interval run (adapters/logs/intervals/run.py) as a session, for any engine: each
interval one `interval` event (fsm.payloads.Interval), each request the log shows one turn
(`start_turn`, then `end_turn`, its metrics' `error` naming an error status), all on slot 0
in log order; the run's start-up facts, failures and last lines in the session's stored
source, where the postmortem's detectors read them (eventlog/postmortem/intervals/). Event
times are seconds on the log's clock from the run's first timed line (0 where the log shows
no time).
"""

import itertools
from dataclasses import dataclass
from typing import Any

from adapters.logs.intervals.run import IntervalLine, RequestLine, RunEnding, ServerRun
from adapters.protocol import Recording, Sink
from eventlog.series import SERIES
from fsm.event import Event
from fsm.payloads import TurnMetricsRow
from fsm.states import RoundState, Trigger

_SLOT = 0
_UNKNOWN_METRICS = ("drafted", "accepted", "kept_tokens", "f_keep", "reprefill_tokens",
                    "restores", "ctx_restores", "rounds", "stray_tokens", "prefill_tokens",
                    "prefill_s", "decode_s", "rollback_s", "repair_s", "reprefill_s",
                    "livelocks", "violations", "decode_tps", "acceptance")
"""A request line's turn figures no interval log gives per request."""


@dataclass(frozen=True)
class Source:
    """Where a run came from: the source's name, its digest, the runs in it, the line
    prefixes it carries and its files (a rotated set's parts)."""

    path: str
    sha256: str
    runs_in_file: int
    prefixes: tuple[str, ...] = ()
    parts: tuple[str, ...] = ()
    peers: tuple[dict[str, Any], ...] = ()
    """The other runs of the same source that never speculated: their run number, pid and
    generation throughputs (what a speculative run's throughput is compared with)."""


def plain_peer(run: ServerRun) -> dict[str, Any] | None:
    """What a run that never speculated offers its source's other runs as a baseline: its
    number, pid and the generation throughputs of its intervals that generated (None: it
    speculated, or generated nothing)."""
    if run.method is not None or any(iv.speculative for iv in run.intervals):
        return None
    tps = [iv.generation_tps for iv in run.intervals if iv.generation_tps]
    return {"run": run.index + 1, "pid": run.pid, "generation_tps": tps} if tps else None


def session_config(run: ServerRun, src: Source) -> dict[str, Any]:
    """The session's stored configuration: the engine's settings as its log shows them and
    the run's source."""
    return {
        "backend": f"{run.engine}-log", "engine": run.engine, "series": SERIES,
        "version": run.version, "model": run.model, "architecture": run.architecture,
        "hybrid": run.hybrid, "drafter": run.method if run.method is not None else None,
        "draft_max": run.num_spec_tokens, "prefix_caching": run.prefix_caching,
        "strategy": None, "eog_policy": None, "replay_policy": None, "seed": None,
        "source": {
            "kind": f"{run.engine} log", "path": src.path, "sha256": src.sha256,
            "lines": run.lines, "parsed": run.parsed, "skipped": run.skipped,
            "unknown": run.unknown, "unknown_shapes": run.unknown_shapes.most_common(10),
            "prefixes": list(src.prefixes), "parts": list(src.parts),
            "run": {"index": run.index + 1, "of": src.runs_in_file,
                    "first_line": run.first_line, "last_line": run.last_line,
                    "pid": run.pid, "ending": run.ending.value,
                    "last_lines": run.last_lines},
            "intervals": len(run.intervals), "requests": len(run.requests),
            "failures": [f.to_dict() for f in run.failures],
            "peers": list(src.peers),
        },
    }


def _turn_metrics(turn: int, req: RequestLine) -> TurnMetricsRow:
    unknown = list(_UNKNOWN_METRICS)
    for name in ("prompt_tokens", "generated_tokens"):
        if getattr(req, name) is None:
            unknown.append(name)
    row: dict[str, Any] = {"slot": _SLOT, "turn": turn, "prompt_tokens": req.prompt_tokens,
                           "generated_tokens": req.generated_tokens}
    return TurnMetricsRow(**row, **{k: None for k in _UNKNOWN_METRICS},  # type: ignore[typeddict-item]
                          unknown=sorted(unknown))


class RunWriter:
    """Numbers a run's events, keeps slot 0's state and the clock's origin (None: the
    time of the first timed item written, for a writer that meets the run's items as they
    come, as `watch` does)."""

    def __init__(self, sink: Sink, origin: float | None) -> None:
        self.sink, self.origin = sink, origin
        self.seq = itertools.count(1)
        self.state = RoundState.IDLE
        self.events = 0

    def fire(self, turn: int, trigger: Trigger, at: float | None, payload: Any,
             dest: RoundState | None = None) -> None:
        """One event at log time `at`, moving slot 0 to `dest`."""
        if self.origin is None:
            self.origin = at
        t = at - self.origin if at is not None and self.origin is not None else 0.0
        self.sink.append(Event(next(self.seq), _SLOT, turn, 0, trigger, self.state,
                               dest or self.state, max(t, 0.0), 0.0, payload))
        self.state = dest or self.state
        self.events += 1

    def interval(self, iv: IntervalLine) -> None:
        """One interval, a unit of its own."""
        self.fire(0, Trigger.INTERVAL, iv.at, iv.payload())
        self.sink.end_unit()

    def request(self, turn: int, req: RequestLine) -> None:
        """One request as turn `turn`, a unit of its own."""
        self.fire(turn, Trigger.START_TURN, req.at,
                  {"prompt_tokens": req.prompt_tokens, "kept": None, "f_keep": None},
                  RoundState.IDLE)
        metrics = _turn_metrics(turn, req)
        if req.failed:
            metrics["error"] = f"HTTP {req.status} for {req.method} {req.path}"
        self.fire(turn, Trigger.END_TURN, req.at, {"metrics": metrics}, RoundState.DONE)
        self.sink.end_unit()


def in_log_order(intervals: list[IntervalLine],
                 requests: list[RequestLine]) -> list[IntervalLine | RequestLine]:
    """Intervals and requests in log order (an interval before a request of its line)."""
    merged = sorted([(iv.line, 0, iv) for iv in intervals]
                    + [(rq.line, 1, rq) for rq in requests], key=lambda x: x[:2])
    return [item for _, _, item in merged]


def run_error(run: ServerRun) -> str | None:
    """Why the run's session is `failed` (None: it is not): its last failure, or an end
    with no shutdown lines."""
    if run.failures:
        f = run.failures[-1]
        return f"{f.kind.value} at log line {f.line}: {f.message}"
    if run.ending is RunEnding.DIED:
        return f"the server's run ends at line {run.last_line} without its shutdown lines"
    return None


def record_run(run: ServerRun, src: Source, sink: Sink) -> Recording:
    """Fire `run`'s intervals and requests into `sink`, in log order: the session to
    store (`failed` where the run died)."""
    times = [x.at for x in (*run.intervals, *run.requests) if x.at is not None]
    w = RunWriter(sink, min(times) if times else None)
    turn = 0
    for item in in_log_order(run.intervals, run.requests):
        if isinstance(item, IntervalLine):
            w.interval(item)
        else:
            turn += 1
            w.request(turn, item)
    return Recording(session_config(run, src), f"{run.engine}-log", None, None, [], 0,
                     w.events, run_error(run))
