"""Why a held-out prediction misses, read off the logs: a drafter the fit log never ran,
plain rounds predicted from an all-speculative log or from a drafting server's plain
rounds, a setting whose own runs spread beyond the band; none of these: unexplained. Where
the logs time the drafter's pass after each forward, an all-speculative fit log leaves it
out of a plain server's rounds, and a pass the fit log never made is named. A server
whose log lines cost another time than the fit log's is named, with both costs, and so is
one whose forward costs another time at the same batch, or whose target kept another
number of per-position recurrent states."""

from dataclasses import replace
from pathlib import Path

import pytest

from adapters.llama.calibration.clock import LogClock, log_clock
from adapters.llama.log.sources import read_log
from specbench.calibration.llama.misses import (
    Miss,
    forward_at,
    line_gap_s,
    miss_reasons,
    misses_text,
)
from tests.adapters.llama.log.test_reader import FIXTURES


def _clock(name: str) -> LogClock:
    return log_clock(read_log(FIXTURES / f"{name}.log.gz"))


def _build(name: str, build: str = "0.3.36") -> LogClock:
    return _clock(f"builds/{build}/{name}")


def test_a_drafter_the_fit_log_never_ran_is_named() -> None:
    reasons = miss_reasons(_clock("ngram-mod"), _clock("draft-simple"), 0.01, 0.15)
    # a draft model's server forwards in another context: its forwards are named too
    assert len(reasons) == 3 and reasons[2].startswith("its forward of")
    assert reasons[:2] == ("draft-simple's drafting is not in the fit log (charged 0)",
                       "draft-simple's pass after each forward is not in the fit log "
                       "(charged 0)")


def test_plain_rounds_from_an_all_speculative_log_are_charged_its_round_cost() -> None:
    # 0.3.30 logs no compute brackets: the drafter's pass stays in the fixed cost
    reason, *rest = miss_reasons(_build("mtp", "0.3.30"), _build("plain", "0.3.30"), 0.01,
                                 0.15)
    assert "all speculative" in reason
    assert len(rest) == 1 and "n_rs_seq" in rest[0]


def test_a_drafting_servers_plain_rounds_do_not_predict_a_server_without_one() -> None:
    reason, *forward = miss_reasons(_clock("ngram-mod"), _clock("plain"), 0.01, 0.15)
    assert "beside a drafter" in reason
    assert len(forward) == 1 and forward[0].startswith("its forward of 1 token(s) took")


def test_noisy_runs_are_said_and_nothing_found_is_unexplained() -> None:
    mtp = _clock("mtp")
    assert miss_reasons(mtp, mtp, 0.25, 0.15) == ("its own runs spread 25%, beyond the band",)
    assert miss_reasons(mtp, mtp, 0.05, 0.15) == ()
    text = misses_text([Miss("mtp k=4", "mtp k=2", 0.2, ())])
    assert text == "- mtp k=2 from the mtp k=4 log (+20.0%): unexplained by the logs"


def test_an_mtp_head_the_fit_log_never_ran_is_derived_and_its_pass_named() -> None:
    reasons = miss_reasons(_build("ngram-mod"), _build("mtp"), 0.01, 0.15)
    assert len(reasons) == 3 and "n_rs_seq" in reasons[2]
    assert reasons[:2] == ("draft-mtp's drafting is not in the fit log (derived from the "
                       "model's shape)",
                       "draft-mtp's pass after each forward is not in the fit log (derived "
                       "from the model's shape)")


def test_checkpoints_the_fit_log_never_saved_are_named() -> None:
    ngram = _build("ngram-mod")
    saves = sum(s.saves for s in ngram.segments)
    restores = sum(s.restores for s in ngram.segments)
    assert saves and restores
    reasons = miss_reasons(_build("mtp"), ngram, 0.01, 0.15)
    assert len(reasons) == 4 and "all speculative" in reasons[2] and "n_rs_seq" in reasons[3]
    assert reasons[:2] == (
        "ngram-mod's pass after each forward is not in the fit log (charged 0)",
        f"its rounds save {saves} and restore {restores} speculative checkpoints, which the "
        "fit log never did (charged 0)")


def test_a_timed_pass_is_no_longer_among_an_all_speculative_logs_round_costs() -> None:
    reason, rs_seq = miss_reasons(_build("mtp"), _build("plain"), 0.01, 0.15)
    assert "all speculative" in reason and "pass" not in reason
    assert rs_seq.startswith("the fit log's target kept n_rs_seq = 4")


def test_a_log_lines_cost_is_read_between_the_server_loops_two_idle_lines(tmp_path: Path
                                                                         ) -> None:
    log = tmp_path / "s.log"
    log.write_text("0.00.100.000 D que    start_loop: waiting for new tasks\n"
                   "0.00.100.013 D que    start_loop: processing new tasks\n"
                   "0.00.100.500 D slot process_toke: id  0 | task 0 | n_gen = 2\n"
                   "0.00.101.000 D que    start_loop: waiting for new tasks\n"
                   "0.00.101.011 D que    start_loop: processing new tasks\n"
                   "0.00.102.000 D que    start_loop: waiting for new tasks\n"
                   "0.00.102.400 D srv  update_slots: all slots are idle\n"
                   "0.00.102.401 D que    start_loop: processing new tasks\n"
                   "0.01.000.000 D que    start_loop: waiting for new tasks\n"
                   "0.01.000.015 D que    start_loop: processing new tasks\n")
    # only back-to-back pairs count; minutes carry into seconds
    assert line_gap_s(log) == pytest.approx(13e-6)
    (tmp_path / "none.log").write_text("no timestamps\n")
    assert line_gap_s(tmp_path / "none.log") is None


def test_a_server_logging_its_lines_at_another_cost_is_named() -> None:
    mtp = _clock("mtp")
    (reason,) = miss_reasons(mtp, mtp, 0.05, 0.15, (13e-6, 0.0))
    assert reason.startswith("its server logs a line in 0 µs where the fit log's took 13 µs")
    assert miss_reasons(mtp, mtp, 0.05, 0.15, (13e-6, 12e-6)) == ()
    assert miss_reasons(mtp, mtp, 0.05, 0.15, (None, 0.0)) == ()


def test_a_forward_of_another_cost_is_named_at_the_logs_commonest_shared_batch() -> None:
    recipe, plain = _clock("mtp-pmin"), _build("plain")
    at = forward_at(recipe, plain)
    assert at is not None and at[0] == 1  # a plain server forwards one token at a time
    _, forward, fit_forward = at
    assert abs(fit_forward / forward - 1) > 0.1
    reasons = miss_reasons(recipe, plain, 0.01, 0.15)
    assert (f"its forward of 1 token(s) took {1e3 * forward:.2f} ms where the fit log's took "
            f"{1e3 * fit_forward:.2f} ms (medians of their compute brackets)") in reasons
    # a build without compute brackets, or no batch in common: nothing to compare
    assert forward_at(recipe, _build("mtp", "0.3.30")) is None
    assert forward_at(_build("plain"), _build("mtp")) is None


def test_a_target_keeping_another_number_of_per_position_states_is_named() -> None:
    mtp, plain = _clock("mtp"), _build("plain")
    # the target's context keeps the draft size; the MTP head's own context keeps none
    assert (mtp.n_rs_seq, plain.n_rs_seq) == (4, 0)
    (reason, *_) = [r for r in miss_reasons(mtp, plain, 0.01, 0.15) if "n_rs_seq" in r]
    assert reason.startswith("the fit log's target kept n_rs_seq = 4 per-position states, "
                             "this one 0")
    assert reason.endswith("charged as launch_s per node of the graph (485 nodes where the "
                           "fit log's had 557), each copy a mean node")
    assert not [r for r in miss_reasons(mtp, mtp, 0.01, 0.15) if "n_rs_seq" in r]
    unprinted = replace(plain, graph_nodes=None)
    (reason, *_) = [r for r in miss_reasons(mtp, unprinted, 0.01, 0.15) if "n_rs_seq" in r]
    assert reason.endswith("a cost one log's launch_s holds at its own n_rs_seq")
