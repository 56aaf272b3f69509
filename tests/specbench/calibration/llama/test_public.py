"""A published GPU log without -v, fitted request by request, against its author's other
setting: the DGX Spark's draft-mtp n-max 2 log (99sono/DockerBuildFiles, read from the
real-log corpus beside the checkout) predicts the n-max 3 log's requests, which its
author tabled at 16.83 and 14.90 tok/s, within the 3% this test states (recorded: +1.3%
and +1.1%, +0.7% for the third request); each request's counts are the log's own, and
the prediction says what it needs beyond its log."""

import pytest

from adapters.llama.calibration.taskfit import task_timings
from adapters.llama.log.sources import read_file
from specbench.calibration.llama.public import CORPUS, LOGS, run, text

N2, N3 = "n-max 2, p-min 0.85", "n-max 3, p-min 0.75"
BOUND = 0.03
"""The held-out error this test allows a fit of the n-max 2 log on the n-max 3 log's
requests (bench/results/calibration_llama/public.md records +1.3%, +1.1%, +0.7%)."""


@pytest.fixture(scope="module")
def doc() -> dict:  # type: ignore[type-arg]
    return run()


def test_each_request_is_counted_from_its_own_lines() -> None:
    n2 = task_timings(read_file(CORPUS / LOGS[N2]).only())
    first = n2[0]
    # eval time = 4519.01 ms / 84 tokens; draft acceptance 49 / 68; statistics #gen drafts
    # 34, dur(b,g,a) = 0.012, 636.235, 0.020 ms; stop processing at 14503 tokens
    assert (first.tokens, first.speculative, first.drafted, first.accepted) == (84, 34, 68, 49)
    assert first.eval_s == pytest.approx(4.51901) and first.drafting_s == pytest.approx(0.636235)
    assert (first.plain, first.verify, first.prompt_tokens) == (1, 3, 14420)
    assert len(n2) == 13
    n3 = task_timings(read_file(CORPUS / LOGS[N3]).only())
    assert [t.verify for t in n3] == [4, 4, 4]
    assert [round(t.tokens / t.eval_s, 2) for t in n3[:2]] == [16.83, 14.90]  # the author's


def test_the_n_max_2_log_predicts_the_n_max_3_requests_its_author_tabled(doc: dict) -> None:  # type: ignore[type-arg]
    fit = doc["fits"][N2]
    assert fit["predicts"] == N3
    predicted = [r["predicted_tok_s"] for r in fit["other"]]
    errors = [r["error"] for r in fit["other"]]
    assert all(abs(e) <= BOUND for e in errors)
    # the numbers themselves: a prediction forced to the measurement, or its error's sign
    # flipped, fails here (floats within a tolerance: CI runs on another CPU)
    assert predicted == pytest.approx([17.05269, 15.06469, 22.11686], rel=1e-5)
    assert errors == pytest.approx([0.0132, 0.0109, 0.0066], abs=5e-4)
    assert {w["beyond"] for w in fit["outside"]} == {"context", "graph"}


def test_the_three_request_log_predicts_the_other_way_within_a_sixth(doc: dict) -> None:  # type: ignore[type-arg]
    # 3 requests at 47-50k tokens of context: the context's cost is not separated from the
    # forward's, so the n-max 2 log's shallower requests come out slow, the more so the
    # shallower (recorded -13.5% at 14k tokens to +4.5% at 43k)
    errors = [r["error"] for r in doc["fits"][N3]["other"]]
    assert all(abs(e) < 1 / 6 for e in errors) and errors[0] < 0 < errors[-1]
    assert "Outside the fit's reach" in text(doc)
