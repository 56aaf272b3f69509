"""`show` of a llama.cpp session names the build its log's banner names and, for every
known incident, whether that build is exposed, fixed or cannot run into it (a matrix
build by its own source), each with its first bug and fixed builds upstream; a commit no
upstream build has is said to be so, its incidents unknown; a session of our own engine
says nothing of llama.cpp builds."""

import gzip
import json
from pathlib import Path

import pytest

from adapters.llama.builds.incidents import INCIDENTS
from adapters.llama.builds.matrix import MATRIX, Exposure, facts
from specledger.cli.main import main
from tests.adapters.llama.log.test_reader import FIXTURES, fixture_text


def _show(db: str, session: int, capsys: pytest.CaptureFixture[str]) -> tuple[dict, str]:  # type: ignore[type-arg]
    capsys.readouterr()
    assert main(["show", str(session), "--db", db, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert main(["show", str(session), "--db", db]) == 0
    return doc, " ".join(capsys.readouterr().out.split())


def _import(log: Path, db: str, capsys: pytest.CaptureFixture[str]) -> int:
    capsys.readouterr()
    assert main(["import", "llama-server", str(log), "--db", db, "--json"]) == 0
    [doc] = json.loads(capsys.readouterr().out)["sessions"]
    return int(doc["session"])


def test_the_banner_names_the_build_and_its_incidents(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "s.db")
    doc, text = _show(db, _import(FIXTURES / "ngram-mod.log.gz", db, capsys), capsys)
    build = facts("0.3.36")
    assert build is not None
    shown = doc["llama_build"]
    assert shown["version"] == "0.3.36" and shown["in_matrix"] is True
    assert shown["commit"] == build.commit and "(0c1e570)" in shown["banner"]
    exposed = {i.key for i in INCIDENTS if build.exposures[i.key] is Exposure.BUG}
    assert {i["key"] for i in shown["incidents"]} == exposed
    assert "PR 26320" not in exposed and "#28049" in exposed  # fixed; not fixed
    assert "0.3.36 (llama.cpp 0c1e570" in text and "upstream b11312" in text
    said = {"bug": "exposed", "fixed": "fixed", "absent": "absent"}
    for incident, verdict in zip(INCIDENTS, shown["verdicts"], strict=True):
        assert verdict["key"] == incident.key
        assert verdict["verdict"] == said[build.exposures[incident.key]]
        assert f"{incident.key} {incident.title}: {verdict['verdict']}" in text
        assert (incident.fix in text) == (incident.key in exposed)
    assert "fixed (upstream: bug from b8842, fixed in b10210)" in text  # PR 26320


def test_a_commit_no_upstream_build_has_is_said_to_be(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "other.log.gz"
    log.write_bytes(gzip.compress(fixture_text("plain").replace(
        "(0c1e570)", "(1234abc)").encode(errors="surrogateescape")))
    db = str(tmp_path / "o.db")
    doc, text = _show(db, _import(log, db, capsys), capsys)
    shown = doc["llama_build"]
    assert shown["in_matrix"] is False and shown["version"] is None
    assert shown["incidents"] == [] and "(1234abc)" in shown["banner"]
    assert shown["upstream_build"] is None and shown["judged_by"] == "none"
    assert {v["verdict"] for v in shown["verdicts"]} == {"unknown"}
    assert "not upstream llama.cpp's b1 " in text and "incidents are unknown" in text


def test_our_own_engine_names_no_llama_build(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "sim.db")
    assert main(["run", "--backend", "sim", "--turns", "1", "--db", db]) == 0
    doc, text = _show(db, 1, capsys)
    assert "llama_build" not in doc and "llama.cpp build" not in text


@pytest.mark.parametrize("version", MATRIX)  # every build has its captures
def test_each_builds_capture_names_its_own_build(
        version: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "b.db")
    doc, text = _show(db, _import(FIXTURES / "builds" / version / "plain.log.gz", db, capsys),
                      capsys)
    build = facts(version)
    assert build is not None and doc["llama_build"]["version"] == version
    assert {i["key"] for i in doc["llama_build"]["incidents"]} == {
        k for k, e in build.exposures.items() if e is Exposure.BUG}
    assert f"llama.cpp build: {build.label()}" in text
