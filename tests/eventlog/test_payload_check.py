"""Every payload a writer records is its trigger's type (fsm/payloads.py): sim sessions of
every strategy, EOG policy, replay policy and drafter, and imported llama-server logs
(whole, cut mid-round, without -v), each recorded through a payload-checking recorder.
Torch sessions are checked with the golden grid (tests/engine/golden/hashes.py)."""

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from adapters.llama.ledger.record import record_log
from adapters.llama.ledger.responses import read_responses
from adapters.llama.log.reader import parse_log
from adapters.llama.log.sources import read_log
from engine.config import EogPolicy, ReplayPolicy, Strategy
from engine.session import Session
from eventlog import Recorder, count_events, create_session, open_db, scan_events
from fsm.errors import PayloadError
from fsm.event import Event
from fsm.states import RoundState, Trigger
from tests.adapters.llama.log.test_reader import FIXTURES, fixture_text
from tests.eventlog.sim import sim_config

LOGS = ("mtp", "ngram-mod", "draft-simple", "two-slots", "quiet", "edited-history",
        "eog-in-block", "chain-sampled", "plain", "quiet-lv4", "mtp-pmin")


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[Engine]:
    """A SQLite ledger (the check is the recorder's, the same on every backend)."""
    engine = open_db(str(tmp_path / "checked.db"), True)
    yield engine
    engine.dispose()


def _recorder(engine: Engine, check: bool | None = True) -> Recorder:
    sid = create_session(engine, config={}, backend="sim", seeds={}, code_version="t")
    return Recorder(engine, sid, check_payloads=check)


@pytest.mark.parametrize(("strategy", "eog", "drafter"), list(itertools.product(
    Strategy, EogPolicy, ("synthetic", "ngram-mod", "none"))))
def test_sim_payloads_are_their_types(sqlite_engine: Engine, strategy: Strategy,
                                      eog: EogPolicy, drafter: str) -> None:
    with _recorder(sqlite_engine) as rec:
        Session(sim_config(strategy=strategy, eog_policy=eog, drafter=drafter), rec).run()
    assert rec.written > 0


def test_livelock_payloads_are_their_types(sqlite_engine: Engine) -> None:
    """Re-verification after a restore, with near-ties flipping, livelocks: only the
    checkpoint strategy restores and verifies again, so only it can."""
    config = sim_config(strategy=Strategy.CHECKPOINT, replay_policy=ReplayPolicy.REVERIFY,
                        tie_flip_rate=0.3, drafter="synthetic", livelock_guard=3)
    with _recorder(sqlite_engine) as rec:
        Session(config, rec).run()
    evs = list(scan_events(sqlite_engine, rec.session_id))
    livelocks = [e for e in evs if e.trigger is Trigger.LIVELOCK]
    assert livelocks and any(e.trigger is Trigger.RETRY for e in evs)
    assert all(e.payload["restores"] >= 3 and e.payload["resolution"] == "reconstruct"
               for e in livelocks)


@pytest.mark.parametrize("strategy", list(Strategy))
def test_early_eog_payloads_are_their_types(sqlite_engine: Engine,
                                            strategy: Strategy) -> None:
    """The target ends answers on its own, before the cap, in two slots at once."""
    config = sim_config(strategy=strategy, eog_prob=0.05, slots=2)
    with _recorder(sqlite_engine) as rec:
        Session(config, rec).run()
    evs = list(scan_events(sqlite_engine, rec.session_id))
    ends = [e.payload["metrics"] for e in evs if e.trigger is Trigger.END_TURN]
    assert len(ends) == 2 * config.turns and {m["slot"] for m in ends} == {0, 1}
    assert any(m["generated_tokens"] <= config.answer_tokens for m in ends)  # cap + EOG: 61
    assert any(e.payload.get("eog") is not None for e in evs
               if e.trigger in (Trigger.ACCEPT, Trigger.REJECT))


NO_RESPONSES = {"mtp-pmin"}  # the calibration log: a server no client answers were kept of


@pytest.mark.parametrize("name", LOGS)
def test_imported_log_payloads_are_their_types(sqlite_engine: Engine, name: str) -> None:
    responses = FIXTURES / f"{name}.responses.json"
    answers = None if name in NO_RESPONSES else read_responses(responses).facts
    with _recorder(sqlite_engine) as rec:
        result = record_log(read_log(FIXTURES / f"{name}.log.gz"), rec, responses=answers)
    assert count_events(sqlite_engine, rec.session_id) == result.events


def test_a_log_cut_mid_round_records_payloads_of_their_types(sqlite_engine: Engine) -> None:
    text = fixture_text("ngram-mod")
    at = text.index("\n", text.rindex("restoring speculative checkpoint")) + 1
    with _recorder(sqlite_engine) as rec:
        record_log(parse_log(text[:at]), rec)


def test_a_payload_not_of_its_type_is_refused(sqlite_engine: Engine,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    bad = Event(1, 0, 1, 1, Trigger.COMMIT, RoundState.ACCEPT, RoundState.COMMIT, 0.0, 0.0,
                {"append": [3], "position": 4})
    with pytest.raises(PayloadError, match="seq 1 commit: accepted: missing; cut: missing"):
        _recorder(sqlite_engine).append(bad)
    _recorder(sqlite_engine, check=False).append(bad)  # unchecked: stored as given
    monkeypatch.setenv("SPECLEDGER_CHECK_PAYLOADS", "1")
    with pytest.raises(PayloadError):
        _recorder(sqlite_engine, check=None).append(bad)


def test_fixtures_are_all_checked() -> None:
    assert {p.name.removesuffix(".log.gz") for p in Path(FIXTURES).glob("*.log.gz")} == set(LOGS)
