"""The held-out check of `specledger calibrate` on captured logs: the fit log is its
setting's median run, a fit predicts its own log (stalls aside) and flags it, every
other setting's prediction is counted against the band. The recommended fit log is the
recipe's draft-mtp server under `--spec-draft-p-min`, named and logged apart from the
plain draft-mtp server of the same size."""

from pathlib import Path

import pytest

from adapters.llama.log.sources import read_log
from adapters.llama.logclock import LogClock, log_clock
from adapters.llama.logfit import fit_log
from specbench.calibration_llama_logs import (
    FITS,
    RECIPE,
    Setting,
    held_out_summary,
    log_paths,
    median_run,
    predictions,
    table,
)
from specbench.calibration_llama_recipe import P_MIN, recipe_flags
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


def test_the_recipe_is_the_first_fit_and_logs_apart_from_its_plain_size() -> None:
    assert FITS[0] == RECIPE and RECIPE.p_min == P_MIN
    plain = Setting(RECIPE.drafter, RECIPE.draft)
    assert RECIPE.label == "mtp k=8 p-min 0.4" and plain.label == "mtp k=8"
    assert Setting("none", 8).label == "none"
    logs = Path("/logs")
    assert log_paths(RECIPE, logs, 2) == [logs / "mtp-k8-p0.4-0.log", logs / "mtp-k8-p0.4-1.log"]
    assert log_paths(plain, logs, 1) == [logs / "mtp-k8-0.log"]
    assert recipe_flags(0.7) == ["--spec-draft-p-min", "0.7"]


def test_the_command_line_takes_a_device_runs_and_a_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from specbench.calibration_llama_logs import parse_args

    args = parse_args(["--device", "cuda", "--repeat", "3", "--out", str(tmp_path)])
    assert (args.device, args.repeat, args.out, args.quick) == ("cuda", 3, tmp_path, False)
    assert parse_args([]).device == "cpu" and parse_args([]).repeat is None
    for bad in (["--repeat", "0"], ["--device", "gpu"]):
        with pytest.raises(SystemExit):
            parse_args(bad)
    assert "--repeat: 0 is not a number of runs" in capsys.readouterr().err
