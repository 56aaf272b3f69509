"""Captured logs fired through the round machine: the projection of the events is the slot
llama-server released, the engine's totals and the client's answers agree with the
imported rounds on real logs, and a changed number in either becomes a violation."""

import itertools
import json
from collections import Counter
from pathlib import Path

import pytest

from adapters.llama.ledger.record import record_log
from adapters.llama.ledger.responses import parse_responses, read_responses
from adapters.llama.log.reader import parse_log
from adapters.llama.log.sources import read_log
from engine.session import MemoryJournal
from eventlog.projection import project
from fsm.invariants import Invariant
from fsm.states import RoundState, Trigger
from tests.adapters.llama.log.test_reader import FIXTURES, fixture_text, with_number

VERBOSE = ("mtp", "ngram-mod", "draft-simple", "two-slots", "chain-sampled", "plain")
T = Trigger


def imported(name: str, text: str | None = None,
             responses: str | None = None) -> tuple[MemoryJournal, object]:
    """A fixture (or its changed text) fired into memory with its answers."""
    reading = parse_log(text) if text is not None else read_log(FIXTURES / f"{name}.log.gz")
    answers = (parse_responses(responses) if responses is not None
               else read_responses(FIXTURES / f"{name}.responses.json"))
    journal = MemoryJournal()
    result = record_log(reading, journal, responses=answers.facts)
    return journal, result


def violations(journal: MemoryJournal) -> list[dict[str, object]]:
    """The payloads of the recorded violations."""
    return [e.payload for e in journal.events if e.trigger is T.INVARIANT_VIOLATION]


@pytest.mark.parametrize("name", VERBOSE)
def test_real_logs_import_without_violations(name: str) -> None:
    journal, result = imported(name)
    assert violations(journal) == []
    assert result.responses_matched == len(result.turns) == len(result.fold.tasks)
    seqs = [e.seq for e in journal.events]
    assert seqs == list(range(1, len(seqs) + 1))


@pytest.mark.parametrize("name", VERBOSE)
def test_projection_is_the_released_slot(name: str) -> None:
    journal, result = imported(name)
    views = project(journal.events)
    for slot, view in views.items():
        last = [t for t in result.fold.tasks if t.slot == slot][-1]
        assert view.state is RoundState.DONE
        assert view.position == last.released.n_tokens == len(view.tokens) - 1
        answer = [tok for r in last.rounds for tok in r.tokens]
        assert view.tokens[-len(answer):] == answer


def test_rollbacks_follow_the_memory_the_log_names() -> None:
    ngram, _ = imported("ngram-mod")
    modes = {e.payload["mode"] for e in ngram.events if e.trigger is T.RESTORE}
    assert modes == {"checkpoint"}
    assert {e.payload["mode"] for e in ngram.events if e.trigger is T.REPLAY} == {"reverify"}
    mtp, _ = imported("mtp")
    selects = [e.payload for e in mtp.events if e.trigger is T.RESTORE]
    assert selects and all(p["mode"] == "select" and p["logged"] is False for p in selects)
    assert not any(e.trigger is T.REPLAY for e in mtp.events)


def test_two_slots_keep_log_order() -> None:
    journal, _ = imported("two-slots")
    slots = [e.slot for e in journal.events]
    switches = sum(a != b for a, b in itertools.pairwise(slots))
    assert set(slots) == {0, 1} and switches > 4  # interleaved, not one slot after the other
    times = [e.t for e in journal.events]
    assert times == sorted(times)


def test_changed_engine_totals_become_a_violation() -> None:
    changed, _ = with_number(fixture_text("ngram-mod"),
                             r"draft acceptance = [\d.]+ \(\s*(\d+) accepted", 1)
    journal, _ = imported("ngram-mod", changed)
    found = violations(journal)
    assert [v["details"]["check"] for v in found] == ["accepted tokens"]  # type: ignore[index]
    assert found[0]["invariant"] == Invariant.BOOKKEEPING.value


def test_a_changed_answer_becomes_a_violation() -> None:
    answers = json.loads((FIXTURES / "mtp.responses.json").read_text())
    answers[1]["timings"]["draft_n_accepted"] += 2
    journal, result = imported("mtp", responses=json.dumps(answers))
    found = violations(journal)
    assert [v["details"]["check"] for v in found] == ["draft_n_accepted"]  # type: ignore[index]
    assert result.responses_matched == 2


def test_a_quiet_log_gives_turn_totals_and_says_what_it_cannot() -> None:
    journal, result = imported("quiet")
    triggers = {e.trigger for e in journal.events}
    assert triggers == {T.START_TURN, T.PREFILL, T.END_TURN}
    ends = [e.payload["metrics"] for e in journal.events if e.trigger is T.END_TURN]
    answers = read_responses(FIXTURES / "quiet.responses.json").facts
    assert [m["drafted"] for m in ends] == [a.draft_n for a in answers]
    for m in ends:
        assert m["stray_tokens"] is None and "rounds" in m["unknown"]
    assert result.violations == 0


def test_a_truncated_log_ends_in_a_fail_event(tmp_path: Path) -> None:
    text = fixture_text("ngram-mod")
    at = text.index("\n", text.rindex("restoring speculative checkpoint")) + 1
    journal = MemoryJournal()
    result = record_log(parse_log(text[:at]), journal)
    last = journal.events[-1]
    assert last.trigger is T.FAIL and last.payload["truncated"] is True
    assert "nothing committed" in last.payload["error"] and len(result.truncated) == 1
    assert not any(e.trigger is T.END_TURN and e.turn == last.turn for e in journal.events)
    # What the log shows of the cut round is there, up to its restore, and no commit.
    tail = [e.trigger for e in journal.events if (e.turn, e.round) == (last.turn, last.round)]
    assert tail == [T.BEGIN, T.DRAFT, T.VERIFY, T.REJECT, T.RESTORE, T.FAIL]


def test_an_answer_finished_otherwise_than_the_log_says_is_a_violation() -> None:
    answers = json.loads((FIXTURES / "mtp.responses.json").read_text())
    assert answers[0]["choices"][0]["finish_reason"] == "length"  # stopped by limit
    answers[0]["choices"][0]["finish_reason"] = "stop"
    journal, _ = imported("mtp", responses=json.dumps(answers))
    assert [v["details"]["check"] for v in violations(journal)] == ["finish_reason"]  # type: ignore[index]


def test_a_round_verdict_that_contradicts_its_kept_ids_is_a_violation() -> None:
    # Deliberately contradictory: the round's end line says one accepted draft fewer than
    # its `add accepted tokens` line kept (the slot length on that line left as logged).
    changed, m = with_number(fixture_text("mtp"),
                             r"accepted (\d+)/(\d+) draft tokens, new n_tokens", -1)
    said = int(m.group(1))
    assert said > 0
    journal, _ = imported("mtp", changed)
    found = violations(journal)
    assert [v["details"]["check"] for v in found] == ["round verdict"]  # type: ignore[index]
    assert found[0]["details"]["engine"] == [said - 1, int(m.group(2))]  # type: ignore[index]
    assert found[0]["details"]["ledger"] == [said, int(m.group(2))]  # type: ignore[index]


def test_a_traced_verdict_that_contradicts_its_replay_is_a_violation() -> None:
    changed, _ = with_number(fixture_text("draft-simple"),
                             r"accepted\s+(\d+)/\s*\d+ draft tokens \(restore checkpoint\)", 1)
    journal, _ = imported("draft-simple", changed)
    found = violations(journal)
    assert [v["details"]["check"] for v in found] == ["round verdict"]  # type: ignore[index]
    assert "the replay after it" in found[0]["message"]  # type: ignore[operator]


def test_each_round_names_the_drafter_the_log_names_for_it() -> None:
    journal, _ = imported("chain-sampled")
    text = fixture_text("chain-sampled")
    labels = Counter(e.payload["drafter"] for e in journal.events if e.trigger is T.DRAFT)
    # The chain ngram-mod,mtp: each round drafted by one of them, as its line says.
    assert labels == {"ngram-mod": text.count("called impl ngram-mod"),
                      "mtp": text.count("called impl draft-mtp")}
    assert min(labels.values()) > 0
    for name in ("mtp", "ngram-mod"):  # a single drafter: every round is its
        single, _ = imported(name)
        assert {e.payload["drafter"] for e in single.events if e.trigger is T.DRAFT} == {name}
