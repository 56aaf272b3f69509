"""The drafters suite in quick mode: real runs on the shipped models and the sim, lossless
against plain decode, the sim's speedup rising with acceptance, the plot and the sessions."""

import json
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from engine.shipped import ROOT as SHIPPED_ROOT
from eventlog import list_sessions, open_db, scan_events
from eventlog.diff import diff_tokens
from specbench import BenchOptions, SuiteResult, run_suite
from specbench.drafters import QUICK_DRAFTERS
from specbench.drafters.runs import PLAIN

MODELS = SHIPPED_ROOT


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BenchOptions,
                                                                      SuiteResult,
                                                                      dict[str, Any]]]:
    """One quick run of the suite, shared by the tests below."""
    tmp = tmp_path_factory.mktemp("drafters")
    opts = BenchOptions(out=tmp, db=str(tmp / "b.db"), quick=True,
                        model=str(MODELS / "target"), draft_model=str(MODELS / "draft"))
    threads = torch.get_num_threads()  # the suite sets torch's thread count for itself
    result = run_suite("drafters", opts)
    torch.set_num_threads(threads)
    yield opts, result, json.loads((tmp / "drafters" / "results.json").read_text())


def test_every_drafter_answers_as_plain_decode(
        suite: tuple[BenchOptions, SuiteResult, dict[str, Any]]) -> None:
    opts, _, data = suite
    runs = data["torch"]["runs"]
    assert {r["drafter"] for r in runs} == {PLAIN, *QUICK_DRAFTERS}
    # every recorded run commits plain decode's tokens, turn by turn (the token diff)
    log = open_db(opts.db, create=False)
    for backend in ("torch", "sim"):
        recorded = data[backend]["runs"]
        plain_session = next(r["session"] for r in recorded if r["drafter"] == PLAIN)
        for r in recorded:
            if r["session"] != plain_session:
                same = diff_tokens(scan_events(log, plain_session),
                                   scan_events(log, r["session"]))
                assert same.identical, (backend, r["drafter"], same.tokens)
                assert same.tokens is not None and same.tokens.answer_tokens > 0
    rows = {r["drafter"]: r for r in data["torch"]["summary"]}
    assert all(r["lossless"] for r in rows.values()) and data["lossless"]["torch"] is True
    plain = rows[PLAIN]
    assert plain["generated"] > 0 and plain["drafted"] == 0 and plain["speedup"] == 1.0
    for name in QUICK_DRAFTERS:
        r = rows[name]
        assert r["generated"] == plain["generated"]
        assert r["drafted"] > 0 and 0.0 <= r["acceptance"] <= 1.0
        assert r["speedup"] > 0 and r["tok_s"] > 0
        assert 0.0 <= r["draft_share"] < 1.0
    assert rows["mtp"]["draft_share"] > 0  # the MTP head runs a forward per draft


def test_sim_speedup_grows_with_acceptance(
        suite: tuple[BenchOptions, SuiteResult, dict[str, Any]]) -> None:
    _, _, data = suite
    assert data["lossless"]["sim"] is True
    curves: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in data["sim"]["summary"]:
        if r["drafter"] != PLAIN:
            curves[r["draft"]].append(r)
    assert set(curves) == {4, 8}
    for rows in curves.values():
        rows.sort(key=lambda r: r["setting"])
        assert len(rows) == 2
        assert [r["acceptance"] for r in rows] == sorted(r["acceptance"] for r in rows)
        speedups = [r["speedup"] for r in rows]
        assert speedups == sorted(speedups) and speedups[0] < speedups[-1]
        assert all(s > 1.0 for s in speedups)  # drafts are free on the sim


def test_plot_tables_and_sessions(
        suite: tuple[BenchOptions, SuiteResult, dict[str, Any]]) -> None:
    opts, result, data = suite
    folder = opts.out / "drafters"
    for ext in ("png", "svg"):
        path = folder / f"acceptance_vs_speedup.{ext}"
        assert path in result.files and path.stat().st_size > 0
    md = (folder / "results.md").read_text()
    assert "| drafter | acceptance |" in md and "| per-token acceptance |" in md
    assert data["suite"] == "drafters" and data["goals"] == []
    recorded = {s.id for s in list_sessions(open_db(opts.db, create=False))}
    runs = [*data["torch"]["runs"], *data["sim"]["runs"]]
    assert recorded == set(result.sessions) == {r["session"] for r in runs}
    assert len(result.sessions) == len(runs) == 3 + 5
