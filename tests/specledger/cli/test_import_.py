"""`specledger import llama-server LOG`: a captured log becomes a session that show,
replay and postmortem read; its provenance says what the source was and provides; bad
input is one line, exit 1."""

import gzip
import json
import re
from pathlib import Path

import pytest

from adapters.llama.log.sources import read_log
from eventlog import get_session, open_db
from eventlog.reader import scan_events
from fsm.states import Trigger
from specledger.cli.main import main
from tests.adapters.llama.log.test_reader import FIXTURES, fixture_text


def run_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:  # type: ignore[type-arg]
    """`main(argv + --json)`'s document (exit 0 required); an import's one session."""
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    if argv[0] == "import":
        [doc] = doc["sessions"]
    return doc


def test_import_then_read_it_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "l.db")
    log, answers = FIXTURES / "ngram-mod.log.gz", FIXTURES / "ngram-mod.responses.json"
    doc = run_json(["import", "llama-server", str(log), "--responses", str(answers),
                    "--db", db], capsys)
    assert doc["violations"] == 0 and doc["responses_matched"] == 2 == len(doc["turns"])
    assert doc["lines"]["unknown"] == 0 and doc["drafter"] == "ngram-mod"
    info = get_session(open_db(db, create=False), doc["session"])
    cfg = info.config
    assert info.backend == "llama" and cfg["engine"] == "llama.cpp"
    assert cfg["source"]["sha256"] == __import__("hashlib").sha256(
        fixture_text("ngram-mod").encode(errors="surrogateescape")).hexdigest()
    assert cfg["strategy"] == "checkpoint" and cfg["replay_policy"] == "reverify"
    assert cfg["provides"]["digests"] is False and cfg["fingerprint"] == "b1-0c1e570"
    shown = run_json(["show", str(doc["session"]), "--db", db], capsys)
    assert [t["generated_tokens"] for t in shown["turns"]] == [
        t["generated_tokens"] for t in doc["turns"]]
    replay = run_json(["replay", str(doc["session"]), "--db", db], capsys)
    assert replay["slots"][0]["state"] == "done"
    post = run_json(["postmortem", str(doc["session"]), "--db", db], capsys)
    assert post["counts"]["error"] == 0


def test_text_output_names_the_counts(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", "llama-server", str(FIXTURES / "quiet.log.gz"),
                 "--db", str(tmp_path / "q.db")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    r = read_log(FIXTURES / "quiet.log.gz")
    assert f"{r.lines} lines: {r.parsed} parsed, {r.skipped} skipped, 0 unknown" in out
    assert "?" in out  # what a log without -v cannot tell


def test_truncated_log_is_imported_and_reported(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    text = fixture_text("ngram-mod")
    at = text.index("\n", text.rindex("restoring speculative checkpoint")) + 1
    cut = tmp_path / "cut.log"
    cut.write_text(text[:at] + "0.02.000.000 D slot   operator(): id  0 | task 3",
                   errors="surrogateescape")
    db = str(tmp_path / "t.db")
    doc = run_json(["import", "llama-server", str(cut), "--db", db], capsys)
    assert doc["partial_line"] == text[:at].count("\n") + 1
    assert [t["dropped_round"] for t in doc["truncated_tasks"]] == [True]
    events = list(scan_events(open_db(db, create=False), doc["session"]))
    assert events[-1].trigger is Trigger.FAIL
    assert get_session(open_db(db, create=False), doc["session"]).status.value == "failed"
    # A log that ends inside a request is a piece of a healthy run: a note, no error.
    assert main(["postmortem", str(doc["session"]), "--db", db, "--json"]) == 0
    post = json.loads(capsys.readouterr().out)
    kinds = {f["kind"]: f for f in post["findings"]}
    assert kinds["partial_request"]["severity"] == "info" and "run_failed" not in kinds
    # show lists the turn the log ends inside, with what its whole rounds committed.
    shown = run_json(["show", str(doc["session"]), "--db", db], capsys)
    assert [t["turn"] for t in shown["turns"]] == [1]
    [cut_turn] = shown["partial_turns"]
    committed = [e for e in events if e.turn == 2 and e.trigger is Trigger.COMMIT]
    assert cut_turn["turn"] == 2 and cut_turn["rounds"] == len(committed)
    assert cut_turn["generated_tokens"] == 1 + sum(len(e.payload["append"]) for e in committed)
    assert main(["show", str(doc["session"]), "--db", db]) == 0
    out = capsys.readouterr().out
    assert "2*" in out and "the log ends inside this turn" in out


def test_a_cut_gzip_is_imported_and_reported(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    data = (FIXTURES / "ngram-mod.log.gz").read_bytes()
    cut_at = len(data) * 9 // 10
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(data[:cut_at])
    db = str(tmp_path / "g.db")
    doc = run_json(["import", "llama-server", str(cut), "--db", db], capsys)
    assert doc["gzip_cut"]["at"] == cut_at and doc["partial_line"] is not None
    assert len(doc["turns"]) == 1 and len(doc["truncated_tasks"]) == 1
    assert main(["import", "llama-server", str(cut), "--db", db]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"the gzip stream ends early at byte {cut_at} of" in out
    assert f"line {doc['partial_line']} was cut mid-write" in out


def test_show_reads_the_engines_figures_from_a_log_without_rounds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = fixture_text("quiet")
    logged = [float(x) for x in re.findall(r"mean len =\s*([\d.]+)", text)]
    assert len(logged) == 2 and "acc per pos" not in text  # trace level: not at the default
    db = str(tmp_path / "q.db")
    sid = run_json(["import", "llama-server", str(FIXTURES / "quiet.log.gz"), "--db", db],
                   capsys)["session"]
    turns = run_json(["show", str(sid), "--db", db], capsys)["turns"]
    assert [t["mean_accept_len"] for t in turns] == logged
    assert [t["acc_per_pos"] for t in turns] == [None, None]  # unknown, not "no drafts"
    assert main(["show", str(sid), "--db", db]) == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("│")]
    assert [ln.split("│")[-3].strip() for ln in rows] == [f"{x:.2f}" for x in logged]
    assert [ln.split("│")[-2].strip() for ln in rows] == ["?", "?"]


def test_a_log_whose_head_was_cut_names_no_drafter(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # A rotated log: its file begins after the server's start, speculative setup and all.
    text = fixture_text("ngram-mod")
    cut = tmp_path / "tail.log"
    cut.write_text(text[text.rindex("\n", 0, text.index("selected slot by")) + 1:],
                   errors="surrogateescape")
    db = str(tmp_path / "h.db")
    doc = run_json(["import", "llama-server", str(cut), "--db", db], capsys)
    assert doc["drafter"] is None and len(doc["turns"]) == 2
    assert main(["import", "llama-server", str(cut), "--db", db]) == 0
    assert "drafter not logged" in " ".join(capsys.readouterr().out.split())


def test_show_reads_acceptance_per_position_from_a_trace_level_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # quiet-lv4 ran the mtp fixture's conversation at -lv 4: print_timing's `acc per pos`
    # without a round; the -v log's rounds give the same figures.
    db = str(tmp_path / "t.db")
    ids = [run_json(["import", "llama-server", str(FIXTURES / f"{name}.log.gz"), "--db", db],
                    capsys)["session"] for name in ("quiet-lv4", "mtp")]
    lv4, verbose = (run_json(["show", str(i), "--db", db], capsys)["turns"] for i in ids)
    assert [t["rounds"] for t in lv4] == [None, None]
    assert [t["acc_per_pos"] for t in lv4] == [[1.0, 0.625, 0.25, 0.0]] * 2
    for a, b in zip(lv4, verbose, strict=True):
        assert a["mean_accept_len"] == pytest.approx(b["mean_accept_len"], abs=0.005)
        assert a["acc_per_pos"] == pytest.approx(b["acc_per_pos"], abs=0.0005)


@pytest.mark.parametrize("content", [b"", b"\x00binary", b"not a log\n"])
def test_bad_input_is_one_line_exit_1(tmp_path: Path, content: bytes,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "x.log"
    path.write_bytes(gzip.compress(content) if content == b"" else content)
    assert main(["import", "llama-server", str(path), "--db", str(tmp_path / "x.db")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("specledger: error: ") and err.count("\n") == 1


def test_bad_responses_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    answers = tmp_path / "a.json"
    answers.write_text('[{"no": "timings"}]')
    assert main(["import", "llama-server", str(FIXTURES / "mtp.log.gz"), "--responses",
                 str(answers), "--db", str(tmp_path / "a.db")]) == 1
    assert "no llama-server answer" in capsys.readouterr().err
