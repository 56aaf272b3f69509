"""One SGLang server run read line by line, on synthetic lines of each kind: batch lines,
HTTP answers, finished requests, start-up settings, crashes with their tracebacks, and the
lifecycle lines that tell a planned shutdown from a death."""

import pytest

from adapters.sglang.log.reader import SglangLogError, read_lines
from adapters.sglang.log.records import LifeKind, RunEnd, SglangRun

TS = "[2026-07-10 03:06:3{} TP0] "
START = [
    "[2026-07-10 03:00:00] server_args=ServerArgs(model_path='m', speculative_algorithm="
    "'NEXTN', speculative_num_steps=3, speculative_num_draft_tokens=4, disable_radix_cache="
    "False)",
    "[2026-07-10 03:00:01] Mamba Cache is allocated. max_mamba_cache_size: 64",
    "[2026-07-10 03:00:02] max_total_num_tokens=185897, chunked_prefill_size=8192",
    "[2026-07-10 03:00:03] INFO:     Started server process [4242]",
    "[2026-07-10 03:00:04] The server is fired up and ready to roll!",
]
DECODE = ("Decode batch, #running-req: 1, #full token: 3072, full token usage: 0.05, mamba "
          "num: 4, mamba usage: 0.33, accept len: 2.70, accept rate: 0.57, cuda graph: True, "
          "gen throughput (token/s): 47.00, #queue-req: 0")
CRASH = [
    "[2026-07-10 03:06:37 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sgl/scheduler.py", line 4062, in run_scheduler_process',
    "    scheduler.run_event_loop()",
    "TypeError: 'NoneType' object cannot be interpreted as an integer",
]


def _read(lines: list[str]) -> list[SglangRun]:
    return read_lines([(x + "\n").encode() for x in lines], "t.log").runs


def test_a_run_reads_its_settings_batches_requests_and_readiness() -> None:
    [run] = _read([*START, TS.format(1) + DECODE,
                   '[2026-07-10 03:06:31] INFO:     10.0.0.1:5 - "POST /generate HTTP/1.1" 200 OK',
                   '[2026-07-10 03:06:32] INFO:     10.0.0.1:6 - "GET /health HTTP/1.1" 503 '
                   "Service Unavailable"])
    s = run.server
    assert (s.model, s.speculative_algorithm, s.num_draft_tokens, s.max_total_tokens) == (
        "m", "NEXTN", 4, 185897)
    assert s.hybrid == {"ssm"} and run.pid == 4242 and run.ready
    [b] = run.batches
    assert (b.line, b.clock, b.rank, b.accept_len, b.mamba_usage) == (
        6, "2026-07-10 03:06:31", "TP0", 2.70, 0.33)
    assert [(h.method, h.path, h.status, h.reason) for h in run.http] == [
        ("POST", "/generate", 200, "OK"), ("GET", "/health", 503, "Service Unavailable")]
    assert (run.parsed, run.skipped, run.unknown) == (8, 0, 0)
    assert run.ending is RunEnd.LOG_ENDS


def test_a_crash_keeps_its_traceback_exception_and_the_lines_before_it() -> None:
    [run] = _read([TS.format(2) + DECODE, *CRASH, "[2026-07-10 03:06:38] SIGQUIT received. "
                   "signum=None, frame=None. It usually means one child failed."])
    [c] = run.crashes
    assert (c.line, c.who, c.rank, c.exception) == (
        2, "Scheduler", "TP0", "TypeError: 'NoneType' object cannot be interpreted as an "
        "integer")
    assert c.traceback == CRASH[1:3] and c.last_lines == [TS.format(2) + DECODE]
    assert run.ending is RunEnd.CRASHED and run.unknown == 0


def test_a_planned_shutdown_is_no_death_though_it_prints_sigquit() -> None:
    [run] = _read([*START,
                   "[2026-08-02 00:17:43] SIGTERM received. signum=None frame=None. Draining",
                   "[2026-08-02 00:17:43] Subprocess detokenizer (pid=31379) crashed with exit "
                   "code -15. Triggering SIGQUIT for cleanup...",
                   "[2026-08-02 00:17:43] SIGQUIT received. signum=None, frame=None. It usually "
                   "means one child failed.",
                   "[2026-08-02 00:17:49] kill_process_tree called: parent_pid=31319"])
    assert [e.kind for e in run.life] == [LifeKind.READY, LifeKind.SIGTERM,
                                          LifeKind.CHILD_EXIT, LifeKind.SIGQUIT,
                                          LifeKind.KILL_TREE]
    assert run.ending is RunEnd.SHUTDOWN
    [died] = _read(["[2026-08-02 00:17:43] SIGQUIT received. signum=None, frame=None."])
    assert died.ending is RunEnd.DIED


def test_finished_request_lines_give_their_counts() -> None:
    [run] = _read([
        "[2026-07-10 03:07:00] Finish: obj=GenerateReqInput(text='hi', rid='r1'), out={'text': "
        "'yo', 'meta_info': {'id': 'r1', 'finish_reason': {'type': 'length', 'length': 8}, "
        "'prompt_tokens': 28, 'completion_tokens': 8, 'cached_tokens': 3, 'spec_verify_ct': 3, "
        "'e2e_latency': 0.25}}",
        "[2026-07-10 03:07:01] Finish: obj=GenerateReqInput(rid='r2'), out={'text': ''}"])
    first, second = run.finished
    assert (first.rid, first.prompt_tokens, first.completion_tokens, first.cached_tokens,
            first.spec_verify_ct, first.finish_reason, first.e2e_latency) == (
        "r1", 28, 8, 3, 3, "length", 0.25)
    assert second.rid == "r2" and second.prompt_tokens is None and second.finish_reason is None


def test_a_second_start_begins_a_new_run_and_ends_the_first_as_died() -> None:
    runs = _read([*START, TS.format(1) + DECODE, *START])
    assert [(r.first_line, r.last_line, r.ending) for r in runs] == [
        (1, 6, RunEnd.DIED), (7, 11, RunEnd.LOG_ENDS)]


def test_noise_is_skipped_and_a_stranger_line_is_unknown() -> None:
    [run] = _read([
        "START 23:37:33 INT4",
        "/venv/lib/python3.12/site-packages/sglang/launch_server.py:56: UserWarning: use serve",
        "  warnings.warn(",
        "  0%|          | 0/58 [00:00<?, ?it/s]",
        "[transformers] Unrecognized keys in `rope_parameters`",
        "[2026-08-01 23:37:49] Init torch distributed begin.",
        "",
    ])
    assert (run.parsed, run.skipped, run.unknown) == (0, 6, 1)
    assert run.unknown_shapes == {"START N:N:N INTN": 1}


def test_a_progress_bar_glued_to_a_logger_line_does_not_hide_it() -> None:
    [run] = _read(["Multi-thread loading shards:   7% Completed | 1/15 [00:29<06:47, "
                   "29.12s/it][2026-08-01 23:38:33] max_total_num_tokens=100"])
    assert run.server.max_total_tokens == 100 and run.parsed == 1


def test_an_indented_paste_and_blank_lines_keep_the_crash_whole() -> None:
    [run] = _read(["[2025-02-20 04:26:58 TP0] Prefill batch. #new-seq: 1, #new-token: 21, "
                   "#cached-token: 0, cache hit rate: 0.00%, token usage: 0.00, "
                   "#running-req: 0, #queue-req: 0", "",
                   "  [2025-02-20 04:27:00 TP5] Scheduler hit an exception: Traceback (most "
                   "recent call last):", "",
                   '    File "/x/scheduler.py", line 1827, in run_scheduler_process'])
    [c] = run.crashes
    assert c.rank == "TP5" and c.traceback == ['    File "/x/scheduler.py", line 1827, in '
                                               "run_scheduler_process"]
    assert c.exception is None and run.unknown == 0


def test_what_is_no_sglang_log_is_refused_in_one_line() -> None:
    with pytest.raises(SglangLogError, match="none of its 2 line"):
        read_lines([b"hello\n", b"world\n"], "x.txt")
    with pytest.raises(SglangLogError, match="empty"):
        read_lines([], "x.txt")
    with pytest.raises(SglangLogError, match="binary"):
        read_lines([b"\x00\x01\n"], "x.bin")


def test_an_exception_on_its_header_line_is_the_crash_message() -> None:
    [run] = _read(["[2025-09-13 19:05:03 TP1] TpModelWorkerClient hit an exception: "
                   "RuntimeError: CUDA error: an illegal memory access was encountered"])
    [c] = run.crashes
    assert (c.who, c.rank, c.exception, c.traceback) == (
        "TpModelWorkerClient", "TP1",
        "RuntimeError: CUDA error: an illegal memory access was encountered", [])


def test_a_redrawn_progress_bar_reads_as_the_terminal_shows_it() -> None:
    [run] = _read(["\r  0%|   | 0/58 [00:00<?, ?it/s]\rCapturing (bs=8):   2%|   | 1/58 "
                   "[01:54<1:48:53, 114.62s/it][2026-08-01 23:43:38] max_total_num_tokens=7"])
    assert run.server.max_total_tokens == 7
    assert run.last_lines == ["[2026-08-01 23:43:38] max_total_num_tokens=7"]
    [bar] = _read(["[2026-08-01 21:51:16] Capture target prefill CUDA graph begin.",
                   "\r  0%|   | 0/58 [00:00<?, ?it/s]\rCapturing:   0%|   | 0/58 "
                   "[00:00<?, ?it/s]/x/resource_tracker.py:279: UserWarning: resource_tracker: "
                   "There appear to be 1 leaked semaphore objects to clean up at shutdown"])
    assert "\r" not in bar.last_lines[-1] and bar.last_lines[-1].startswith("Capturing:")
