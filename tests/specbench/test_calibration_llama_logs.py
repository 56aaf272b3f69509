"""The held-out check of `specledger calibrate` on captured logs: the fit log is its
setting's median run, a fit predicts its own log (stalls aside) and flags it, every
other setting's prediction is counted against the band."""

import pytest

from adapters.llama.logclock import LogClock, log_clock
from adapters.llama.logfit import fit_log
from adapters.llama.logread import read_log
from specbench.calibration_llama_logs import held_out_summary, median_run, predictions, table
from tests.adapters.llama.test_logread import FIXTURES


def _clock(name: str) -> LogClock:
    return log_clock(read_log(FIXTURES / f"{name}.log.gz"))


def test_the_fit_log_is_the_median_run() -> None:
    runs = [_clock("ngram-mod") for _ in range(3)]
    for c, scale in zip(runs, (1.0, 2.0, 0.5), strict=True):
        c.tasks = [type(t)(t.task, t.segments, t.eval_s * scale, t.eval_tokens, t.segments_s)
                   for t in c.tasks]
    assert median_run(runs) is runs[0]


def test_each_fit_predicts_every_setting_and_flags_its_own() -> None:
    clocks = {"ngram-mod": [_clock("ngram-mod"), _clock("eog-in-block")],
              "plain": [_clock("plain")]}
    fits = {"ngram-mod": fit_log(clocks["ngram-mod"][0])}
    rows = predictions(fits, clocks)
    own = rows[0]["ngram-mod"]
    assert own["fitted_on_it"] and not rows[1]["ngram-mod"]["fitted_on_it"]
    # the fit log's own runs: the median of two measured, the noise their range
    measured = sorted(rows[0]["runs"])
    assert rows[0]["measured"] == pytest.approx(sum(measured) / 2)
    assert rows[0]["noise"] == pytest.approx((measured[1] - measured[0]) / rows[0]["measured"])
    assert rows[1]["noise"] == 0.0
    error = rows[1]["ngram-mod"]["error"]
    assert held_out_summary(rows) == f"ngram-mod log: {int(abs(error) <= 0.15)}/1"
    assert table(rows, ["ngram-mod"]).count("(fit log)") == 1
