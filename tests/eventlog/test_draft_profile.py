"""The per-turn draft profile (mean accepted length per round, acceptance at each draft
position) folded from events: equal to llama-server's own print_timing figures on its
imported logs, and to our engine's own turn counts on a sim session."""

import pytest

from adapters.llama.ledger.fold import fold_tasks
from adapters.llama.ledger.record import record_log
from adapters.llama.log.sources import read_log
from engine.config import RunConfig
from engine.session import MemoryJournal, Session
from fsm.draft_profile import DraftProfile
from fsm.states import Trigger
from tests.adapters.llama.log.test_reader import FIXTURES
from tests.eventlog.sim import turn_profiles


@pytest.mark.parametrize("name", ["mtp", "ngram-mod", "draft-simple", "two-slots"])
def test_llama_sessions_profile_as_llama_server_prints_it(name: str) -> None:
    reading = read_log(FIXTURES / f"{name}.log.gz")
    journal = MemoryJournal()
    record_log(reading, journal)
    profiles = turn_profiles(journal.events)
    turn_of: dict[int, int] = {}
    for task in fold_tasks(reading.records).tasks:
        turn_of[task.slot] = turn_of.get(task.slot, 0) + 1
        p = profiles[(task.slot, turn_of[task.slot])]
        assert task.totals is not None and task.acc_per_pos is not None
        assert p.mean_accept_len == pytest.approx(task.totals.mean_len, abs=0.005)
        logged = task.acc_per_pos.rates
        assert len(p.acc_per_pos) <= len(logged)  # llama prints all of its n_max positions
        padded = [*p.acc_per_pos, *[0.0] * (len(logged) - len(p.acc_per_pos))]
        assert padded == pytest.approx(list(logged), abs=0.0005 + 1e-9)


def test_sim_session_profile_matches_its_turn_counts() -> None:
    config = RunConfig(backend="sim", turns=2, answer_tokens=64, prompt_tokens=64,
                       drafter="synthetic", acceptance=0.6, draft_max=5, seed=3)
    journal = MemoryJournal()
    turns = Session(config, journal).run()
    profiles = turn_profiles(journal.events)
    for m in turns:
        p = profiles[(m.slot, m.turn)]
        verifies = [e for e in journal.events if e.trigger is Trigger.VERIFY
                    and (e.slot, e.turn) == (m.slot, m.turn)]
        assert len(p.rounds) == len(verifies) > 0
        assert p.mean_accept_len == pytest.approx(1 + m.accepted / len(verifies))
        # each verified round's accepted drafts, as its commit recorded them
        verified = {e.round for e in verifies}
        accepted = [e.payload["accepted"] for e in journal.events
                    if e.trigger is Trigger.COMMIT and (e.slot, e.turn) == (m.slot, m.turn)
                    and e.round in verified]
        assert len(accepted) == len(verified) and sum(accepted) == m.accepted
        rates = p.acc_per_pos
        assert len(rates) == config.draft_max and rates == sorted(rates, reverse=True)
        assert rates == pytest.approx([sum(a >= i for a in accepted) / len(accepted)
                                       for i in range(1, config.draft_max + 1)])


def test_a_turn_without_drafts_has_no_profile() -> None:
    config = RunConfig(backend="sim", turns=1, answer_tokens=16, prompt_tokens=16,
                       drafter="none")
    journal = MemoryJournal()
    Session(config, journal).run()
    assert turn_profiles(journal.events)[(0, 1)].to_dict() == DraftProfile().to_dict() == {
        "mean_accept_len": None, "acc_per_pos": []}


def test_acceptance_at_each_position_is_the_share_that_got_that_far() -> None:
    p = DraftProfile([(4, 4), (4, 1), (2, 0), (3, 2), (1, 1)])
    assert p.acc_per_pos == [p.rate_at(i) for i in range(1, 5)] == [4 / 5, 2 / 5, 1 / 5, 1 / 5]
