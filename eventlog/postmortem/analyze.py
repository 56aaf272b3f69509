"""The postmortem of one session from its log alone: every detector in one pass."""

from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from eventlog.fold import DEST, LogFold
from eventlog.postmortem.acceptance import AcceptanceCollapse
from eventlog.postmortem.advice import ADVICE, CAUSE_ADVICE, Cause
from eventlog.postmortem.contamination import Contamination
from eventlog.postmortem.detector import (
    PAYLOAD,
    ROUND,
    SEQ,
    SLOT,
    TRIGGER,
    TURN,
    Detector,
    Handler,
    PathOf,
    Row,
)
from eventlog.postmortem.draft_ckpt import DraftCheckpoints
from eventlog.postmortem.draft_sizes import DraftStateSizes
from eventlog.postmortem.eog import EogTail
from eventlog.postmortem.finding import Finding, Kind, Severity, sort_findings
from eventlog.postmortem.inflation import AcceptanceInflation
from eventlog.postmortem.intervals.acceptance import IntervalAcceptance
from eventlog.postmortem.intervals.capacity import Capacity
from eventlog.postmortem.intervals.counters import IntervalCounters
from eventlog.postmortem.intervals.failures import EngineFailures
from eventlog.postmortem.intervals.http import HttpStatuses
from eventlog.postmortem.intervals.prefix_cache import PrefixCacheZero
from eventlog.postmortem.intervals.saturation import AcceptanceSaturated
from eventlog.postmortem.intervals.speed import SpeculationSpeed
from eventlog.postmortem.reference import OutputCheck, reference_problem
from eventlog.postmortem.sampler import SamplerCheck
from eventlog.postmortem.server_log import ServerLogCheck
from eventlog.postmortem.storms import RestoreStorms
from eventlog.postmortem.unknowns import UnknownInputs
from eventlog.postmortem.violations import Violations
from eventlog.reader import (
    SessionInfo,
    count_events,
    get_session,
    paused_gc,
    scan_events,
    scan_rows,
    slot_triggers,
)
from eventlog.schema import SessionStatus
from eventlog.turns import TurnPairs, folded
from fsm.errors import SpecledgerError
from fsm.event import Event
from fsm.states import Trigger


class BadReferenceError(SpecledgerError):
    """The session named as the non-speculative reference cannot be one."""


@dataclass(frozen=True)
class Postmortem:
    """A session's findings, worst first, and what they were judged against."""

    session: int
    status: str
    events: int
    config: dict[str, Any]
    reference: int | None
    findings: list[Finding] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Findings per severity."""
        return {s.value: sum(f.severity is s for f in self.findings) for s in Severity}

    def has(self, severity: Severity) -> bool:
        """Whether any finding has this severity."""
        return any(f.severity is severity for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the `postmortem --json` contract)."""
        keys = ("backend", "strategy", "eog_policy", "replay_policy", "drafter", "draft_max",
                "draft_checkpoints", "temperature", "seed")
        return {"session": self.session, "status": self.status, "events": self.events,
                "config": {k: self.config.get(k) for k in keys}, "reference": self.reference,
                "counts": self.counts(), "findings": [f.to_dict() for f in self.findings]}


_TURN_TRIGGERS = (Trigger.START_TURN, Trigger.PREFILL, Trigger.COMMIT, Trigger.END_TURN)
"""What a turn's answer is folded from (`eventlog.fold.LogFold`)."""
_REQUIRED = {Trigger.DRAFT: DraftCheckpoints.counter}
"""A field without which an event of the trigger tells no detector anything."""


def detectors(config: dict[str, Any], path_of: PathOf) -> list[Detector]:
    """One of each detector for a session recorded with `config`, whose log `path_of`
    reads back."""
    inflation = AcceptanceInflation(config)
    return [EogTail(config), RestoreStorms(config, path_of), Contamination(config),
            DraftCheckpoints(config), AcceptanceCollapse(config), inflation,
            Violations(config, inflation), DraftStateSizes(config), SamplerCheck(config),
            UnknownInputs(config), ServerLogCheck(config), EngineFailures(config),
            IntervalAcceptance(config), SpeculationSpeed(config), Capacity(config),
            PrefixCacheZero(config), IntervalCounters(config), HttpStatuses(config),
            AcceptanceSaturated(config)]


class _Pass:
    """One pass over a session shared by every detector (and, with a reference, the fold of
    the session's turns, compared with the reference's as both close them): each event goes
    to the handlers of its trigger."""

    def __init__(self, config: dict[str, Any], reference: Iterable[Event] | None,
                 path_of: PathOf) -> None:
        self.found = detectors(config, path_of)
        self.routes: dict[str, list[Handler]] = defaultdict(list)
        for d in self.found:
            for trigger, handler in d.handlers().items():
                self.routes[trigger.value].append(handler)
        self.check = OutputCheck()
        self.pairs = TurnPairs(self.check.pair)
        self.folder, ref_folder = LogFold(self.pairs.closer(0)), LogFold(self.pairs.closer(1))
        self.reference = reference is not None
        self._ref_folder = ref_folder
        self._ref_events = iter(()) if reference is None else folded(reference, ref_folder)
        if reference is not None:
            step, pairs, ref_events = self.folder.step, self.pairs, self._ref_events

            def fold_turn(row: Row, p: Any) -> None:
                # Times 0: the output check compares answers, which no time changes.
                step(row[SEQ], row[SLOT], row[TURN], row[ROUND], row[TRIGGER],
                     DEST.get(row[TRIGGER]), 0.0, 0.0, p)

            for trigger in _TURN_TRIGGERS:
                self.routes[trigger.value].append(fold_turn)
            # Last, after the session's own fold has closed the turn.
            self.routes[Trigger.END_TURN.value].append(
                lambda row, p: pairs.catch_up(1, ref_events))

    def rows(self, batches: Iterable[Sequence[Row]]) -> int:
        """Feed the rows of `eventlog.reader.scan_rows` (or events as rows), read for
        `self.routes`' triggers only; how many."""
        # Tuples, indexed without a default: the scan asked for these triggers alone, so
        # every row has a route, and the loop runs once per event.
        routes, n = {t: tuple(hs) for t, hs in self.routes.items()}, 0
        with paused_gc():
            for rows in batches:
                n += len(rows)
                for row in rows:
                    payload = row[PAYLOAD]
                    for handler in routes[row[TRIGGER]]:
                        handler(row, payload)
        return n

    def findings(self, reference_id: int | None, config: dict[str, Any]) -> list[Finding]:
        """Every detector's findings and the output check's, worst first."""
        findings = [f for d in self.found for f in d.finish()]
        if self.reference and reference_id is not None:
            deque(self._ref_events, maxlen=0)  # the reference's rest, through its fold
            self.pairs.finish(self.folder.records, self._ref_folder.records)
            mismatch = self.check.finding(reference_id, config)
            if mismatch is not None:
                findings.append(mismatch)
        return sort_findings(findings)


def analyze(events: Sequence[Event], config: dict[str, Any],
            reference: Iterable[Event] | None = None,
            reference_id: int | None = None) -> tuple[list[Finding], int]:
    """Run every detector over `events` in one pass; (findings worst first, events read).

    With the events of a `reference` session, each turn's answer is compared with its
    reference turn as soon as both have closed, the reference read in step with `events`.
    """
    def path_of(slot: int, first: int, last: int) -> list[str]:
        return [ev.trigger.value for ev in events if ev.slot == slot and first <= ev.seq <= last]

    one = _Pass(config, reference, path_of)
    routed = one.routes
    # Each event as a row (the trigger and source as their enums), in step with the stream.
    one.rows([(ev.seq, ev.slot, ev.turn, ev.round, ev.trigger, ev.duration, ev.source, ev.t,
               ev.payload)] for ev in events if ev.trigger in routed)
    return one.findings(reference_id, config), len(events)


def postmortem_session(engine: Engine, session_id: int,
                       reference_id: int | None = None) -> Postmortem:
    """The postmortem of a stored session. The reference is `reference_id` (it must be a
    plain run of the same conversation), else the session's parent when it is one."""
    info = get_session(engine, session_id)
    ref = _reference(engine, info, reference_id)
    ref_events = (None if ref is None
                  else scan_events(engine, ref, triggers=_TURN_TRIGGERS))
    one = _Pass(info.config, ref_events,
                lambda slot, first, last: slot_triggers(engine, session_id, slot, first, last))
    # Only the events some handler reads leave the database: those of their triggers (a
    # NEXT, say, none).
    one.rows(scan_rows(engine, session_id, triggers={Trigger(t) for t in one.routes},
                       required=_REQUIRED))
    findings = one.findings(ref, info.config)
    n = count_events(engine, session_id)
    if info.status is SessionStatus.INCOMPLETE:
        findings.append(Finding(
            Kind.INCOMPLETE_LOG, Severity.WARNING, n, n,
            f"The writer of this session died without closing it; the log holds {n} events "
            "of whole rounds, and the findings cover only those.",
            CAUSE_ADVICE[Cause.IMPORTED] if "source" in info.config
            else ADVICE[Kind.INCOMPLETE_LOG],
            {"events": n}))
    return Postmortem(session_id, info.status.value, n, info.config, ref,
                      sort_findings(findings))


def _reference(engine: Engine, info: SessionInfo, named: int | None) -> int | None:
    if named is not None:
        problem = reference_problem(info.config, get_session(engine, named).config)
        if problem:
            raise BadReferenceError(f"session {named} cannot be the non-speculative reference "
                                    f"of session {info.id}: {problem}")
        return named
    if info.parent_id is None or info.config.get("drafter") == "none":
        return None
    parent = get_session(engine, info.parent_id)
    return info.parent_id if reference_problem(info.config, parent.config) is None else None
