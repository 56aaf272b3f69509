"""A real llama-server -v log cut into timed rounds by its own clock: the rounds add up
to the decode time print_timing reports, carry the log's checkpoints, restores and
drafters, and the prompts' forwards the tokens print_timing says it processed; a log
without timestamps, without rounds, or with slots running at once says so in one
line."""

import gzip
import re

import pytest

from adapters.llama.calibration.clock import LogClockError, log_clock
from adapters.llama.log.reader import parse_log
from adapters.llama.log.records import Timing, TimingPhase
from adapters.llama.log.sources import read_log
from tests.adapters.llama.log.test_reader import FIXTURES, fixture_text


@pytest.mark.parametrize("name", ["ngram-mod", "mtp", "draft-simple", "plain", "eog-in-block"])
def test_rounds_add_up_to_print_timings_decode_time(name: str) -> None:
    clock = log_clock(read_log(FIXTURES / f"{name}.log.gz"))
    assert clock.tasks and clock.overlapping == clock.untimed == 0
    for t in clock.tasks:
        assert t.segments_s == pytest.approx(t.eval_s, rel=0.01, abs=2e-4)
        assert all(s.seconds > 0 for s in t.segments)


@pytest.mark.parametrize("log", ["ngram-mod", "mtp", "plain", "builds/0.3.30/mtp",
                                 "builds/0.3.21/ngram-mod", "builds/0.3.36/chain"])
def test_a_prompts_forwards_carry_the_tokens_print_timing_says_it_processed(log: str) -> None:
    reading = read_log(FIXTURES / f"{log}.log.gz")
    clock = log_clock(reading)
    processed = {r.task: r.tokens for r in reading.records
                 if isinstance(r, Timing) and r.phase is TimingPhase.PROMPT}
    chunks: dict[int, int] = {}
    for c in clock.chunks:
        assert c.tokens > 0 and c.seconds > 0 and c.ctx >= 0
        chunks[c.task] = chunks.get(c.task, 0) + c.tokens
    assert chunks == {t.task: processed[t.task] for t in clock.tasks}
    # a turn that keeps its history forwards only what the slot does not hold
    assert len({c.tokens for c in clock.chunks}) >= 3


def test_the_rounds_hold_the_logs_checkpoints_restores_and_replays() -> None:
    text = fixture_text("ngram-mod")
    clock = log_clock(parse_log(text))
    segs = clock.segments
    assert sum(s.saves for s in segs) == text.count("created speculative checkpoint")
    assert sum(s.restores for s in segs) == text.count("restoring speculative checkpoint")
    assert all(len(s.forwards) == 1 + s.restores for s in segs)
    assert all(s.drafter is None for s in segs)  # an n-gram lookup is not a model
    assert clock.state_bytes == 116908  # the restore line's exact size


def test_a_model_drafter_is_named_with_its_drafted_tokens() -> None:
    segs = log_clock(read_log(FIXTURES / "mtp.log.gz")).segments
    assert {s.drafter for s in segs} == {"draft-mtp"}
    assert all(s.drafted == s.forwards[0][0] - 1 for s in segs)
    assert {s.drafter for s in log_clock(read_log(FIXTURES / "draft-simple.log.gz")).segments
            } == {"draft-simple"}


BUILDS = FIXTURES / "builds"


@pytest.mark.parametrize("log", ["0.3.24/mtp", "0.3.30/draft-model", "0.3.36/mtp",
                                 "0.3.36/draft-model", "0.3.36/chain"])
def test_a_model_drafters_call_is_timed_inside_its_round(log: str) -> None:
    segs = log_clock(read_log(BUILDS / f"{log}.log.gz")).segments
    drafting = [s for s in segs if s.drafter is not None]
    assert drafting and all(s.draft_s is not None and 0 < s.draft_s < s.seconds
                            and s.drafter in s.called for s in drafting)


def test_a_lookup_is_timed_apart_where_the_build_brackets_it() -> None:
    # 0.3.36 brackets the drafters' call whatever they are; 0.3.30 logs the ends of a
    # model drafter's call only
    segs = log_clock(read_log(BUILDS / "0.3.36/ngram-mod.log.gz")).segments
    assert all(s.called == ("ngram-mod",) for s in segs if s.speculative)
    assert all(s.draft_s is not None and 0 < s.draft_s < s.seconds for s in segs if s.called)
    older = log_clock(read_log(BUILDS / "0.3.30/ngram-mod.log.gz")).segments
    assert any(s.called for s in older) and all(s.draft_s is None for s in older)


def test_a_chain_names_the_drafters_its_round_asked() -> None:
    # ngram-mod first; draft-mtp only where ngram-mod drafted nothing
    segs = log_clock(read_log(BUILDS / "0.3.36/chain.log.gz")).segments
    assert {s.called for s in segs if s.speculative} == {
        ("ngram-mod",), ("ngram-mod", "draft-mtp")}
    assert all(s.called == ("ngram-mod", "draft-mtp") for s in segs if s.drafter == "draft-mtp")


def test_a_log_without_timestamps_names_the_flag() -> None:
    text = re.sub(r"(?m)^\d+\.\d{2}\.\d{3}\.\d{3} ", "", fixture_text("plain"))
    with pytest.raises(LogClockError, match="--log-timestamps"):
        log_clock(parse_log(text), "plain.log")


def test_a_log_without_rounds_asks_for_verbose() -> None:
    with pytest.raises(LogClockError, match="-v"):
        log_clock(read_log(FIXTURES / "quiet.log.gz"))


def test_slots_running_at_once_are_left_out() -> None:
    with pytest.raises(LogClockError, match="4 overlapped another slot"):
        log_clock(read_log(FIXTURES / "two-slots.log.gz"))


def test_a_drafters_pass_after_each_forward_is_timed_where_the_build_logs_it() -> None:
    # 0.3.36 -v brackets each decode call (`yielding to queue` .. `done yielding`); with a
    # drafter a second bracket follows each forward's with nothing between: the drafter's
    # pass (the MTP head over the verified tokens)
    segs = log_clock(read_log(BUILDS / "0.3.36/mtp.log.gz")).segments
    assert all(s.pass_drafter == "draft-mtp" and s.pass_s is not None
               and len(s.pass_s) == len(s.forwards) for s in segs)
    assert all(0 < sum(s.pass_s or ()) + (s.draft_s or 0) < s.seconds for s in segs)
    ngram = log_clock(read_log(BUILDS / "0.3.36/ngram-mod.log.gz")).segments
    assert all(s.pass_drafter == "ngram-mod" for s in ngram)
    assert sum(len(s.pass_s or ()) for s in ngram) == sum(len(s.forwards) for s in ngram)


@pytest.mark.parametrize("log", ["0.3.36/plain", "0.3.30/mtp"])
def test_no_pass_without_a_drafter_or_without_the_builds_brackets(log: str) -> None:
    assert all(s.pass_s is None and s.pass_drafter is None
               for s in log_clock(read_log(BUILDS / f"{log}.log.gz")).segments)


def test_the_drafters_pass_over_the_prompt_is_timed_apart_from_its_forward() -> None:
    mtp = log_clock(read_log(BUILDS / "0.3.36/mtp.log.gz")).chunks
    assert mtp and all(c.pass_drafter == "draft-mtp" and c.pass_s and c.pass_s > 0
                       for c in mtp)
    assert all(c.pass_s is None for c in log_clock(read_log(BUILDS / "0.3.36/plain.log.gz")).chunks)


def test_a_model_drafters_unanswered_call_is_timed_in_its_plain_round() -> None:
    text = fixture_text("mtp-pmin")
    segs = log_clock(read_log(FIXTURES / "mtp-pmin.log.gz")).segments
    attempts = [s for s in segs if not s.speculative and s.called]
    # every call that drafted nothing: asked (a draft was possible), no `called impl`
    asked = text.count("max possible draft") - len(re.findall(r"max possible draft: 0\n", text))
    assert attempts and len(attempts) == asked - text.count("called impl")
    assert all(s.called == ("draft-mtp",) and s.drafted == 0 and s.forwards[0][0] == 1
               and s.draft_s is not None and 0 < s.draft_s < s.seconds for s in attempts)
    # a plain round with no call (the answer's last token: no draft possible) names none
    assert [s.draft_s for s in segs if not s.called] == [None]


@pytest.mark.parametrize("log", ["builds/0.3.36/ngram-mod", "builds/0.3.36/mtp",
                                 "builds/0.3.36/plain", "mtp-pmin"])
def test_each_forward_is_timed_by_its_compute_bracket_inside_its_round(log: str) -> None:
    for s in log_clock(read_log(FIXTURES / f"{log}.log.gz")).segments:
        assert s.forward_s is not None and len(s.forward_s) == len(s.forwards)
        inside = sum(s.forward_s) + sum(s.pass_s or ()) + (s.draft_s or 0.0)
        assert all(f > 0 for f in s.forward_s) and inside < s.seconds


def test_a_build_without_compute_brackets_times_no_forward() -> None:
    assert all(s.forward_s is None
               for s in log_clock(read_log(BUILDS / "0.3.30/mtp.log.gz")).segments)


@pytest.mark.parametrize("log", ["chain", "draft-model", "draft-self", "mtp", "ngram-mod",
                                 "plain"])
def test_forwards_of_the_batch_before_them_are_the_graphs_the_server_reused(log: str) -> None:
    # print_timing's `graphs reused` counts the target context's reuses since it started,
    # its prompts' forwards too (a cached prompt's last ones): a task's own are at most 2 more
    path = BUILDS / f"0.3.36/{log}.log.gz"
    text = gzip.decompress(path.read_bytes()).decode(errors="replace")
    printed = [int(n) for n in re.findall(r"graphs reused =\s+(\d+)", text)]
    clock = log_clock(read_log(path))
    counted = [sum(len(s.forwards) - s.rebuilds for s in t.segments) for t in clock.tasks]
    reused = [b - a for a, b in zip([0, *printed], printed, strict=False)]
    assert len(counted) == len(reused) >= 2
    assert all(c <= r <= c + 2 for c, r in zip(counted, reused, strict=True))
    assert sum(s.rebuilds for s in clock.segments) > 0
