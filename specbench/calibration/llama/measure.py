"""The llama calibration's measurements: llama-server's own timings of the shipped model's
GGUF on this CPU, per request, and the shape of every round from its -v log.

Two kinds of server run, each on fresh servers (llama-server keeps n-gram pools across
requests): one verbose pass per drafter, read by the llama ledger's log reader and task
fold (adapters/llama), gives each request's rounds (context, drafted, accepted, whether a
speculative checkpoint was saved, its restores and replays) and its context checkpoints;
then `repeat` interleaved passes without -v (verbose logging costs llama-server about a
quarter of its speed) give the timings: the response's `timings` (prompt_n / prompt_ms,
predicted_n / predicted_ms, draft_n / draft_n_accepted). Greedy decoding makes the rounds
of every pass the same; a timed pass whose drafts differ from the verbose pass's is an
error, never averaged in. The load average is recorded next to each pass: the machine
is shared.
"""

import os
import statistics
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from adapters.llama.ledger.fold import fold_tasks
from adapters.llama.ledger.tasks import LlamaTask
from adapters.llama.log.records import Checkpoint, RecordKind
from adapters.llama.log.sources import read_log
from adapters.llama.server.client import Completion
from adapters.llama.server.options import ServerOptions
from adapters.llama.server.process import LlamaServer
from engine.config import RunConfig


class MeasureError(RuntimeError):
    """A timed pass did not repeat the verbose pass's rounds (the fit would be wrong)."""


@dataclass(frozen=True)
class Round:
    """One round of a request as the -v log shows it: the slot length it began at, the
    drafts verified (0: a plain step), the drafts kept, whether a whole-state speculative
    checkpoint was saved, and the batch of each verification after a restore."""

    ctx: int
    drafted: int
    accepted: int
    checkpoint: bool
    replays: tuple[int, ...]


@dataclass(frozen=True)
class Trace:
    """One request's rounds and the context checkpoints its prompt phase saved."""

    prompt_n: int
    generated: int
    rounds: tuple[Round, ...]
    ctx_checkpoints: int

    @property
    def drafted(self) -> int:
        """Drafts verified over all rounds."""
        return sum(r.drafted for r in self.rounds)


@dataclass
class Timed:
    """The timed passes of one request under one drafter: milliseconds per pass."""

    prompt_ms: list[float] = field(default_factory=list)
    predicted_ms: list[float] = field(default_factory=list)
    predicted_n: int = 0
    draft_n: int = 0
    draft_accepted: int = 0

    @property
    def prefill_s(self) -> float:
        """Median prompt-processing seconds."""
        return statistics.median(self.prompt_ms) / 1e3

    @property
    def decode_s(self) -> float:
        """Median generation seconds (llama-server's `predicted_ms`, drafting included)."""
        return statistics.median(self.predicted_ms) / 1e3


def trace_of(task: LlamaTask) -> Trace:
    """A task of the -v log as its rounds. `accepted` counts the tokens the round
    committed beyond the target's own: what the sim must commit to stay in step. After a
    checkpoint restore llama-server verifies the kept drafts and its own token again
    (`j + 2` tokens after a reject at `j`) and keeps the token that replay samples, so
    such a round commits `j + 2`: on the sim, `j + 1` accepted drafts and a replay
    forward of `j + 2`, the same forwards; a round that must stay a reject keeps at most
    `drafted - 1`."""
    rounds = tuple(Round(ctx=r.n_tokens, drafted=r.drafted,
                         accepted=min(r.drafted - bool(r.restores), max(0, len(r.tokens) - 1)),
                         checkpoint=r.spec_ckpt is not None, replays=tuple(r.replays))
                   for r in task.rounds)
    ctx = sum(isinstance(p, Checkpoint) and p.kind is RecordKind.CTX_CREATED
              for p in task.prompt_phase)
    return Trace(prompt_n=task.prompt_tokens or 0, generated=task.generated, rounds=rounds,
                 ctx_checkpoints=ctx)


Options = Callable[[str, bool], ServerOptions]  # drafter, verbose -> the server's options


def traces(options: Options, drafter: str, prompts: Sequence[Sequence[int]], cap: int,
           log: Path) -> list[Trace]:
    """One verbose pass of `drafter` over `prompts`: each request's rounds."""
    with LlamaServer(options(drafter, True), log) as server:
        for p in prompts:
            server.client.complete(p, cap)
    tasks = fold_tasks(read_log(log).records).tasks
    if len(tasks) != len(prompts):
        raise MeasureError(f"llama calibration: {log} shows {len(tasks)} requests, "
                           f"{len(prompts)} were sent")
    return [trace_of(t) for t in tasks]


def load_average() -> float:
    """The one-minute load average (0 where the platform has none)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return 0.0


def timed_passes(options: Options, drafters: Sequence[str], prompts: Sequence[Sequence[int]],
                 cap: int, repeat: int, logs: Path, warmup: Sequence[int],
                 log: Callable[[str], None]) -> tuple[dict[str, list[Timed]], list[float]]:
    """`repeat` passes; in each, fresh servers for every drafter, warmed up on an
    unrelated prompt, then the drafters interleaved prompt by prompt so a burst of load
    touches all of them alike. Returns each drafter's requests and each pass's load
    average."""
    timed = {d: [Timed() for _ in prompts] for d in drafters}
    loads = []
    for i in range(repeat):
        log(f"calibration llama: timed pass {i + 1}/{repeat}, {len(drafters)} servers, "
            f"{len(prompts)} prompts (load {load_average():.2f})")
        with ExitStack() as stack:
            servers = {d: stack.enter_context(LlamaServer(options(d, False), logs / f"{d}.log"))
                       for d in drafters}
            for s in servers.values():
                s.client.complete(warmup, 8)  # first-request allocations
            for j, p in enumerate(prompts):
                for d, s in servers.items():
                    _add(timed[d][j], s.client.complete(p, cap))
        loads.append(load_average())
    return timed, loads


def _add(t: Timed, c: Completion) -> None:
    if t.prompt_ms and (c.predicted_n, c.draft_n, c.draft_accepted) != (
            t.predicted_n, t.draft_n, t.draft_accepted):
        raise MeasureError("llama calibration: a timed pass drafted or generated "
                           "differently from the one before (greedy runs must repeat)")
    t.prompt_ms.append(c.prompt_ms)
    t.predicted_ms.append(c.predicted_ms)
    t.predicted_n, t.draft_n, t.draft_accepted = c.predicted_n, c.draft_n, c.draft_accepted


def check_same(trace: Trace, timed: Timed) -> None:
    """The timed requests generated and drafted what the verbose one's log shows."""
    if (trace.generated, trace.drafted) != (timed.predicted_n, timed.draft_n):
        raise MeasureError(f"llama calibration: the -v pass generated {trace.generated} "
                           f"and drafted {trace.drafted}, the timed ones {timed.predicted_n} "
                           f"and {timed.draft_n}")


def server_options(config: RunConfig, target: Path, threads: int) -> Options:
    """The servers of `config`'s sizes on the target GGUF, by drafter and verbosity."""
    def make(drafter: str, verbose: bool) -> ServerOptions:
        return ServerOptions.from_run_config(config.replace(drafter=drafter), target,
                                             threads=threads, verbose=verbose)
    return make
