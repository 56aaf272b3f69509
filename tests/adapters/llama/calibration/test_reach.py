"""What a fit log measured (its reach: the batch sizes it ran three times or more, and
between them) and the reasons a prediction of another log lies beyond it: batch sizes it
never ran, a drafter it never ran, checkpoints it never saved or restored, a kind of
round it never ran, another graph, another build; a prediction inside its reach gives
none. The reach survives the JSON a profile carries it in."""

from collections import Counter
from dataclasses import replace

from adapters.llama.calibration.clock import LogClock, log_clock
from adapters.llama.calibration.reach import (
    REACH_FORWARDS,
    Beyond,
    Reach,
    drafter_outside,
    outside,
    reach_of,
    sizes_outside,
    states_outside,
)
from adapters.llama.log.sources import read_log
from tests.adapters.llama.log.test_reader import FIXTURES

BUILD = FIXTURES / "builds" / "0.3.36"


def _clock(name: str) -> LogClock:
    return log_clock(read_log(BUILD / f"{name}.log.gz"))


def test_a_log_measured_its_own_sizes_drafters_checkpoints_rounds_and_graph() -> None:
    clock = _clock("ngram-mod")
    reach = reach_of(clock)
    counts = Counter([b for s in clock.segments for b, _ in s.forwards]
                     + [c.tokens for c in clock.chunks])
    measured = [b for b, n in counts.items() if n >= REACH_FORWARDS]  # the prompt's once
    assert (reach.smallest, reach.largest) == (min(measured), max(measured)) == (1, 9)
    assert reach.drafters == ("ngram-mod",) and reach.saves and reach.restores
    assert reach.plain and reach.speculative and reach.graph_nodes == clock.graph_nodes
    assert outside(reach, clock) == ()
    assert Reach.from_dict(reach.to_dict()) == reach
    assert "forwards of 1-" in reach.describe() and "ngram-mod" in reach.describe()


def test_each_thing_a_prediction_needs_beyond_the_fit_log_is_a_reason() -> None:
    ngram, mtp, plain = _clock("ngram-mod"), _clock("mtp"), _clock("plain")
    kinds = {w.beyond for w in outside(reach_of(plain), ngram)}  # it verifies 9 at once
    assert kinds == {Beyond.SIZES, Beyond.DRAFTER, Beyond.CHECKPOINTS, Beyond.ROUNDS}
    kinds = {w.beyond for w in outside(reach_of(mtp), plain)}  # every round of mtp drafts
    assert kinds == {Beyond.SIZES, Beyond.ROUNDS, Beyond.GRAPH}
    other = replace(ngram, build="build 1 (e3a74b2)")
    assert [w.beyond for w in outside(reach_of(ngram), other)] == [Beyond.BUILD]


def test_the_clauses_say_what_was_measured_and_what_is_asked() -> None:
    reach = reach_of(_clock("mtp"))
    assert sizes_outside(reach, [reach.smallest, reach.largest]) is None
    clause = sizes_outside(reach, [1, 1, reach.largest + 1, reach.smallest])
    assert clause is not None and clause.startswith("3 of its 4 forwards carry 1-")
    assert drafter_outside(reach, "draft-mtp") is None
    assert drafter_outside(reach, "ngram-simple") == (
        "ngram-simple never ran in the fit log (its costs charged 0)")
    assert states_outside(reach, reach.n_rs_seq or 0) is None
    assert "it keeps 0 per-position state(s)" in (states_outside(reach, 0) or "")
