"""The conversation suite in quick mode: legacy re-prefills the history on the sim,
truncate never does, the files and the recorded sessions are there."""

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from engine.shipped import ROOT as SHIPPED_ROOT
from eventlog import list_sessions, open_db, scan_events
from fsm.event import Event
from fsm.states import Trigger
from fsm.turn_metrics import TurnMetrics
from specbench import BenchOptions, SuiteResult, run_suite
from specledger.api import turn_table

MODELS = SHIPPED_ROOT


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BenchOptions,
                                                                      SuiteResult]]:
    tmp = tmp_path_factory.mktemp("conversation")
    opts = BenchOptions(out=tmp, db=str(tmp / "b.db"), quick=True,
                        model=str(MODELS / "target"), draft_model=str(MODELS / "draft"))
    threads = torch.get_num_threads()  # the suite sets torch's thread count for itself
    yield opts, run_suite("conversation", opts)
    torch.set_num_threads(threads)


def _runs(opts: BenchOptions) -> dict[tuple[str, str], dict[str, Any]]:
    doc = json.loads((opts.out / "conversation" / "results.json").read_text())
    return {(r["backend"], r["eog_policy"]): r for r in doc["runs"]}


def test_truncate_never_reprefills_history(suite: tuple[BenchOptions, SuiteResult]) -> None:
    opts, result = suite
    for backend in ("sim", "torch"):
        for row in _runs(opts)[(backend, "truncate")]["turns"]:
            assert row["reprefill_tokens"] == 0 and row["repeated_prefill_s"] == 0.0
            assert row["f_keep"] == 1.0
    goal = next(g for g in result.goals if g.name.startswith("zero re-prefill"))
    assert goal.met and goal.measured.startswith("0 tokens")


def test_legacy_sim_reprefills_the_previous_answer(
        suite: tuple[BenchOptions, SuiteResult]) -> None:
    opts, _ = suite
    runs = _runs(opts)
    legacy, truncate = runs[("sim", "legacy")]["turns"], runs[("sim", "truncate")]["turns"]
    assert len(legacy) == 3
    reprefilled = 0
    for before, row, fixed in zip(legacy, legacy[1:], truncate[1:], strict=False):
        if row["reprefill_tokens"] == 0:
            # nothing behind EOG that the state consumed (a lone stray is committed, not
            # yet consumed, so the live state is still reusable)
            assert row["ctx_restores"] == 0
            continue
        # Strays behind EOG broke the prefix: the state falls back to the checkpoint
        # before the previous answer, which is prefilled again: the answer with its EOG
        # (generated_tokens) and the 3 tokens of the next header (#28049's answer + 4).
        reprefilled += 1
        assert before["stray_tokens"] > 0 and row["f_keep"] < 1.0
        assert row["reprefill_tokens"] == before["generated_tokens"] + 3
        assert row["ctx_restores"] == 1 and row["repeated_prefill_s"] > 0.0
        assert row["conversation_s"] > fixed["conversation_s"]
    assert reprefilled >= 1
    totals = runs[("sim", "legacy")]["totals"]
    assert totals["reprefill_tokens"] == sum(r["reprefill_tokens"] for r in legacy)


GENERATION = frozenset({Trigger.BEGIN, Trigger.DRAFT, Trigger.VERIFY, Trigger.RETRY,
                        Trigger.DECODE, Trigger.ACCEPT, Trigger.REJECT, Trigger.COMMIT})
"""A round's steps that produce tokens; its rollback steps are RESTORE and REPLAY."""
REPAIR = frozenset({Trigger.RESTORE, Trigger.REPLAY, Trigger.CTX_RESTORE})
PARTS = ("generation_s", "state_repair_s", "repeated_prefill_s")


def _cost_from_events(evs: list[Event]) -> dict[str, float]:
    """One turn's conversation cost rebuilt from its recorded steps' durations: generation
    (the rounds' steps but the rollbacks), state repair (rollbacks and the turn-boundary
    restore) and repeated prefill (each prefill chunk's share of the tokens the restore
    asked to process again), and the time the turn spans."""
    again = sum(e.payload["reprefill"] for e in evs if e.trigger is Trigger.CTX_RESTORE)
    chunks = [e for e in evs if e.trigger is Trigger.PREFILL]
    start = chunks[0].payload["position"] - chunks[0].payload["tokens"]
    repeated = 0.0
    for e in chunks:
        end = e.payload["position"]
        first = end - e.payload["tokens"]
        overlap = max(0, min(end, start + again) - first)
        repeated += e.duration * overlap / (end - first)
    return {"generation_s": sum(e.duration for e in evs if e.trigger in GENERATION),
            "state_repair_s": sum(e.duration for e in evs if e.trigger in REPAIR),
            "repeated_prefill_s": repeated, "span_s": evs[-1].t - evs[0].t}


def test_cost_is_the_sum_of_its_parts(suite: tuple[BenchOptions, SuiteResult]) -> None:
    """Each part of a turn's cost is what its recorded steps took: exactly on the sim's
    clock; on torch's wall clock at least that (the engine's spans also hold the Python
    between the steps) and the whole at most the turn's span."""
    opts, _ = suite
    engine = open_db(opts.db, create=False)
    repaired = 0
    for run in _runs(opts).values():
        assert run["wall_s"] > 0 and run["session"] > 0
        evs = list(scan_events(engine, run["session"]))
        for row in run["turns"]:
            got = _cost_from_events([e for e in evs if e.turn == row["turn"]])
            where = (run["backend"], run["eog_policy"], row["turn"])
            if run["backend"] == "sim":
                for part in PARTS:
                    assert math.isclose(row[part], got[part], rel_tol=1e-9,
                                        abs_tol=1e-12), (*where, part)
                assert math.isclose(row["conversation_s"], sum(got[p] for p in PARTS),
                                    rel_tol=1e-9), where
            else:
                for part in PARTS:
                    assert row[part] >= got[part] - 1e-9, (*where, part)
            assert row["generation_s"] > 0 and row["conversation_s"] <= got["span_s"], where
            repaired += got["repeated_prefill_s"] > 0
    assert repaired >= 1  # a turn-boundary restore and its re-prefill were rebuilt


def test_files_and_goals(suite: tuple[BenchOptions, SuiteResult]) -> None:
    opts, result = suite
    folder = opts.out / "conversation"
    for stem in ("reprefill_per_turn", "cost_per_turn"):
        for ext in ("png", "svg"):
            path = folder / f"{stem}.{ext}"
            assert path in result.files and path.stat().st_size > 0
    doc = json.loads((folder / "results.json").read_text())
    assert doc["suite"] == "conversation" and doc["quick"] is True
    assert len(doc["runs"]) == 4 and doc["sessions"] == result.sessions
    assert "### sim, eog=legacy" in (folder / "results.md").read_text()
    goal = next(g for g in result.goals if g.name.startswith("20-turn"))
    assert goal.target == "< 10 s" and goal.measured.endswith("(quick run: not to quote)")


def test_sessions_are_in_the_log(suite: tuple[BenchOptions, SuiteResult]) -> None:
    opts, result = suite
    engine = open_db(opts.db, create=False)
    assert {s.id for s in list_sessions(engine)} >= set(result.sessions)
    for run in _runs(opts).values():
        recorded = turn_table(engine, run["session"])
        assert [m.reprefill_tokens for m in recorded] == [
            r["reprefill_tokens"] for r in run["turns"]]
        assert [m.reprefill_s for m in recorded] == [r["reprefill_s"] for r in run["turns"]]


def test_older_metrics_without_cost_fields_still_load() -> None:
    old = {"turn": 2, "decode_s": 3.0, "rollback_s": 1.0, "decode_tps": 9.0}
    m = TurnMetrics.from_dict(old)
    assert (m.repair_s, m.reprefill_s) == (0.0, 0.0)
    assert (m.generation_s, m.state_repair_s, m.conversation_s) == (2.0, 1.0, 3.0)
