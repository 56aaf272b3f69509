"""An SGLang server run (adapters/sglang/log/run.py) as the engine-neutral interval run
every server log is recorded from (adapters/logs/intervals/run.py): each batch line one
interval, each request the log shows one request, each crash or death one failure.

What maps to what: `#running-req` -> running, `#queue-req` -> waiting, `token usage` (a
hybrid's `full token usage` where the line has no plain one) -> kv_usage, `accept len` ->
mean_accept_len, `accept rate` -> draft_acceptance, `gen throughput` -> generation_tps,
`input throughput` -> prompt_tps, the old prefill line's `cache hit rate` (a percent) ->
prefix_hit_rate (a ratio); `#token` (else `#full token`), `#new-seq`, `#new-token`,
`#cached-token`, a hybrid's `mamba num`, `mamba usage`, `#swa token`, `swa token usage` and
`#pending-token` go to the payload's SGLang keys. Requests come from the finished-request
lines where the run has them (`--log-requests`: they carry the counts), else from the HTTP
lines that ask for a generation (a POST) or were answered with an error; a health check is
no request. A failure names the requests received and not finished before it.
"""

import re

from adapters.logs.intervals.run import (
    Failure,
    FailureKind,
    IntervalKind,
    IntervalLine,
    IntervalLog,
    RequestLine,
    RunEnding,
    ServerRun,
)
from adapters.logs.prefix import prefix_time
from adapters.logs.sources import LogSource
from adapters.sglang.log.reader import read_source as read_sglang
from adapters.sglang.log.records import (
    Batch,
    BatchKind,
    Crash,
    LifeEvent,
    LifeKind,
    RunEnd,
    SglangRun,
)

ENGINE = "sglang"
_KINDS = {BatchKind.PREFILL: IntervalKind.PREFILL_BATCH,
          BatchKind.DECODE: IntervalKind.DECODE_BATCH}
_ENDINGS = {RunEnd.CRASHED: RunEnding.DIED, RunEnd.DIED: RunEnding.DIED,
            RunEnd.SHUTDOWN: RunEnding.SHUTDOWN, RunEnd.LOG_ENDS: RunEnding.LOG_ENDS}
_DP = re.compile(r"\bDP(\d+)\b")
_TRACEBACK_TAIL = 2  # the deepest frame shown (its file line and code) after the header


def at(clock: str | None) -> float | None:
    """Seconds since the epoch (as UTC) of a logger time as printed."""
    return None if clock is None else prefix_time(clock)


def interval(b: Batch) -> IntervalLine:
    """One batch line as an interval: the figures it printed, nothing else."""
    dp = _DP.search(b.rank or "")
    extra = {"tokens": b.token if b.token is not None else b.full_token,
             "new_seqs": b.new_seq, "new_tokens": b.new_token, "cached_tokens": b.cached_token,
             "mamba_num": b.mamba_num, "mamba_usage": b.mamba_usage, "swa_tokens": b.swa_token,
             "swa_usage": b.swa_token_usage, "pending_tokens": b.pending_token}
    return IntervalLine(
        b.line, _KINDS[b.kind], b.clock, at(b.clock),
        engine=int(dp.group(1)) if dp else None,
        prompt_tps=b.input_throughput, generation_tps=b.gen_throughput,
        running=b.running_req, waiting=b.queue_req,
        kv_usage=b.token_usage if b.token_usage is not None else b.full_token_usage,
        prefix_hit_rate=None if b.cache_hit_rate is None else b.cache_hit_rate / 100,
        mean_accept_len=b.accept_len, draft_acceptance=b.accept_rate,
        extra={k: v for k, v in extra.items() if v is not None})


def requests(run: SglangRun) -> list[RequestLine]:
    """The requests the run's lines show (finished-request lines, else generation POSTs
    and errors)."""
    if run.finished:
        out = [RequestLine(f.line, f.clock, at(f.clock), request_id=f.rid,
                           prompt_tokens=f.prompt_tokens, generated_tokens=f.completion_tokens,
                           cached_tokens=f.cached_tokens) for f in run.finished]
        errors = [h for h in run.http if h.status >= 400]
    else:
        out, errors = [], [h for h in run.http if h.method == "POST" or h.status >= 400]
    out += [RequestLine(h.line, h.clock, at(h.clock), h.status, h.method, h.path)
            for h in errors]
    return sorted(out, key=lambda r: r.line)


def _running_before(run: SglangRun, line: int) -> int | None:
    """`#running-req` of the last batch line before `line`."""
    before = [b for b in run.batches if b.line < line and b.running_req is not None]
    return before[-1].running_req if before else None


def in_flight(run: SglangRun, line: int) -> list[str]:
    """The requests received before `line` and not finished before it (`--log-requests`
    prints both; without it the log names none)."""
    done = {f.rid for f in run.finished if f.line < line}
    return [r.rid for r in run.received if r.line < line and r.rid not in done]


def _crash(run: SglangRun, c: Crash) -> Failure:
    kind = FailureKind.SCHEDULER_CRASH if c.who == "Scheduler" else FailureKind.WORKER_DIED
    where = f" on {c.rank}" if c.rank else ""
    message = c.exception or (f"{c.who}{where} hit an exception whose last line is not in "
                              f"the log ({len(c.traceback)} traceback line(s) shown)")
    header = f"{c.who} hit an exception{where}"
    return Failure(kind, c.line, c.clock, message,
                   [*c.last_lines, header, *c.traceback[-_TRACEBACK_TAIL:]],
                   in_flight(run, c.line), _running_before(run, c.line))


def _death(run: SglangRun, e: LifeEvent) -> Failure:
    return Failure(FailureKind.WORKER_DIED, e.line, e.clock, e.detail, list(run.last_lines),
                   in_flight(run, e.line), _running_before(run, e.line))


def failures(run: SglangRun) -> list[Failure]:
    """What went wrong: each crash; without one, a child's death no SIGTERM asked for; a
    server that exited before it was ready."""
    if run.crashes:
        return [_crash(run, c) for c in run.crashes]
    kinds = [e.kind for e in run.life]
    if LifeKind.SIGTERM not in kinds:
        deaths = [e for e in run.life if e.kind in (LifeKind.SIGQUIT, LifeKind.CHILD_EXIT)]
        if deaths:
            return [_death(run, deaths[0])]
    if not run.ready and not run.batches and LifeKind.EXITED in kinds:
        last = next((line for line in reversed(run.last_lines) if line.startswith("[")),
                    "no logger line")
        return [Failure(FailureKind.STARTUP_FAILED, run.last_line, None,
                        "the server exited during start-up without an error line; its "
                        f"last step: {last}", list(run.last_lines))]
    return []


def server_run(run: SglangRun) -> ServerRun:
    """The engine-neutral interval run of one SGLang server run."""
    s = run.server
    hybrid = bool(s.hybrid) or any(b.full_token is not None or b.mamba_num is not None
                                   or b.mamba_usage is not None for b in run.batches)
    # SGLang's num_draft_tokens counts the verify tree's root (the last verified token),
    # so a chain drafts one fewer (num_draft_tokens = num_steps + 1 at topk 1).
    k = s.num_draft_tokens - 1 if s.num_draft_tokens is not None else None
    return ServerRun(
        ENGINE, run.index, run.first_line, run.last_line, run.pid, _ENDINGS[run.ending],
        model=s.model, architecture=s.architecture, hybrid=True if hybrid else None,
        method=s.speculative_algorithm, num_spec_tokens=k,
        prefix_caching=None if s.disable_radix_cache is None else not s.disable_radix_cache,
        intervals=[interval(b) for b in run.batches], requests=requests(run),
        failures=failures(run), last_lines=list(run.last_lines), parsed=run.parsed,
        skipped=run.skipped, unknown=run.unknown, unknown_shapes=run.unknown_shapes)


def read_source(source: LogSource) -> IntervalLog:
    """Read an SGLang log source into its interval runs (what `specledger import sglang`
    records); a source that is no SGLang log raises SglangLogError."""
    log = read_sglang(source)
    return IntervalLog(log.name, [server_run(r) for r in log.runs], log.lines, log.sha256,
                       log.partial_line, log.gzip_cut, log.prefixes)
