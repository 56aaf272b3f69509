"""The strategies suite in quick mode: real runs on the sim and the shipped model, read
back from their recorded events."""

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from eventlog import list_sessions, open_db, scan_events
from eventlog.diff import diff_tokens
from specbench import BenchOptions, SuiteResult, run_suite
from specbench.strategies import SIM_PROFILES
from specbench.strategies.points import CORRECT


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> tuple[SuiteResult, dict[str, Any],
                                                             BenchOptions]:
    """One quick run of the suite, shared by the tests below."""
    tmp = tmp_path_factory.mktemp("strategies")
    opts = BenchOptions(out=tmp, db=str(tmp / "b.db"), quick=True)
    result = run_suite("strategies", opts)
    data = json.loads((tmp / "strategies" / "results.json").read_text())
    return result, data, opts


def _by_point(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, dict[str, Any]]]:
    out: dict[tuple[Any, ...], dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in rows:
        out[(r["profile"], r["acceptance"], r["draft"], r["repeat"])][r["strategy"]] = r
    return out


def test_none_never_rolls_back_on_the_sim(suite: tuple[SuiteResult, dict[str, Any],
                                                         BenchOptions]) -> None:
    _, data, _ = suite
    rows = [r for r in data["sim"] if r["strategy"] == "none"]
    assert rows
    for r in rows:
        assert r["phase_s"].get("rollback", 0.0) == 0.0
        assert r["rollback_s"] == 0.0
        assert r["violations"] > 0  # and it is wrong: the audit says so


def test_cheap_strategies_roll_back_for_less(suite: tuple[SuiteResult, dict[str, Any],
                                                          BenchOptions]) -> None:
    _, data, _ = suite
    points = _by_point(data["sim"])
    assert {p[0] for p in points} == set(SIM_PROFILES.values())
    for by in points.values():
        per_token = {s: r["phase_s"].get("rollback", 0.0) / r["generated"]
                     for s, r in by.items()}
        assert per_token["checkpoint"] > 0
        assert per_token["per_token"] < per_token["checkpoint"]
        assert per_token["input_replay"] < per_token["checkpoint"]


def test_torch_is_lossless_across_strategies(suite: tuple[SuiteResult, dict[str, Any],
                                                          BenchOptions]) -> None:
    _, data, opts = suite
    points = _by_point(data["torch"])
    assert points
    log = open_db(opts.db, create=False)
    for by in points.values():
        assert set(by) == {"checkpoint", "per_token", "input_replay", "none"}
        assert by["checkpoint"]["generated"] > 0
        # every correct strategy commits the same tokens, turn by turn (the token diff)
        for strategy in CORRECT:
            same = diff_tokens(scan_events(log, by["checkpoint"]["session"]),
                               scan_events(log, by[strategy]["session"]))
            assert same.identical, (strategy, same.tokens)
            assert same.tokens is not None
            assert same.tokens.answer_tokens == by[strategy]["generated"]
        for r in by.values():
            assert r["ms_per_token"] > 0
    assert data["lossless"][opts.model] is True


def test_memory_ordering(suite: tuple[SuiteResult, dict[str, Any], BenchOptions]) -> None:
    _, data, _ = suite
    mem = data["memory"]["sim 27b"]
    for k, ckpt in mem["checkpoint"].items():
        if int(k) >= 2:
            assert mem["per_token"][k] > ckpt
        assert mem["input_replay"][k] < ckpt
        assert mem["none"][k] == 0
    real = data["memory"]["torch (measured)"]
    assert all(real["per_token"][k] > v for k, v in real["checkpoint"].items())


def test_files_goal_and_sessions(suite: tuple[SuiteResult, dict[str, Any],
                                              BenchOptions]) -> None:
    result, data, opts = suite
    folder = opts.out / "strategies"
    for stem in ("sim_cost_27b", "sim_cost_80b", "torch_speedup", "rollback_share", "memory"):
        for ext in (".png", ".svg"):
            path: Path = folder / f"{stem}{ext}"
            assert path in result.files
            assert path.stat().st_size > 0
    assert (folder / "results.md").read_text().count("| acceptance |") == 3
    (goal,) = data["goals"]
    assert goal["command"] == "specledger bench strategies"
    assert "torch CPU" in goal["measured"] and "quick run" in goal["measured"]
    recorded = {s.id for s in list_sessions(open_db(opts.db, create=False))}
    assert recorded == set(result.sessions) == set(data["sessions"])
    assert len(result.sessions) == len(data["sim"]) + len(data["torch"])
