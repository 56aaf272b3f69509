"""The llama suite in quick mode: both engines on the same prompt, llama.cpp's answers
equal to ours, the table, the plot, the goal and the recorded sessions."""

import json
from pathlib import Path

import pytest
import torch

from adapters.llama.server.paths import require_converter, require_server
from eventlog import list_sessions, open_db
from specbench import SUITES, BenchOptions, run_suite
from specbench.llama import DRAFTERS, QUICK_DRAFTERS
from specbench.llama.runs import llama_name
from tests.adapters.llama.conftest import require_llama


def test_quick_run(tmp_path: Path) -> None:
    require_llama(require_server)
    require_llama(require_converter)
    assert "llama" in SUITES
    opts = BenchOptions(out=tmp_path, db=str(tmp_path / "b.db"), quick=True)
    threads = torch.get_num_threads()  # the suite sets torch's thread count for itself
    result = run_suite("llama", opts)
    torch.set_num_threads(threads)
    data = json.loads((tmp_path / "llama" / "results.json").read_text())
    assert data["same_answers"] is True and data["quick"] is True
    rows = {r["drafter"]: r for r in data["rows"]}
    assert tuple(rows) == QUICK_DRAFTERS
    for name, r in rows.items():
        assert r["llama_tok_s"] > 0 and r["ours_tok_s"] > 0
        assert r["llama_lossless"] and r["ours_lossless"]
        if name != "none":
            assert 0 < r["llama_acceptance"] <= 1 and 0 <= r["ours_acceptance"] <= 1
    assert rows["mtp"]["llama_name"] == "draft-mtp"
    goal, *speed = result.goals
    assert goal.met and goal.command == "specledger bench llama"
    # The speed goals are measured (quick numbers are not to quote, so not judged here).
    assert [g.target for g in speed] == [">= 0.25x", ">= 3.0x"]
    assert data["transformers"]["best"]["tok_s"] > 0
    assert "transformers' `generate`" in result.table
    assert "| plain decode |" in result.table and "mtp / draft-mtp" in result.table
    for suffix in ("png", "svg"):
        assert (tmp_path / "llama" / f"llama_vs_ours.{suffix}").stat().st_size > 0
    recorded = {s.id for s in list_sessions(open_db(opts.db, create=False))}
    assert set(result.sessions) == recorded and len(recorded) == len(QUICK_DRAFTERS)


def test_llama_names() -> None:
    assert [llama_name(d) for d in DRAFTERS] == ["none", "draft-mtp", "ngram-simple",
                                                "ngram-map-k", "ngram-mod", "draft-simple"]
    with pytest.raises(ValueError):
        llama_name("synthetic")  # no llama.cpp counterpart
