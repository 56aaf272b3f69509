"""An SGLang run as the engine-neutral interval run: each batch line's printed figures
under the payload's names, requests from finished-request lines or generation POSTs,
failures from crashes, unasked deaths and a start that never finished, and a planned
shutdown that names none."""

from pathlib import Path

from adapters.logs.intervals.run import FailureKind, IntervalKind, RunEnding
from adapters.logs.sources import LogSource
from adapters.sglang.log.intervals import read_source, server_run
from adapters.sglang.log.reader import read_lines
from adapters.sglang.log.records import SglangRun

ARGS = ("[2026-07-10 03:00:00] server_args=ServerArgs(model_path='m', speculative_algorithm="
        "'EAGLE', speculative_num_steps=3, speculative_eagle_topk=1, "
        "speculative_num_draft_tokens=4, disable_radix_cache=True)")
DECODE = ("[2026-07-10 03:06:32 DP1 TP1 EP1] Decode batch, #running-req: 3, #full token: 3072, "
          "full token usage: 0.05, mamba num: 4, mamba usage: 0.33, accept len: 2.70, accept "
          "rate: 0.57, cuda graph: True, gen throughput (token/s): 47.00, #queue-req: 2")
PREFILL = ("[2025-02-20 04:26:58 TP0] Prefill batch. #new-seq: 1, #new-token: 21, "
           "#cached-token: 7, cache hit rate: 25.00%, token usage: 0.10, #running-req: 0, "
           "#queue-req: 0")


def _run(lines: list[str]) -> SglangRun:
    [run] = read_lines([(x + "\n").encode() for x in lines], "t.log").runs
    return run


def test_batch_figures_map_to_the_payload_as_printed() -> None:
    run = server_run(_run([ARGS, DECODE, PREFILL]))
    d, p = run.intervals
    assert (d.kind, d.clock, d.engine, d.running, d.waiting, d.kv_usage, d.mean_accept_len,
            d.draft_acceptance, d.generation_tps) == (
        IntervalKind.DECODE_BATCH, "2026-07-10 03:06:32", 1, 3, 2, 0.05, 2.70, 0.57, 47.0)
    assert d.extra == {"tokens": 3072, "mamba_num": 4, "mamba_usage": 0.33}
    assert d.speculative and d.prefix_hit_rate is None
    assert (p.kind, p.kv_usage, p.prefix_hit_rate, p.engine) == (
        IntervalKind.PREFILL_BATCH, 0.10, 0.25, None)
    assert p.extra == {"new_seqs": 1, "new_tokens": 21, "cached_tokens": 7}
    assert (run.method, run.num_spec_tokens, run.prefix_caching, run.hybrid) == (
        "EAGLE", 3, False, True)


def test_requests_are_generations_and_errors_not_health_checks() -> None:
    run = server_run(_run([
        '[2026-07-10 03:06:31] INFO:     1.2.3.4:5 - "GET /health HTTP/1.1" 200 OK',
        '[2026-07-10 03:06:32] INFO:     1.2.3.4:5 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        '[2026-07-10 03:06:33] INFO:     1.2.3.4:5 - "GET /v1/models HTTP/1.1" 404 Not Found']))
    assert [(r.line, r.method, r.status, r.failed) for r in run.requests] == [
        (2, "POST", 200, False), (3, "GET", 404, True)]
    finished = server_run(_run([
        '[2026-07-10 03:06:32] INFO:     1.2.3.4:5 - "POST /generate HTTP/1.1" 200 OK',
        "[2026-07-10 03:06:32] Finish: obj=GenerateReqInput(rid='a'), out={'meta_info': "
        "{'id': 'a', 'prompt_tokens': 9, 'completion_tokens': 4, 'cached_tokens': 2}}"]))
    [r] = finished.requests
    assert (r.request_id, r.prompt_tokens, r.generated_tokens, r.cached_tokens) == (
        "a", 9, 4, 2)


def test_a_crash_is_a_failure_with_its_last_lines_and_running_requests() -> None:
    run = server_run(_run([DECODE, "[2026-07-10 03:06:37] Scheduler hit an exception: "
                           "Traceback (most recent call last):", '  File "/s.py", line 9',
                           "TypeError: 'NoneType' object cannot be interpreted as an integer"]))
    [f] = run.failures
    assert (f.kind, f.line, f.running) == (FailureKind.SCHEDULER_CRASH, 2, 3)
    assert f.message == "TypeError: 'NoneType' object cannot be interpreted as an integer"
    assert f.last_lines == [DECODE, "Scheduler hit an exception", '  File "/s.py", line 9']
    assert run.ending is RunEnding.DIED
    cut = server_run(_run(["[2026-07-10 03:06:37 TP3] Scheduler hit an exception: "
                           "Traceback (most recent call last):"]))
    worker = server_run(_run(["[2026-07-10 03:06:37 TP1] TpModelWorkerClient hit an "
                              "exception: RuntimeError: CUDA error"]))
    assert [(f.kind, f.message) for f in worker.failures] == [
        (FailureKind.WORKER_DIED, "RuntimeError: CUDA error")]
    assert cut.failures[0].message == ("Scheduler on TP3 hit an exception whose last line is "
                                       "not in the log (0 traceback line(s) shown)")


def test_a_death_nobody_asked_for_fails_and_a_planned_shutdown_does_not() -> None:
    quit_line = ("[2026-06-16 11:34:16] SIGQUIT received. signum=None, frame=None. It usually "
                 "means one child failed.")
    [f] = server_run(_run([DECODE, quit_line])).failures
    assert (f.kind, f.line, f.running) == (FailureKind.WORKER_DIED, 2, 3)
    planned = server_run(_run([DECODE, "[2026-08-02 00:17:43] SIGTERM received. Draining",
                               quit_line]))
    assert planned.failures == [] and planned.ending is RunEnding.SHUTDOWN


def test_the_corpus_failed_start_and_complete_run(corpus: Path) -> None:
    failed = read_source(LogSource((corpus / "sostrowsk-dgx-spark-local-llm-gb10-laguna-nvfp4"
                                              "-dflash-v0.5.16-failed-start.log",)))
    [f] = failed.runs[0].failures
    assert f.kind is FailureKind.STARTUP_FAILED
    assert "Capture target prefill CUDA graph begin" in f.message
    complete = read_source(LogSource((corpus / "sostrowsk-dgx-spark-local-llm-gb10-laguna-"
                                                "int4-dflash-v0.5.16-complete.log",)))
    [run] = complete.runs
    assert (len(run.intervals), len(run.requests), run.failures) == (113, 95, [])
    assert sum(r.failed for r in run.requests) == 3
    assert (run.method, run.num_spec_tokens, run.prefix_caching, run.hybrid) == (
        "DFLASH", 15, True, True)


def test_a_crash_names_the_requests_received_and_not_finished() -> None:
    run = server_run(_run([
        "[2026-07-10 03:06:30] Receive: obj=GenerateReqInput(text='a', rid='r1', stream=True)",
        "[2026-07-10 03:06:30] Receive: obj=GenerateReqInput(text='b', rid='r2')",
        "[2026-07-10 03:06:31] Finish: obj=GenerateReqInput(rid='r1'), out={'meta_info': "
        "{'id': 'r1', 'prompt_tokens': 3, 'completion_tokens': 2}}",
        "[2026-07-10 03:06:32] Receive: obj=GenerateReqInput(rid='r3')",
        "[2026-07-10 03:06:37] Scheduler hit an exception: ValueError: bad grammar"]))
    [f] = run.failures
    assert f.requests == ["r2", "r3"] and f.message == "ValueError: bad grammar"
