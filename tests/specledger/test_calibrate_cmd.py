"""`specledger calibrate LOG|SESSION`: a real captured log gives each term with its
spread or the reason it is not fitted, the residuals, and a profile the sim runs with; a
session imported from a log is calibrated from that log; a log that cannot be timed is
one line, exit 1."""

import json
import re
from pathlib import Path

import pytest

from engine.sim.costs import load_profile_file
from specledger.cli import main
from tests.adapters.llama.test_logread import FIXTURES, fixture_text


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
    assert terms["round_s"]["carried_by"] == ["save_s"]  # a checkpoint every round
    assert terms["launch_s"]["status"] == "fitted" and terms["launch_s"]["spread_s"] > 0
    assert doc["segments"] == 145 and doc["residuals"]["decode"]["rows"] > 100
    # least squares on seconds: the fitted rounds add up to the log's decode time, less
    # the stalls dropped from the fit
    decode = doc["residuals"]["decode"]
    tokens = doc["decode_tok_s"]["log"] * doc["eval_s"]
    assert decode["dropped"] > 0
    assert tokens / doc["decode_tok_s"]["fit"] == pytest.approx(
        doc["segments_s"] - decode["stall_s"], rel=1e-9)
    profile = load_profile_file(out)
    assert profile.name == "box" and profile.checkpoint_place == "host"
    assert profile.launch_s == pytest.approx(terms["launch_s"]["value_s"])
    assert main(["run", "--backend", "sim", "--profile", str(out), "--turns", "1",
                 "--db", str(tmp_path / "l.db"), "--json"]) == 0


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


def test_a_draft_mtp_log_times_its_drafter_and_takes_the_token_cost_from_its_prompts(
        capsys: pytest.CaptureFixture[str]) -> None:
    log = FIXTURES / "builds" / "0.3.36" / "mtp.log.gz"
    terms = {t["term"]: t for t in _json(["calibrate", str(log)], capsys)["terms"]}
    # every round verifies the same 5 tokens: the rounds cannot separate the per-token
    # cost, so the prompt lines give it, and the report says so
    token = terms["token_s"]
    assert token["status"] == "pinned" and "prompt lines" in token["source"]
    assert token["value_s"] == terms["prefill_token_s"]["value_s"] > 0
    assert terms["draft_token_s[draft-mtp]"]["status"] == "fitted"
    assert main(["calibrate", str(log)]) == 0
    assert "the rounds could not separate it" in " ".join(capsys.readouterr().out.split())


def test_an_ngram_log_derives_the_mtp_heads_cost_from_the_models_shape(
        capsys: pytest.CaptureFixture[str]) -> None:
    build = FIXTURES / "builds" / "0.3.36"
    terms = {t["term"]: t for t in _json(["calibrate", str(build / "ngram-mod.log.gz")],
                                         capsys)["terms"]}
    derived = terms["draft_token_s[draft-mtp]"]
    assert derived["status"] == "derived"
    assert derived["source"].startswith("from the model's shape: 1 of 8 layers + the head")
    # the fixture's own draft-mtp log fits its drafting at ~0.4 ms a drafted token (k=4):
    # the shape's share of the n-gram log's batch-1 forward is a prior within 50% of it
    mtp = {t["term"]: t for t in _json(["calibrate", str(build / "mtp.log.gz")],
                                       capsys)["terms"]}
    fitted = mtp["draft_token_s[draft-mtp]"]["value_s"] + mtp["draft_call_s[draft-mtp]"][
        "value_s"] / 4
    assert derived["value_s"] == pytest.approx(fitted, rel=0.5)
    assert mtp["drafter_round_s[draft-mtp]"]["status"] == "fitted"
    assert main(["calibrate", str(build / "ngram-mod.log.gz")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "derived (a drafter the log never ran): from the model's shape" in out


def test_the_help_gives_the_recipe_log_the_bench_records(capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    from specbench.calibration_llama_recipe import DRAFT, P_MIN, recipe_flags

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
    assert terms["token_s"]["status"] == "fitted"  # not pinned: the batches vary
    assert terms["draft_call_s[draft-mtp]"]["status"] == "fitted"


@pytest.mark.parametrize("build", sorted(p.name for p in (FIXTURES / "builds").iterdir()
                                         if p.is_dir()))
def test_a_plain_log_of_every_build_is_fitted(build: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The captured plain server of each build the project builds (their -v flags carry
    --log-timestamps): the forward's fixed cost fitted, half the rounds within a third of
    their measured time, and the log's tok/s predicted within 8% (the fit charges no
    dropped stall: 1.00-1.06 of the log's over 0.3.20-0.3.36)."""
    doc = _json(["calibrate", str(FIXTURES / "builds" / build / "plain.log.gz"),
                 "--db", str(tmp_path / "l.db")], capsys)
    terms = {t["term"]: t for t in doc["terms"]}
    assert terms["launch_s"]["status"] == "fitted" and terms["launch_s"]["value_s"] > 0
    assert terms["token_s"]["status"] in ("fitted", "pinned")
    assert doc["segments"] > 20
    assert doc["residuals"]["decode"]["median_abs"] < 1 / 3
    assert doc["decode_tok_s"]["fit"] / doc["decode_tok_s"]["log"] == pytest.approx(1, abs=0.08)
