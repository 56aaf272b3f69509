"""`specledger report`: one self-contained HTML file that a headless browser loads without
a console message, and the graph command's new kinds. Without Debian's chromium the browser
check skips, unless SPECLEDGER_REQUIRE_BROWSER=1 (as `make test` sets) makes that a failure."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from specledger.cli.main import main

SMALL = ["--backend", "sim", "--turns", "2", "--prompt-tokens", "64",
         "--question-tokens", "8", "--answer-tokens", "40"]
REQUIRE_ENV = "SPECLEDGER_REQUIRE_BROWSER"


def _doc(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(list(argv)) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    tmp = tmp_path_factory.mktemp("report")
    db = str(tmp / "log.db")
    assert main(["run", "--db", db, "--eog-policy", "legacy", "--json", *SMALL]) == 0
    assert main(["replay", "1", "--db", db, "--rerun", "--set", "eog_policy=truncate",
                 "--json"]) == 0
    assert main(["replay", "1", "--db", db, "--rerun", "--json"]) == 0
    out = tmp / "out" / "report.html"
    assert main(["report", "1", "2", "3", "--db", db, "--out", str(out), "--json"]) == 0
    return out, [1, 2, 3]


def test_report_is_self_contained(report: tuple[Path, list[int]]) -> None:
    path, sessions = report
    html = path.read_text(encoding="utf-8")
    for sid in sessions:
        assert f"id='session-{sid}'" in html
    # per session: fsm + timeline; then the divergence tree and the machine diagram
    assert html.count("<svg") == 2 * len(sessions) + 2
    assert "eog_stray_tokens" in html and "branch point at seq" in html
    assert "First divergence at" in html and "No divergence" in html
    assert not re.search(r"<script|<link|<img|<iframe|\ssrc=|url\(", html)
    ids = re.findall(r' id="([^"]+)"', html)
    assert len(ids) == len(set(ids))  # graphs on one page never share an id


@pytest.fixture
def chromium() -> str:
    """Debian's chromium, or skip (fail under SPECLEDGER_REQUIRE_BROWSER=1) saying why."""
    path = shutil.which("chromium")
    if path is None:
        why = "needs Debian's chromium for the headless check: apt-get install -y chromium"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{why} ({REQUIRE_ENV}=1)")
        pytest.skip(why)
    return path


def _chromium(browser: str, page: Path, shot: Path) -> list[str]:
    run = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
         "--v=0", f"--screenshot={shot}", "--window-size=1280,2000", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    return [line for line in run.stderr.splitlines() if ":CONSOLE" in line]


def test_report_loads_in_headless_chromium(report: tuple[Path, list[int]], chromium: str,
                                           tmp_path: Path) -> None:
    path, _ = report
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><p>x</p><script>console.error('boom')</script>")
    assert any("boom" in line for line in _chromium(chromium, bad, tmp_path / "bad.png"))
    shot = tmp_path / "report.png"
    assert _chromium(chromium, path, shot) == []
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG") and len(data) > 20_000


def test_graph_kinds(report: tuple[Path, list[int]], tmp_path: Path,
                     capsys: pytest.CaptureFixture[str]) -> None:
    db = str(report[0].parent.parent / "log.db")
    for kind, sessions, needle in [("timeline", ["1"], b"slot 0 turn 1"),
                                   ("divergence", ["1", "2", "3"], b"branch point"),
                                   ("machine", [], b"round machine"),
                                   ("fsm", ["2"], b"verify x")]:
        out = tmp_path / f"{kind}.svg"
        doc = _doc(capsys, "graph", *sessions, "--kind", kind, "--db", db, "--out", str(out),
                   "--json")
        assert doc["kind"] == kind and needle in out.read_bytes()
    # A wrong number of sessions is the command line's shape (2); a missing one is not (1).
    for argv, status, needle in [(["graph", "1", "--kind", "divergence"], 2, "two or more"),
                                 (["graph", "1", "2", "--kind", "timeline"], 2, "one session"),
                                 (["report", "9", "--out", str(tmp_path / "x.html")], 1,
                                  "no session 9")]:
        assert main([*argv, "--db", db]) == status
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0]
