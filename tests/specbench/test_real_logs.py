"""The real llama-server logs users published (../shared/real-logs/llama-server), read as a
user would: every one imports, the 2026-05-15 RTX 5090 log as three server runs with its KV
cache overflow named, each thread's incident named where its lines show it and nothing
named on the controls, the numbers the findings quote taken from the lines, and
docs/real-logs.md what a fresh reading gives."""

from pathlib import Path

import pytest

from specbench.real_logs import DOC, LogResult, corpus, page, read_corpus, verdict
from specbench.real_logs.threads import THREADS

RTX_0515 = "99sono-DockerBuildFiles-rtx5090-qwen36-27b-mtp-2026-05-15.log"
# What each log's verdict must be (the table docs/real-logs.md shows): the incidents whose
# lines the published pieces hold are named; two threads' incidents lie past their pieces.
VERDICTS = {name: ("clean" if t.incident is None and "performance report" not in t.says
                   else "a report: not judged" if t.incident is None
                   else "named" if t.visible else "not in the lines")
            for name, t in THREADS.items()}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, LogResult]:
    folder = corpus()
    assert folder.is_dir(), f"the real-log corpus is missing at {folder}"
    db = str(tmp_path_factory.mktemp("real") / "r.db")
    return {r.name: r for r in read_corpus(folder, db)}


def _finding(r: LogResult, kind: str) -> dict:  # type: ignore[type-arg]
    return next(f for f in r.findings if f["kind"] == kind)


def test_every_log_imports_with_its_lines_known(results: dict[str, LogResult]) -> None:
    assert set(results) == set(THREADS) and set(THREADS) <= {
        p.name for p in corpus().iterdir()}
    for r in results.values():
        assert r.error is None and r.sessions, r.name
        # One line in the DGX dumps is the user's own script's, not llama-server's.
        assert r.unknown <= 1, (r.name, r.unknown)


def test_three_server_runs_and_the_overflow_of_05_15(results: dict[str, LogResult]) -> None:
    r = results[RTX_0515]
    assert r.runs == len(r.sessions) == 3
    overflow = _finding(r, "kv_cache_exhausted")
    n = overflow["numbers"]
    assert overflow["severity"] == "error" and n["failed"] == [7784, 7728]
    assert n["retries"] == 51 and n["exceeded"] and n["n_ctx"] == 131072 and n["kv_unified"]
    # The last prompt batch each slot began before the overflow (lines 4166 and 4131).
    assert {(f["task"], f["tokens"]) for f in n["in_flight"]} == {(7784, 93709),
                                                                  (7728, 37133)}
    causes = {c["cause"] for f in r.findings if f["kind"] == "http_errors"
              for c in f["numbers"]["causes"]}
    assert "Context size has been exceeded." in causes
    assert "Assistant response prefill is incompatible with enable_thinking." in causes


def test_each_thread_gets_its_verdict(results: dict[str, LogResult]) -> None:
    for name, want in VERDICTS.items():
        got = verdict(THREADS[name], results[name])
        assert got == want, (name, got, results[name].findings)


def test_the_re_prefills_are_the_lines_own_numbers(results: dict[str, LogResult]) -> None:
    def reprefill(name: str) -> int:
        return sum(f["numbers"]["reprefill_tokens"] for f in results[name].findings
                   if f["kind"] == "history_reprefill")
    # `n_past = 583, slot.prompt.tokens.size() = 1128`, then a full re-processing; and
    # n_past 848 for the next: both prefixes computed again.
    assert reprefill("ggml-org-llama.cpp-19408-qwen3codernext-rocm-reprefill.log") == 583 + 848
    # n_past 12808 of 12809, restored at 3830 (the whole history matched: the server's).
    older = _finding(results["ggml-org-llama.cpp-22929-older-ckpt-restored.log"],
                     "history_reprefill")
    assert older["numbers"]["reprefill_tokens"] == 12808 - 3830
    assert older["numbers"]["whole_history_matched"] == 1
    # `checking checkpoint ... against 26946` (n_swa 0: the prefix is 26947), restored
    # at n_past 23286.
    assert reprefill("ggml-org-llama.cpp-27527-draftmtp-ckpt-inconsistent.log") == \
        26947 - 23286


def test_no_re_prefill_exceeds_its_prompt(results: dict[str, LogResult]) -> None:
    for r in results.values():
        for f in r.findings:
            if f["kind"] != "history_reprefill":
                continue
            for turn in f["numbers"]["per_turn"]:
                assert turn["reprefill"] <= turn["kept"], (r.name, turn)
                assert turn["prompt"] is None or turn["reprefill"] <= turn["prompt"]


def test_the_page_is_a_fresh_reading(results: dict[str, LogResult]) -> None:
    fresh = page([results[n] for n in sorted(results)])
    assert Path(DOC).read_text() == fresh, "run: specledger bench real-logs --record"


def test_recorded_findings_keep_no_line_of_the_published_log() -> None:
    from specbench.real_logs import recorded
    f = {"kind": "server_crash", "numbers": {"line": 5, "last_lines": ["x | y"]},
         "explanation": "The engine died at log line 5. Its last lines before: x | y"}
    kept = recorded(f)
    assert kept["explanation"] == "The engine died at log line 5. Its last lines: in the log."
    assert kept["numbers"] == {"line": 5}
