"""The batching suite: a quick run from an empty directory records every variant at every
slot count on the sim and the shipped model, reads the shared forwards back from their
events, and says where speculation stops paying."""

import json
from pathlib import Path
from typing import Any

import pytest

from eventlog import list_sessions, open_db, scan_events
from eventlog.diff import diff_tokens
from specbench.batching import sim_grid, torch_grid
from specbench.batching.points import PLAIN, Point, cpu, stops_paying
from specbench.record import DEFAULT_OUT
from specbench.strategies.points import CORRECT
from specledger.cli.main import main


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """`specledger bench batching --quick` in an empty directory, its default output."""
    tmp = tmp_path_factory.mktemp("batching")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp)
        assert main(["bench", "batching", "--quick"]) == 0
    out = tmp / DEFAULT_OUT
    return out, json.loads((out / "batching" / "results.json").read_text())


def _at(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str, int], dict[str, Any]]:
    return {(r["schedule"], r["drafter"], r["variant"], r["slots"]): r for r in rows}


def test_every_point_ran_and_batched_ones_shared_forwards(
        suite: tuple[Path, dict[str, Any]]) -> None:
    out, data = suite
    log = open_db(str(out / "bench.db"), create=False)
    for backend, grid in (("sim", sim_grid(True)), ("torch", torch_grid(True))):
        at = _at(data[backend])
        expected = {(s, "none", PLAIN, n) for s in ("batched", "sequential")
                    for n in grid.slots}
        expected |= {("batched", d, v, n) for d in grid.drafters for v in CORRECT
                     for n in grid.slots}
        assert set(at) == expected
        for (schedule, _, _, n), r in at.items():
            assert r["tokens"] > 0 and r["clock_s"] > 0 and r["tok_s"] > 0 < r["cpu_s"]
            if schedule == "sequential":
                assert r["forwards"] == 0  # no batch fields: nothing shared
            else:
                assert r["forwards"] > 0 and r["mean_slots"] == pytest.approx(n)
        # greedy speculation is lossless: every variant commits plain decoding's answers,
        # token for token, in every slot and turn (the token diff of the two sessions)
        for n in grid.slots:
            plain = at[("sequential", "none", PLAIN, n)]
            for key, r in at.items():
                if key[3] == n and r is not plain:
                    same = diff_tokens(scan_events(log, plain["session"]),
                                       scan_events(log, r["session"]))
                    assert same.identical, (backend, key, same.tokens)
                    assert same.tokens is not None and same.tokens.turns > 0
                    assert same.tokens.answer_tokens == r["tokens"] == plain["tokens"]
        assert set(data["stops_paying"][backend]) == set(grid.drafters)
        assert all(set(p) == set(CORRECT) for p in data["stops_paying"][backend].values())
    recorded = {s.id for s in list_sessions(log)}
    assert recorded == set(data["sessions"])
    assert len(recorded) == len(data["sim"]) + len(data["torch"])
    for name in ("results.md", "throughput.png", "throughput.svg"):
        assert (out / "batching" / name).stat().st_size > 0
    tables = len(sim_grid(True).drafters) + 2 * len(torch_grid(True).drafters)  # wall, CPU
    assert (out / "batching" / "results.md").read_text().count("stops paying at") == tables


def test_sim_batching_pays_for_plain_decoding(suite: tuple[Path, dict[str, Any]]) -> None:
    _, data = suite
    at = _at(data["sim"])
    # one slot: a batch of one is the sequential forward, to the bit
    one, two = (("none", PLAIN, n) for n in (1, 2))
    assert at[("batched", *one)]["clock_s"] == at[("sequential", *one)]["clock_s"]
    # two slots: one weight read serves both, so the aggregate nearly doubles
    assert at[("batched", *two)]["tok_s"] > 1.5 * at[("sequential", *two)]["tok_s"]


def _pt(variant: str, slots: int, tok_s: float) -> Point:
    return Point("sim", "p", "batched", "none" if variant == PLAIN else "synthetic", variant,
                 slots, 0, int(tok_s * 10), 10.0, 1.0, 1, float(slots), 1.0, 0.0)


def test_stops_paying_is_the_first_slot_count_below_plain() -> None:
    points = [_pt(PLAIN, n, 100.0 * n) for n in (1, 2, 4, 8)]
    points += [_pt("checkpoint", n, t) for n, t in ((1, 200), (2, 150), (4, 500), (8, 700))]
    points += [_pt("per_token", n, 300.0 * n) for n in (1, 2, 4, 8)]
    assert stops_paying(points) == {"checkpoint": "2", "per_token": "> 8"}
    assert stops_paying(points, cpu) == {"checkpoint": "2", "per_token": "> 8"}
