"""SGLang logs as users keep them, read into runs: a shipper's timestamps before every
line, a last line cut mid-write, gzip, and every log of the published corpus with the
figures its lines print."""

import gzip
from pathlib import Path

import pytest

from adapters.sglang.log.reader import SglangLog, SglangLogError, read_file, read_lines, sources
from adapters.sglang.log.records import Batch, BatchKind, LifeKind, RunEnd, SglangRun

COMPLETE = "sostrowsk-dgx-spark-local-llm-gb10-laguna-int4-dflash-v0.5.16-complete.log"
FAILED_START = "sostrowsk-dgx-spark-local-llm-gb10-laguna-nvfp4-dflash-v0.5.16-failed-start.log"
# The lines of the user's own start script ("START 23:37:33 INT4"), not SGLang's.
SCRIPT_BANNERS = {COMPLETE: 1, FAILED_START: 1}


def _decodes(run: SglangRun) -> list[Batch]:
    return [b for b in run.batches if b.kind is BatchKind.DECODE]


@pytest.fixture(scope="module")
def logs(corpus: Path) -> dict[str, SglangLog]:
    return {p.name: read_file(p) for p in sorted(corpus.glob("*.log"))}


def test_docker_timestamps_are_a_prefix_and_tracebacks_keep_theirs() -> None:
    lines = [
        "2026-07-10T03:06:32.123456789Z [2026-07-10 03:06:32] Decode batch, #running-req: 1, "
        "#token: 5, token usage: 0.01, cuda graph: True, gen throughput (token/s): 4.00, "
        "#queue-req: 0",
        "2026-07-10T03:06:37.000000001Z [2026-07-10 03:06:37] Scheduler hit an exception: "
        "Traceback (most recent call last):",
        '2026-07-10T03:06:37.000000002Z   File "/s.py", line 1, in f',
        "2026-07-10T03:06:37.000000003Z RuntimeError: CUDA error: an illegal memory access",
    ]
    log = read_lines([(x + "\n").encode() for x in lines], "docker.log")
    [run] = log.runs
    assert log.prefixes == ["2026-07-10T03:06:32.123456789Z "]
    assert run.batches[0].token == 5 and run.unknown == 0
    assert run.crashes[0].exception == "RuntimeError: CUDA error: an illegal memory access"
    # The prefix's shape takes the spaces after it, the traceback's indent with them.
    assert run.crashes[0].traceback == ['File "/s.py", line 1, in f']


def test_a_last_line_cut_mid_write_is_dropped_and_reported() -> None:
    log = read_lines([b"[2026-07-10 03:06:32] Decode batch, #running-req: 1\n",
                      b"[2026-07-10 03:06:33] Decode batch, #runn"], "cut.log")
    assert log.partial_line == 2 and len(log.runs[0].batches) == 1


def test_gzip_and_folders_are_read_as_plain_files(tmp_path: Path, corpus: Path) -> None:
    text = (corpus / FAILED_START).read_bytes()
    (tmp_path / "server.log.1.gz").write_bytes(gzip.compress(text))
    [src] = sources([tmp_path])
    assert read_file(tmp_path / "server.log.1.gz").sha256 == read_file(
        corpus / FAILED_START).sha256
    assert src.parts == (tmp_path / "server.log.1.gz",)
    with pytest.raises(SglangLogError, match="no such file"):
        sources([tmp_path / "missing.log"])


def test_every_corpus_log_reads_with_only_the_script_banners_unknown(
        logs: dict[str, SglangLog]) -> None:
    assert len(logs) == 10
    for name, log in logs.items():
        assert len(log.runs) == 1, name
        assert sum(r.unknown for r in log.runs) == SCRIPT_BANNERS.get(name, 0), name
        assert log.prefixes == [], name


def test_the_complete_run_reads_its_whole_life(logs: dict[str, SglangLog]) -> None:
    [run] = logs[COMPLETE].runs
    kinds = [b.kind for b in run.batches]
    assert (kinds.count(BatchKind.PREFILL), kinds.count(BatchKind.DECODE)) == (57, 56)
    assert len(run.http) == 97 and sum(h.status == 400 for h in run.http) == 3
    s = run.server
    assert (s.model, s.speculative_algorithm, s.num_draft_tokens, s.num_steps,
            s.max_total_tokens, s.architecture, s.hybrid) == (
        "poolside/Laguna-S-2.1-INT4", "DFLASH", 16, 1, 185897, "LagunaForCausalLM", {"swa"})
    accept = [b.accept_len for b in _decodes(run)]
    assert (min(accept), max(accept)) == (1.23, 3.79)
    assert sum(b.full_token == 0 for b in _decodes(run)) == 1
    assert run.ready and run.pid == 31319 and not run.crashes
    assert run.ending is RunEnd.SHUTDOWN


def test_the_failed_start_ends_at_its_graph_capture(logs: dict[str, SglangLog]) -> None:
    [run] = logs[FAILED_START].runs
    assert not run.ready and not run.batches and run.ending is RunEnd.DIED
    assert [e.kind for e in run.life] == [LifeKind.EXITED]
    assert run.server.args["mem_fraction_static"] == 0.88


@pytest.mark.parametrize(("name", "who", "rank", "traceback"), [
    ("sgl-project-sglang-10407-qwen3-next-80b-v0.5.2-ima-nospec.log", "Scheduler", "TP3", 4),
    ("sgl-project-sglang-27325-mtp-specv2-mamba-extrabuffer-nonetype-crash.log", "Scheduler",
     None, 4),
    ("sgl-project-sglang-28431-qwen36-mtp-v0.5.13-crash.log", "Scheduler", "TP0", 15),
    ("sgl-project-sglang-31103-qwen36-35b-a3b-fp8-h20-v0.5.15-crash.log", "Scheduler", None,
     16),
    ("sgl-project-sglang-3724-deepseek-r1-nextn-structured-output-crash.log", "Scheduler",
     "TP5", 1),
])
def test_each_crash_fragment_reads_its_crash(logs: dict[str, SglangLog], name: str, who: str,
                                             rank: str | None, traceback: int) -> None:
    [run] = logs[name].runs
    [c] = run.crashes
    assert (c.who, c.rank, len(c.traceback)) == (who, rank, traceback)
    assert run.ending is RunEnd.CRASHED


def test_the_fragments_figures_are_the_lines_own(logs: dict[str, SglangLog]) -> None:
    loop = logs["sgl-project-sglang-28179-qwen36-27b-fp8-dflash-repetition-loop-abridged.log"]
    tokens = [b.full_token for b in loop.runs[0].batches]
    assert tokens == list(range(47360, 50241, 320))
    assert {b.accept_len for b in loop.runs[0].batches} == {8.0}
    npu = logs["sgl-project-sglang-30047-npu-qwen-hybrid-mtp-prefixcache-bench.log"].runs[0]
    assert max(b.cached_token or 0 for b in npu.batches) == 1114624
    assert {b.graph_device for b in npu.batches} == {"npu"} and npu.skipped == 3
    eagle = logs["sgl-project-sglang-11948-qwen3-8b-eagle3-a800-tp2.log"].runs[0]
    assert [b.accept_rate for b in _decodes(eagle)] == [0.54, 0.49, 0.45, 0.51, 0.45]


def test_a_prefix_that_first_shows_late_in_a_file_is_learned_there() -> None:
    plain = [b"[2026-07-10 03:00:00] Load weight begin. avail mem=70.00 GB\n"] * 5000
    late = (b"2026-07-10T03:06:32.1Z [2026-07-10 03:06:32] Decode batch, #running-req: 4, "
            b"#queue-req: 0\n")
    log = read_lines([*plain, late], "late.log")
    assert [b.running_req for b in log.runs[0].batches] == [4]
    assert log.prefixes == ["2026-07-10T03:06:32.1Z "]


@pytest.mark.parametrize("prefix", [
    "sglang-1  | ",                                   # docker compose's service column
    "2026-07-10T03:06:32.123456789+00:00 stdout F ",  # kubectl / containerd
    "Jul 10 03:06:32 gpu-box sglang[4242]: ",         # journald
])
def test_a_shippers_prefix_is_learned_from_the_file(prefix: str) -> None:
    lines = [prefix + "[2026-07-10 03:06:32 TP0] Decode batch, #running-req: 3, #queue-req: 1",
             prefix + "[2026-07-10 03:06:33 TP0] Scheduler hit an exception: Traceback (most "
                      "recent call last):",
             prefix + "RuntimeError: CUDA error: an illegal memory access was encountered"]
    log = read_lines([(x + "\n").encode() for x in lines], "shipped.log")
    [run] = log.runs
    assert [b.running_req for b in run.batches] == [3] and run.unknown == 0
    assert run.crashes[0].exception == ("RuntimeError: CUDA error: an illegal memory access "
                                        "was encountered")
    assert log.prefixes == [prefix]
