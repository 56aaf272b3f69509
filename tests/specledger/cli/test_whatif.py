"""`specledger whatif SESSION --profile P`: a recorded session's acceptance pattern
replayed on another machine's profile, plain against speculative tokens/s."""

import json
from pathlib import Path

import pytest

from engine.sim.costs import get_profile
from engine.sim.forecast import Mode, forecast, recut
from eventlog import open_db
from eventlog.reader import scan_events
from specledger.cli.main import main
from specledger.views.whatif import session_rounds

STRIX = "strix-halo-qwen3-next-80b-q4-llama"


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One sim session with the synthetic drafter (long drafts, some rejected)."""
    db = str(tmp_path_factory.mktemp("whatif") / "l.db")
    assert main(["run", "--backend", "sim", "--drafter", "synthetic", "--strategy",
                 "checkpoint", "--turns", "2", "--max-answer-tokens", "48", "--db", db,
                 "--json"]) == 0
    return db


def _whatif(db: str, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    capsys.readouterr()
    assert main(["whatif", "1", "--profile", STRIX, "--db", db, "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_rounds_are_the_session_s_and_the_forecast_is_the_profile_s(
        ledger: str, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["show", "1", "--db", ledger, "--json"]) == 0
    turns = json.loads(capsys.readouterr().out)["turns"]
    doc = _whatif(ledger, capsys)
    assert doc["tokens"] == sum(t["generated_tokens"] for t in turns) - len(turns)
    assert doc["drafted"] == sum(t["drafted"] for t in turns) > 0
    assert doc["accepted"] == sum(t["accepted"] for t in turns) < doc["drafted"]
    rounds = session_rounds(scan_events(open_db(ledger, create=False), 1))
    expected = forecast(get_profile(STRIX), rounds)  # the synthetic drafter drafts for free
    assert doc["tok_s"] == pytest.approx({m.value: expected.tok_s(m) for m in Mode})
    # Strix Halo's host round trip costs more than the whole round: speculation loses
    assert doc["speedup"]["host"] < 0.5 < doc["speedup"]["device"] < doc["speedup"]["n_rs_seq"]


def test_draft_max_recuts_the_pattern(ledger: str, capsys: pytest.CaptureFixture[str]) -> None:
    full, cut = _whatif(ledger, capsys), _whatif(ledger, capsys, "--set", "draft_max=2")
    assert cut["draft_max"] == 2 and cut["rounds"] == full["rounds"]
    assert cut["drafted"] < full["drafted"] and cut["tokens"] < full["tokens"]
    rounds = recut(session_rounds(scan_events(open_db(ledger, create=False), 1)), 2)
    assert max(r.drafted for r in rounds) == 2
    assert cut["accepted"] == sum(r.accepted for r in rounds)


def test_a_draft_share_slows_only_speculation(ledger: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    free, paid = _whatif(ledger, capsys), _whatif(ledger, capsys, "--draft-share", "0.5")
    assert paid["tok_s"]["plain"] == free["tok_s"]["plain"]
    assert all(paid["tok_s"][m] < free["tok_s"][m] for m in ("host", "device", "n_rs_seq"))


@pytest.mark.parametrize(("extra", "message"), [
    (["--set", "draft_max=999"], "never drafted more than"),
    (["--set", "k=2"], "expected one of draft_max=N"),
    (["--set", "draft_max=x"], "non-negative integer"),
])
def test_bad_settings_are_one_line_errors(ledger: str, capsys: pytest.CaptureFixture[str],
                                          extra: list[str], message: str) -> None:
    capsys.readouterr()
    assert main(["whatif", "1", "--profile", STRIX, "--db", ledger, *extra]) != 0
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_the_table_names_every_way_and_says_when_speculation_loses(
        ledger: str, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["whatif", "1", "--profile", STRIX, "--db", ledger]) == 0
    out = capsys.readouterr().out
    assert "host checkpoints" in out and "on-device" in out and "n_rs_seq" in out
    assert f"speculation loses on {STRIX}" in out


def test_an_unknown_profile_is_a_config_error(tmp_path: Path, ledger: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["whatif", "1", "--profile", "nope", "--db", ledger]) != 0
    assert "unknown 'nope'" in capsys.readouterr().err


def test_a_calibrated_profile_marks_each_mode_beyond_its_logs_reach(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a profile fitted from an ngram-mod log, a session imported from a draft-mtp log of
    # the same build: plain decoding lies inside the n-gram log's reach (one-token
    # forwards, plain rounds, no per-position state); the speculative modes need the MTP
    # head it never ran, and n_rs_seq the states it never kept
    from tests.adapters.llama.log.test_reader import FIXTURES

    build = FIXTURES / "builds" / "0.3.36"
    db, profile = str(tmp_path / "l.db"), tmp_path / "ngram.json"
    assert main(["calibrate", str(build / "ngram-mod.log.gz"), "--out", str(profile)]) == 0
    assert main(["import", "llama-server", str(build / "mtp.log.gz"), "--db", db,
                 "--json"]) == 0
    capsys.readouterr()
    assert main(["whatif", "1", "--profile", str(profile), "--db", db, "--json"]) == 0
    beyond = json.loads(capsys.readouterr().out)["outside"]
    assert beyond["plain"] == []
    assert any("draft-mtp never ran in the fit log" in c for c in beyond["host"])
    assert any("it keeps 4 per-position state(s)" in c for c in beyond["n_rs_seq"])
    assert any(c.startswith("on-device checkpoints") for c in beyond["device"])
    assert main(["whatif", "1", "--profile", str(profile), "--db", db]) == 0
    text = capsys.readouterr().out
    assert "(extrapolated)" in text and "beyond the profile's log:" in text
    # a profile no log fitted carries no reach: nothing is marked
    assert _whatif(db, capsys)["outside"] is None
