"""The cross-validation of `specledger calibrate` on captured logs: the fit log is its
setting's median run, a fit predicts its own log and flags it, every other setting's
prediction is inside the fit's reach or marked with why; the summary counts each kind
against the band, and the goal is met only when every prediction inside a reach is
within it. The recommended fit log is the recipe's draft-mtp server under
`--spec-draft-p-min`, named and logged apart from the plain draft-mtp server of the same
size."""

from pathlib import Path
from typing import Any

import pytest

from adapters.llama.calibration.clock import LogClock, log_clock
from adapters.llama.calibration.fit import fit_log, predict_tok_s
from adapters.llama.calibration.reach import reach_of
from adapters.llama.log.sources import read_log
from specbench.calibration.llama.capture import RECIPE, SETTINGS, Setting, log_paths
from specbench.calibration.llama.logs import (
    goal_met,
    held_out_summary,
    median_run,
    predictions,
    table,
)
from specbench.calibration.llama.recipe import P_MIN, recipe_flags
from tests.adapters.llama.log.test_reader import FIXTURES


def _clock(name: str) -> LogClock:
    return log_clock(read_log(FIXTURES / f"{name}.log.gz"))


def test_the_fit_log_is_the_median_run() -> None:
    runs = [_clock("ngram-mod") for _ in range(3)]
    for c, scale in zip(runs, (1.0, 2.0, 0.5), strict=True):
        c.tasks = [type(t)(t.task, t.segments, t.eval_s * scale, t.eval_tokens, t.segments_s)
                   for t in c.tasks]
    assert median_run(runs) is runs[0]


def test_each_fit_predicts_every_setting_flags_its_own_and_marks_what_it_never_measured(
) -> None:
    # two passes; the second pass's ngram-mod run is another log of that server
    clocks = {"ngram-mod": [_clock("ngram-mod"), _clock("eog-in-block")],
              "none": [_clock("plain")] * 2, "mtp": [_clock("mtp")] * 2}
    fits = {"ngram-mod": [fit_log(c) for c in clocks["ngram-mod"]]}
    rows = predictions(fits, {"ngram-mod": reach_of(clocks["ngram-mod"][0])}, clocks)
    own, plain, mtp = (r["ngram-mod"] for r in rows)
    assert own["fitted_on_it"] and own["outside"] == []
    # the fit log's own runs: the median of two measured, the noise their range
    measured = sorted(rows[0]["runs"])
    assert rows[0]["measured"] == pytest.approx(sum(measured) / 2)
    assert rows[0]["noise"] == pytest.approx((measured[1] - measured[0]) / rows[0]["measured"])
    assert rows[1]["noise"] == 0.0
    # pass by pass: each cell the median of its passes' errors
    assert plain["error"] == pytest.approx(
        sum(p / m - 1 for p, m in zip([predict_tok_s(f, clocks["none"][0])[1]
                                        for f in fits["ngram-mod"]], rows[1]["runs"],
                                       strict=True)) / 2)
    # a server without a drafter: one-token forwards and plain rounds, which the ngram-mod
    # log ran too, on the same graph: inside
    assert plain["outside"] == []
    # draft-mtp: a drafter it never ran, a larger graph (per-position states)
    assert {w["beyond"] for w in mtp["outside"]} == {"drafter", "graph"}
    assert table(rows, ["ngram-mod"]).count("(fit log)") == 1


def _row(setting: str, errors: dict[str, tuple[float, list[str]]]) -> dict[str, Any]:
    """A results row: for each fit its error and the kinds of its reasons (none: inside)."""
    return {"setting": setting, "runs": [100.0], "measured": 100.0, "noise": 0.0} | {
        f: {"predicted": 100 * (1 + e), "error": e, "fitted_on_it": f == setting,
            "outside": [{"beyond": k, "clause": k} for k in kinds]}
        for f, (e, kinds) in errors.items()}


ROWS = [_row("a", {"a": (0.0, []), "b": (0.10, [])}),
        _row("b", {"a": (-0.20, []), "b": (0.0, [])}),
        _row("c", {"a": (0.40, ["drafter", "graph"]), "b": (0.05, ["batch sizes"])})]


def test_the_summary_counts_inside_and_outside_against_the_band() -> None:
    # four predictions of settings no fit saw: b from a (+10%, inside), a from b (-20%,
    # inside, a miss), c from a (+40%, outside), c from b (+5%, outside)
    assert held_out_summary(ROWS) == ("4 predictions: 2 inside their fit's reach, 1 of them "
                                      "within 15%; 2 outside it (marked), 1 of them within")
    text = table(ROWS, ["a", "b"])
    assert "80 (-20.0%) **miss**" in text and "110 (+10.0%) |" in text
    assert "140 (+40.0%) †DG" in text and "105 (+5.0%) †S" in text


def test_the_goal_is_every_prediction_inside_a_reach_within_the_band() -> None:
    assert not goal_met({"builds": {"x": {"rows": ROWS}}})
    mended = [ROWS[0], _row("b", {"a": (-0.12, []), "b": (0.0, [])}), ROWS[2]]
    assert goal_met({"builds": {"x": {"rows": mended}}})  # the outside +40% does not count


def test_the_recipe_is_the_first_setting_and_logs_apart_from_its_plain_size() -> None:
    assert SETTINGS[0] == RECIPE and RECIPE.p_min == P_MIN
    plain = Setting(RECIPE.drafter, RECIPE.draft)
    assert plain in SETTINGS and Setting("none", 8) in SETTINGS
    assert RECIPE.label == "mtp k=8 p-min 0.4" and plain.label == "mtp k=8"
    assert Setting("none", 8).label == "none"
    logs = Path("/logs")
    assert log_paths(RECIPE, logs, 2) == [logs / "mtp-k8-p0.4-0.log", logs / "mtp-k8-p0.4-1.log"]
    assert log_paths(plain, logs, 1) == [logs / "mtp-k8-0.log"]
    assert recipe_flags(0.7) == ["--spec-draft-p-min", "0.7"]


def test_the_command_line_takes_a_device_runs_builds_and_a_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from specbench.calibration.llama.logs import BUILDS, parse_args

    args = parse_args(["--device", "cuda", "--repeat", "3", "--out", str(tmp_path),
                       "--builds", "0.3.36"])
    assert (args.device, args.repeat, args.out, args.quick, args.builds) == (
        "cuda", 3, tmp_path, False, ("0.3.36",))
    assert parse_args([]).device == "cpu" and parse_args([]).repeat is None
    assert parse_args([]).builds == BUILDS == ("0.3.36", "0.3.30")
    for bad in (["--repeat", "0"], ["--device", "gpu"], ["--builds", "latest"]):
        with pytest.raises(SystemExit):
            parse_args(bad)
    err = capsys.readouterr().err
    assert "--repeat: 0 is not a number of runs" in err and "--builds: llama build" in err
