"""A vLLM log read into its server runs whatever a user kept: behind any outer prefix
(docker's timestamps learned from the lines), gzip, a line cut mid-write, several servers
in one file (another API server process, or a start after one served), and text that is
no vLLM log refused in one line. The captures are our own vLLM 0.32 CPU runs
(tools/capture_vllm_logs.py); the pieces are lines of the real corpus."""

import gzip
from pathlib import Path

import pytest

from adapters.logs.intervals.run import IntervalKind, RunEnding
from adapters.vllm.log.reader import VllmLogError, read_file, read_lines

FIXTURES = Path(__file__).with_name("fixtures")
# vllm#39680: two processes, without and with MTP, pasted in one file.
TWO = (b"(APIServer pid=1422509) INFO 04-09 11:27:10 [loggers.py:259] Engine 000: Avg prompt "
       b"throughput: 967.2 tokens/s, Avg generation throughput: 342.2 tokens/s, Running: 1 "
       b"reqs, Waiting: 0 reqs, GPU KV cache usage: 0.1%, Prefix cache hit rate: 44.5%\n"
       b"(APIServer pid=1409788) INFO 04-09 11:17:53 [metrics.py:101] SpecDecoding metrics: "
       b"Mean acceptance length: 1.97, Accepted throughput: 63.00 tokens/s, Drafted "
       b"throughput: 65.20 tokens/s, Accepted: 630 tokens, Drafted: 652 tokens, "
       b"Per-position acceptance rate: 0.966, Avg Draft acceptance rate: 96.6%\n")


def _lines(data: bytes) -> list[bytes]:
    """Physical lines as a file holds them: cut at newlines only (a line may end in CR)."""
    parts = data.split(b"\n")
    return [p + b"\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


@pytest.mark.parametrize("name", ["default", "debug"])
def test_our_captures_read_as_one_run_that_shut_down(name: str) -> None:
    log = read_file(FIXTURES / f"{name}.log.gz")
    (run,) = log.runs
    assert run.ending is RunEnding.SHUTDOWN and not run.failures
    assert (run.version, run.method, run.num_spec_tokens) == ("0.32.0", "mtp", 2)
    assert run.architecture == "Qwen3_5ForCausalLM" and run.hybrid
    assert run.prefix_caching is False  # off with speculation (adapters/vllm/options.py)
    assert [r.path for r in run.requests] == ["/v1/completions", *["/v1/chat/completions"] * 2]
    assert all(r.status == 200 for r in run.requests)
    drafting = [iv for iv in run.intervals if iv.speculative]
    # Each SpecDecoding line joined the Engine line printed with it: one interval each.
    assert drafting and all(iv.kind is IntervalKind.ENGINE and iv.generation_tps is not None
                            for iv in drafting)
    assert run.parsed + run.skipped + run.unknown == log.lines


def test_request_logging_names_each_request() -> None:
    (run,) = read_file(FIXTURES / "debug.log.gz").runs
    assert [r.request_id is not None for r in run.requests] == [True, True, True]
    assert run.requests[1].request_id.startswith("chatcmpl-")  # type: ignore[union-attr]


def test_docker_timestamps_are_learned_and_stripped(tmp_path: Path) -> None:
    plain = gzip.decompress((FIXTURES / "default.log.gz").read_bytes())
    stamped = b"".join(b"2026-05-01 18:26:47.162 | " + ln for ln in _lines(plain))
    path = tmp_path / "docker.log"
    path.write_bytes(stamped)
    log, want = read_file(path), read_file(FIXTURES / "default.log.gz")
    assert log.prefixes == ["2026-05-01 18:26:47.162 | "]
    assert [len(r.intervals) for r in log.runs] == [len(r.intervals) for r in want.runs]
    assert [r.requests for r in log.runs] == [r.requests for r in want.runs]


def test_two_processes_in_one_file_are_two_runs() -> None:
    log = read_lines(_lines(TWO))
    assert [(r.pid, len(r.intervals)) for r in log.runs] == [(1422509, 1), (1409788, 1)]


def test_a_server_started_again_after_serving_is_a_new_run() -> None:
    one = gzip.decompress((FIXTURES / "default.log.gz").read_bytes())
    log = read_lines(_lines(one + one))
    first, second = log.runs
    assert first.ending is RunEnding.SHUTDOWN and second.first_line > len(_lines(one))
    assert len(first.intervals) == len(second.intervals) > 0


def test_a_line_cut_mid_write_is_dropped_and_said() -> None:
    log = read_lines(_lines(TWO + b"(APIServer pid=1409788) INFO 04-09 11:17:5"))
    assert log.partial_line == 3 and log.lines == 3


def test_text_that_is_no_vllm_log_is_refused() -> None:
    with pytest.raises(VllmLogError, match="not a vLLM log"):
        read_lines([b"hello\n", b"world\n"], "notes.txt")
    with pytest.raises(VllmLogError, match="empty"):
        read_lines([], "empty.log")


def test_a_prefix_first_met_past_the_head_is_learned_as_met() -> None:
    """A file's prefixes are learned from its first 5,000 lines, then from each line whose
    shape is new (a shipper switched on mid-file)."""
    bare = [b"(APIServer pid=1422509) INFO 05-08 16:25:09 [x.py:1] Waiting\n"] * 5000
    stamped = b"2026-05-08T16:25:19.123456789Z " + _lines(TWO)[0]
    log = read_lines([*bare, stamped])
    (run,) = log.runs
    assert [iv.line for iv in run.intervals] == [5001] and run.unknown == 0
