"""`specledger calibrate LOG|SESSION`: a real captured log gives each term with its
spread or the reason it is not fitted, the residuals, what it measured (its reach), and a
profile the sim runs with; other logs are predicted and marked where they need what the
fit log never measured; a session imported from a log is calibrated from that log; a log
that cannot be timed is one line, exit 1."""

import json
import re
from pathlib import Path

import pytest

from engine.sim.costs import load_profile_file
from specledger.cli.main import main
from tests.adapters.llama.log.test_reader import FIXTURES, fixture_text


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:  # type: ignore[type-arg]
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_log_gives_terms_residuals_and_a_profile(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "box.json"
    doc = _json(["calibrate", str(FIXTURES / "eog-in-block.log.gz"), "--out", str(out),
                 "--db", str(tmp_path / "l.db")], capsys)
    terms = {t["term"]: t for t in doc["terms"]}
    assert terms["round_s"]["status"] == "unseparated"
    assert "save_s" in terms["round_s"]["carried_by"]  # a checkpoint every round
    assert terms["launch_s"]["status"] == "fitted" and terms["launch_s"]["spread_s"] > 0
    assert doc["segments"] == 145 and doc["residuals"]["rows"] > 100
    # the log's own decode time is what the fit charges its rounds, stalls and all (the
    # level): its tok/s comes back as print_timing's up to the few lines between them
    tokens = doc["decode_tok_s"]["log"] * doc["eval_s"]
    assert doc["residuals"]["dropped"] > 0 and doc["level"] > 1
    assert tokens / doc["decode_tok_s"]["fit"] == pytest.approx(doc["segments_s"], rel=1e-9)
    profile = load_profile_file(out)
    assert profile.name == "box" and profile.checkpoint_place == "host"
    assert list(profile.forward_knots) == doc["knots"] and doc["knots"][0] == 1
    calibration = json.loads(out.read_text())["calibration"]["calibrate"]
    assert calibration["reach"] == doc["reach"] and doc["reach"]["saves"] is True
    assert main(["run", "--backend", "sim", "--profile", str(out), "--turns", "1",
                 "--db", str(tmp_path / "l.db"), "--json"]) == 0


def test_another_log_is_predicted_and_marked_where_the_fit_log_never_reached(
        capsys: pytest.CaptureFixture[str]) -> None:
    build = FIXTURES / "builds" / "0.3.36"
    doc = _json(["calibrate", str(build / "ngram-mod.log.gz"), "--predict",
                 str(build / "plain.log.gz"), "--predict", str(build / "mtp.log.gz")], capsys)
    plain, mtp = doc["predictions"]
    assert plain["outside"] == []  # one-token forwards and plain rounds: the n-gram log ran both
    assert plain["error"] == pytest.approx(plain["predicted_tok_s"] / plain["measured_tok_s"] - 1)
    assert {w["beyond"] for w in mtp["outside"]} == {"drafter", "graph"}
    assert main(["calibrate", str(build / "ngram-mod.log.gz"), "--predict",
                 str(build / "mtp.log.gz")]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "outside the fit's reach: draft-mtp never ran in the fit log" in text
    assert "measured (the fit's reach): forwards of 1-" in text


def test_an_imported_session_is_calibrated_from_its_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "l.db")
    log = tmp_path / "ngram.log"
    log.write_text(fixture_text("ngram-mod"), errors="surrogateescape")
    [imported] = _json(["import", "llama-server", str(log), "--db", db], capsys)["sessions"]
    session = imported["session"]
    doc = _json(["calibrate", str(session), "--db", db], capsys)
    assert doc["log"] == str(log) and doc["tasks"] == 2
    log.unlink()
    capsys.readouterr()
    assert main(["calibrate", str(session), "--db", db]) == 1
    assert "is gone" in capsys.readouterr().err


def test_a_log_without_timestamps_is_one_line(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "plain.log"
    log.write_text(re.sub(r"(?m)^\d+\.\d{2}\.\d{3}\.\d{3} ", "", fixture_text("plain")),
                   errors="surrogateescape")
    capsys.readouterr()
    assert main(["calibrate", str(log)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--log-timestamps" in err


def test_a_draft_mtp_log_of_one_verify_size_takes_the_forwards_curve_from_its_prompts(
        capsys: pytest.CaptureFixture[str]) -> None:
    # every round verifies 5 tokens: the prompt's forwards (a turn's, a whole first
    # prompt) carry the forward's curve beyond, but measure it once each: its reach stays
    # at the sizes it ran three times or more
    doc = _json(["calibrate", str(FIXTURES / "builds" / "0.3.36" / "mtp.log.gz")], capsys)
    terms = {t["term"]: t for t in doc["terms"]}
    slopes = [t for t in terms.values() if t["term"].startswith("token_s[")]
    assert len(slopes) >= 2 and all(t["status"] == "fitted" for t in slopes)
    assert doc["knots"][-1] > 100 and doc["reach"]["largest"] == 5
    assert terms["draft_call_s[draft-mtp]"]["status"] == "fitted"
    assert terms["drafter_round_token_s[draft-mtp]"]["status"] == "fitted"


def test_an_ngram_log_derives_the_mtp_heads_cost_from_the_models_shape(
        capsys: pytest.CaptureFixture[str]) -> None:
    build = FIXTURES / "builds" / "0.3.36"
    terms = {t["term"]: t for t in _json(["calibrate", str(build / "ngram-mod.log.gz")],
                                         capsys)["terms"]}
    derived = terms["draft_token_s[draft-mtp]"]
    assert derived["status"] == "derived"
    assert derived["source"].startswith("from the model's shape: 1 of 8 layers + the head")
    # its share of the fit's one-token forward (a prior, and the fit's reach says the
    # drafter never ran: the fixture's own draft-mtp log fits ~3x this on this machine,
    # its call's fixed cost being most of it)
    share = float(derived["source"].split(": ")[-1].split("%")[0]) / 100
    assert derived["value_s"] == pytest.approx(share * terms["launch_s"]["value_s"], rel=5e-3)
    mtp = {t["term"]: t for t in _json(["calibrate", str(build / "mtp.log.gz")],
                                       capsys)["terms"]}
    assert mtp["drafter_round_s[draft-mtp]"]["status"] == "fitted"
    assert main(["calibrate", str(build / "ngram-mod.log.gz")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "derived (a drafter the log never ran): from the model's shape" in out


def test_the_help_gives_the_recipe_log_the_bench_records(capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    from specbench.calibration.llama.recipe import DRAFT, P_MIN, recipe_flags

    with pytest.raises(SystemExit):
        main(["calibrate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    flags = " ".join(recipe_flags(P_MIN))
    assert f"--spec-type draft-mtp --spec-draft-n-max {DRAFT} {flags}" in text
    assert "-v --log-timestamps --log-prefix" in text


def test_the_recipes_log_separates_the_speculative_round_from_the_forward(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = _json(["calibrate", str(FIXTURES / "mtp-pmin.log.gz"), "--db",
                 str(tmp_path / "l.db")], capsys)
    terms = {t["term"]: t for t in doc["terms"]}
    assert terms["round_s"]["status"] in ("fitted", "bound")
    assert terms["token_s[1..2]"]["status"] == "fitted"  # plain and verify forwards both
    assert terms["draft_call_s[draft-mtp]"]["status"] == "fitted"
    assert doc["reach"]["plain"] and doc["reach"]["speculative"]


@pytest.mark.parametrize("build", sorted(p.name for p in (FIXTURES / "builds").iterdir()
                                         if p.is_dir()))
def test_a_plain_log_of_every_build_is_fitted(build: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The captured plain server of each build the project builds (their -v flags carry
    --log-timestamps): the one-token forward's cost and a slope to the prompts' sizes
    fitted, half the rows within a third of their measured time, and the log's own stalls
    within a quarter of its time (the level: 1.00-1.13 over 0.3.20-0.3.36)."""
    doc = _json(["calibrate", str(FIXTURES / "builds" / build / "plain.log.gz"),
                 "--db", str(tmp_path / "l.db")], capsys)
    terms = {t["term"]: t for t in doc["terms"]}
    assert terms["launch_s"]["status"] == "fitted" and terms["launch_s"]["value_s"] > 0
    assert doc["knots"][0] == 1 and len(doc["knots"]) >= 2
    assert doc["segments"] > 20
    assert doc["residuals"]["median_abs"] < 1 / 3
    assert 1.0 <= doc["level"] < 1.25
