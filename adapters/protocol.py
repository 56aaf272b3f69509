"""The small protocol every engine we observe satisfies (llama.cpp's llama-server, vLLM's
OpenAI server): start the server, drive the conversation, read what it reports, turn it
into events. `specledger.runs.observed.observe` runs any of them the same way; each engine's
adapter says only what differs (docs/design.md#engines-we-observe-but-do-not-run).

The steps, in order:
1. `server()`: the server for the run, not started yet; `observe` starts it in a `with`
   block and it stops when the block ends (a failure to start is the run's error).
2. `drive(server, questions, on_answer)`: one conversation of `questions` through the
   server's OpenAI API, as users drive it; `on_answer` is told the generated token count
   of each answer as it comes. It returns what the adapter needs later, including the
   error that ended the conversation early, if any (the turns before it are kept).
3. `read(server, driven)`: after the server stopped (llama-server writes a task's
   release after the answer), what the engine reported: its log, its answers, its
   counters, kept in files beside its log.
4. `record(report, sink)`: fire the report's events through the round machine into
   `sink`, in whole units, and return the session's stored configuration with the
   recorded turns.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self, TypeVar

from fsm.event import Event
from fsm.payloads import TurnMetricsRow
from fsm.turn_metrics import TurnMetrics

Messages = list[dict[str, str]]


def end_metrics(stats: TurnMetrics, unknown: set[str], **extra: Any) -> TurnMetricsRow:
    """An imported turn's `end_turn` metrics: its figures (the re-prefill's time taken as
    its share of the prefill's), each `unknown` one None and listed, then `extra`."""
    row = stats.to_dict()
    if stats.prefill_tokens and stats.reprefill_tokens:
        row["reprefill_s"] = stats.prefill_s * min(
            1.0, stats.reprefill_tokens / stats.prefill_tokens)
    return row | {k: None for k in unknown} | {"unknown": sorted(unknown), **extra}


def read_answers_file(path: str | Path, error: type[Exception]) -> str:
    """The text of the file an observed engine's answers were kept in, or `error` saying
    why it cannot be read."""
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read {Path(path)}: {exc}") from None


@dataclass(frozen=True)
class Sampling:
    """How an observed engine's answers are sampled, in the chat request's terms
    (temperature 0: greedy)."""

    temperature: float
    top_k: int
    top_p: float
    seed: int
    max_tokens: int


class Sink(Protocol):
    """Where an adapter's events go: a session journal (engine.session.Journal)."""

    def append(self, event: Event) -> None:
        """Take one event."""

    def end_unit(self) -> None:
        """Everything appended so far forms whole units."""


class Server(Protocol):
    """A third-party server that specledger starts and stops: a context manager that
    writes its output to `log_path`."""

    log_path: Path

    def __enter__(self) -> Self:
        """Start the server; return when it is ready (or raise, with it stopped)."""

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Stop the server."""


@dataclass
class Recording:
    """What `record` made of a report: the session's stored configuration, its backend,
    seed and model digest, the turns recorded, the violations and events fired."""

    config: dict[str, Any]
    backend: str
    seed: int | None
    model_digest: str | None
    turns: list[TurnMetrics] = field(default_factory=list)
    violations: int = 0
    events: int = 0
    error: str | None = None
    """Why the run stopped early (the session is then `failed`), None when it did not."""
    files: dict[str, Path] = field(default_factory=dict)
    """The files the run wrote (its server log, its answers), by what they hold."""


S = TypeVar("S", bound=Server)
D = TypeVar("D")
R = TypeVar("R")


class ObservedEngine(Protocol[S, D, R]):
    """One run of an engine we observe: `S` is its server, `D` what driving returns, `R`
    what reading does."""

    backend: str

    def server(self) -> S:
        """The run's server, not started."""

    def drive(self, server: S, questions: Sequence[str],
              on_answer: Callable[[int], None]) -> D:
        """The conversation, through the started `server`."""

    def read(self, server: S, driven: D) -> R:
        """What the stopped `server` reported of `driven`."""

    def record(self, report: R, sink: Sink) -> Recording:
        """Fire `report`'s events into `sink`."""
