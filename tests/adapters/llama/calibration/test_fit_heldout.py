"""A fit's held-out error on committed logs, against a bound this test states: four logs
of one pass of the cross-validation suite (tests/adapters/llama/fixtures/calibration/
README.md: llama-server 0.3.36, quick plan, load average 3.6 on the machine's 2 cores),
each fitted, each predicting the others. Inside a fit's reach four predictions remain:
two within `BOUND` and two outside it, each of those with the cause the logs measure (a
log line costing 13 µs in one server and 0 in the other; a one-token forward 25% slower).
The predictions themselves are compared too (floats within a tolerance, for CI's other
CPU), so a prediction forced to its measurement, or its error's sign flipped, fails."""

from itertools import permutations
from pathlib import Path

import pytest

from adapters.llama.calibration.clock import LogClock, log_clock
from adapters.llama.calibration.fit import LogFit, fit_log, predict_tok_s
from adapters.llama.calibration.reach import outside, reach_of
from adapters.llama.log.sources import read_log
from specbench.calibration.llama.misses import line_gap_s, miss_reasons

LOGS = Path(__file__).parents[1] / "fixtures" / "calibration"
NAMES = ("none-k8", "ngram-mod-k4", "ngram-mod-k8", "ngram-simple-k8")
BOUND = 0.15
"""The error a prediction inside its fit's reach may have (the suite's band)."""
INSIDE = {("ngram-mod-k4", "none-k8"): 1793.71352, ("ngram-simple-k8", "none-k8"): 1879.51945,
          ("ngram-mod-k8", "none-k8"): 2643.45485, ("ngram-mod-k8", "ngram-mod-k4"): 1679.93566}
"""(fit, predicted) inside the fit's reach: its predicted tok/s on these logs."""
WITHIN = {("ngram-mod-k4", "none-k8"), ("ngram-simple-k8", "none-k8")}  # -11.4%, -7.2%


@pytest.fixture(scope="module")
def logs() -> dict[str, tuple[LogClock, LogFit]]:
    out = {}
    for name in NAMES:
        clock = log_clock(read_log(LOGS / f"{name}.log.gz"))
        out[name] = clock, fit_log(clock)
    return out


def test_the_predictions_inside_a_fits_reach_are_these(
        logs: dict[str, tuple[LogClock, LogFit]]) -> None:
    inside = {(a, b) for a, b in permutations(NAMES, 2)
              if not outside(reach_of(logs[a][0]), logs[b][0])}
    # no drafter predicts no n-gram server (it never ran one); an n-gram server predicts
    # the server without one, and ngram-mod at 8 the one at 4 (its verifies of 5 inside 9)
    assert inside == set(INSIDE)


def test_each_prediction_inside_its_reach_is_its_number(
        logs: dict[str, tuple[LogClock, LogFit]]) -> None:
    for (fit, target), expected in INSIDE.items():
        measured, predicted = predict_tok_s(logs[fit][1], logs[target][0])
        assert predicted == pytest.approx(expected, rel=1e-6), (fit, target)
        assert measured != pytest.approx(predicted, rel=0.02)  # a fit, not the measurement


def test_predictions_within_the_bound_and_each_miss_with_its_measured_cause(
        logs: dict[str, tuple[LogClock, LogFit]]) -> None:
    for fit, target in INSIDE:
        measured, predicted = predict_tok_s(logs[fit][1], logs[target][0])
        error = predicted / measured - 1
        if (fit, target) in WITHIN:
            assert abs(error) <= BOUND, (fit, target, error)
            continue
        assert abs(error) > BOUND, (fit, target, error)
        gaps = (line_gap_s(LOGS / f"{fit}.log.gz"), line_gap_s(LOGS / f"{target}.log.gz"))
        reasons = " ".join(miss_reasons(logs[fit][0], logs[target][0], 0.0, BOUND, gaps))
        assert "logs a line in" in reasons or "took" in reasons, (fit, target, reasons)
