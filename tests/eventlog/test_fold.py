"""The one fold counts from a run's log exactly what the run counted live: its `TurnMetrics`
field by field, timings included (on the sim's simulated clock, and on torch the figures
END_TURN recorded); and it reads a stored session as it reads the events in memory."""

from dataclasses import asdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from engine.config import BackendKind, EogPolicy, ReplayPolicy, RunConfig, Strategy
from engine.session import MemoryJournal, Session
from eventlog import Recorder, project
from eventlog.fold import LogFold, TurnRecord, fold_log, fold_session
from eventlog.projection import project_session
from eventlog.records import SUMMED
from fsm.states import Trigger
from fsm.turn_metrics import TurnMetrics

TIMINGS = ("prefill_s", "decode_s", "rollback_s", "repair_s", "reprefill_s")


def _closed(config: RunConfig) -> tuple[list[TurnMetrics], list[TurnRecord], MemoryJournal]:
    journal = MemoryJournal()
    live = Session(config, journal).run()
    closed: list[TurnRecord] = []
    fold = fold_log(journal.events, closed.append)
    assert fold.records == {}  # every turn closed, and none is kept
    return live, closed, journal


@settings(max_examples=30, deadline=None)
@given(
    strategy=st.sampled_from(list(Strategy)),
    eog=st.sampled_from(list(EogPolicy)),
    replay=st.sampled_from(list(ReplayPolicy)),
    drafter=st.sampled_from(["synthetic", "ngram-mod", "ngram-simple", "none"]),
    draft_max=st.integers(1, 10),
    acceptance=st.floats(0.05, 0.99),
    tie_flip_rate=st.sampled_from([0.0, 0.3]),
    eog_prob=st.sampled_from([0.0, 0.05]),
    slots=st.integers(1, 2),
    turns=st.integers(1, 3),
    ctx_every=st.sampled_from([16, 4096]),
    seed=st.integers(0, 2**31),
)
def test_the_fold_of_a_sim_log_is_the_live_metrics(
    strategy: Strategy, eog: EogPolicy, replay: ReplayPolicy, drafter: str, draft_max: int,
    acceptance: float, tie_flip_rate: float, eog_prob: float, slots: int, turns: int,
    ctx_every: int, seed: int,
) -> None:
    config = RunConfig(
        strategy=strategy, eog_policy=eog, replay_policy=replay, drafter=drafter,
        draft_max=draft_max, acceptance=acceptance, tie_flip_rate=tie_flip_rate,
        eog_prob=eog_prob, slots=slots, turns=turns, prompt_tokens=40, question_tokens=8,
        answer_tokens=24, ctx_checkpoint_every=ctx_every, ctx_checkpoints=3, seed=seed)
    live, closed, _ = _closed(config)
    assert [asdict(rec.stats) for rec in closed] == [asdict(m) for m in live]
    assert [rec.metrics for rec in closed] == [m.to_dict() for m in live]
    for m, rec in zip(live, closed, strict=True):
        assert len(rec.answer) == m.generated_tokens
        assert sum(a for _, a in rec.drafts) == m.accepted
        assert sum(d for d, _ in rec.drafts) == m.drafted


def test_the_fold_of_a_torch_log_is_the_live_metrics() -> None:
    pytest.importorskip("torch")
    config = RunConfig(backend=BackendKind.TORCH, drafter="mtp", turns=2, max_answer_tokens=16,
                       eog_policy=EogPolicy.LEGACY, seed=1)
    live, closed, _ = _closed(config)
    # The engine times a round from end to end, the log each step: on a wall clock the
    # moments between steps make the difference, so the timings are END_TURN's.
    for m, rec in zip(live, closed, strict=True):
        assert rec.metrics is not None
        counted = asdict(rec.stats) | {k: rec.metrics[k] for k in TIMINGS}
        assert counted == asdict(m)


def test_a_stored_session_folds_as_its_events_do(engine: Engine, session_id: int) -> None:
    config = RunConfig(replay_policy=ReplayPolicy.REVERIFY, tie_flip_rate=0.3, slots=2,
                       turns=2, prompt_tokens=40, question_tokens=8, answer_tokens=24,
                       ctx_checkpoint_every=16, drafter="synthetic", seed=5)
    journal = MemoryJournal()
    with Recorder(engine, session_id) as rec:
        Session(config, rec).run()
    Session(config, journal).run()
    memory: list[TurnRecord] = []
    fold_log(journal.events, memory.append)
    stored: list[TurnRecord] = []
    fold_session(engine, session_id, LogFold(stored.append))
    assert [asdict(r.stats) for r in stored] == [asdict(r.stats) for r in memory]
    assert [(r.committed, r.drafts, r.metrics) for r in stored] == [
        (r.committed, r.drafts, r.metrics) for r in memory]
    n = len(journal.events)
    for cut in (0, 1, n // 3, n // 2, n - 1, n, None):
        want = project(journal.events, at=cut)
        assert fold_session(engine, session_id, upto_seq=cut).slots == want
        # The projection reads only the events that change more than a slot's state.
        projected = project_session(engine, session_id, at=cut)
        assert projected.slots == want
        assert projected.seq == (n if cut is None else cut)


ORACLE_RUNS = {
    # restores, replays verified again, livelocks and kept prefixes
    "reverify": RunConfig(replay_policy=ReplayPolicy.REVERIFY, tie_flip_rate=0.3),
    # EOG inside accepted blocks (stray tokens, violations), context restores, re-prefill
    "legacy-eog": RunConfig(eog_prob=0.05, eog_policy=EogPolicy.LEGACY),
    # the same EOGs, cut at the EOG: nothing stray
    "truncate-eog": RunConfig(eog_prob=0.05, eog_policy=EogPolicy.TRUNCATE),
}


@pytest.mark.parametrize("name", list(ORACLE_RUNS))
def test_each_count_is_what_the_turn_s_events_say(name: str) -> None:
    """The live metrics are the fold's own (TurnFold folds as the run fires), so agreeing
    with them cannot catch a fold that counts wrong: here each figure is counted again,
    naively, from the turn's events (and each phenomenon occurs in the runs)."""
    base = ORACLE_RUNS[name]
    config = RunConfig(**{**asdict(base), "slots": 2, "turns": 3, "prompt_tokens": 40,
                          "question_tokens": 8, "answer_tokens": 24, "seed": 1})
    _, closed, journal = _closed(config)
    seen: dict[str, int] = {}
    for rec in closed:
        evs = [e for e in journal.events if (e.slot, e.turn) == (rec.slot, rec.turn)]

        def count(trigger: Trigger, evs: list = evs) -> int:
            return sum(e.trigger is trigger for e in evs)

        def total(trigger: Trigger, key: str, evs: list = evs) -> int:
            return sum(e.payload.get(key) or 0 for e in evs if e.trigger is trigger)

        start = next(e.payload for e in evs if e.trigger is Trigger.START_TURN)
        appended = sum(len(e.payload.get("append") or ()) for e in evs
                       if e.trigger in (Trigger.COMMIT, Trigger.PREFILL))
        st = rec.stats
        naive = {"restores": count(Trigger.RESTORE), "ctx_restores": count(Trigger.CTX_RESTORE),
                 "reprefill_tokens": total(Trigger.CTX_RESTORE, "reprefill"),
                 "violations": count(Trigger.INVARIANT_VIOLATION),
                 "livelocks": count(Trigger.LIVELOCK), "rounds": count(Trigger.COMMIT),
                 "accepted": total(Trigger.COMMIT, "accepted"),
                 "kept_tokens": start.get("kept", 0), "prompt_tokens": start["prompt_tokens"]}
        assert {k: getattr(st, k) for k in naive} == naive
        assert st.generated_tokens + st.stray_tokens == appended
        assert st.rollback_s == pytest.approx(rec.phase_s.get("rollback", 0.0), abs=1e-9)
        assert 0.0 <= st.reprefill_s < st.prefill_s  # new prompt tokens were prefilled too
        assert (st.reprefill_s > 0) == (st.reprefill_tokens > 0)
        if config.eog_policy is EogPolicy.TRUNCATE:
            assert st.stray_tokens == 0
        for k in (*naive, "stray_tokens"):
            seen[k] = seen.get(k, 0) + int(bool(getattr(st, k)))
        seen["rollback_s"] = seen.get("rollback_s", 0) + int(st.rollback_s > 0)
    wanted = {"reverify": ("restores", "livelocks", "kept_tokens", "rollback_s"),
              "legacy-eog": ("ctx_restores", "reprefill_tokens", "violations", "stray_tokens"),
              "truncate-eog": ("restores", "kept_tokens")}[name]
    assert all(seen.get(k) for k in wanted), seen


@pytest.mark.parametrize("name", ["reverify", "legacy-eog"])
def test_a_slot_s_view_sums_what_its_turns_counted(name: str) -> None:
    """A slot's view counts nothing itself: its session figures are its turns' counts,
    summed over every turn (three here, so that a view summing only the latest two fails)."""
    config = RunConfig(**{**asdict(ORACLE_RUNS[name]), "slots": 2, "turns": 3,
                          "prompt_tokens": 40, "question_tokens": 8, "answer_tokens": 24,
                          "seed": 1})
    _, _, journal = _closed(config)
    fold = fold_log(journal.events)
    assert sorted(fold.slots) == [0, 1]
    for slot, view in fold.slots.items():
        turns = [r.stats for r in fold.records.values() if r.slot == slot]
        assert len(turns) == 3
        summed = {k: sum(getattr(st, k) for st in turns) for k in SUMMED}
        assert {k: getattr(view, k) for k in SUMMED} == summed
        assert summed["rounds"] > turns[-1].rounds > 0
    counted = ("restores",) if name == "reverify" else ("ctx_restores", "reprefill_tokens")
    assert all(getattr(view, k) for view in fold.slots.values() for k in counted)
