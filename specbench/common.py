"""What every benchmark suite shares: its options, its result, goals, files and plots.

A suite records its runs as sessions in the benchmark's log (`BenchOptions.db`), writes
`results.json` and `results.md` under `<out>/<suite>/`, and draws its plots there as PNG
and SVG. docs/results.md links those files, as recorded in the checkout's `bench/results/`
(`record.py`), and quotes the goals table.
"""

import json
import platform
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy

from adapters.cache import cache_root
from adapters.llama.server.paths import DEFAULT_BUILD, check_build
from engine.config import SHIPPED_DRAFT, SHIPPED_TARGET
from engine.errors import ConfigError
from engine.files import replacing, write_file
from specbench.record import DEFAULT_OUT

WARMUP_TOKENS = 8
"""The answer length of an engine's unmeasured first request: first-call allocations land
on no measured pass."""

T = TypeVar("T")
K = TypeVar("K")


@dataclass(frozen=True)
class BenchOptions:
    """How a benchmark run is sized and where it writes.

    `quick` shrinks every suite to seconds (tests and smoke runs); the numbers it
    produces are not the ones to quote. `threads` is torch's intra-op thread count.
    `record` says `out` is the checkout's tracked results: a calibration then also stores
    its profile among the sim's shipped ones.
    """

    out: Path = DEFAULT_OUT
    db: str = str(DEFAULT_OUT / "bench.db")
    quick: bool = False
    record: bool = False
    threads: int = 1
    model: str = SHIPPED_TARGET
    draft_model: str = SHIPPED_DRAFT
    seed: int = 0
    device: str = "auto"  # the torch backend's: auto (CUDA when present), cpu or cuda
    backend: str = "torch"  # the engine a calibration fits: our torch backend, or llama.cpp
    llama_build: str = DEFAULT_BUILD  # the llama.cpp build the llama suites run

    def __post_init__(self) -> None:
        if self.threads < 1:
            raise ConfigError(f"threads: {self.threads} must be at least 1")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ConfigError(f"device: '{self.device}' is not auto, cpu or cuda")
        if self.backend not in ("torch", "llama"):
            raise ConfigError(f"backend: '{self.backend}' is not torch or llama")
        check_build(self.llama_build)
        if self.record and self.quick:  # the tracked results are numbers to quote
            raise ConfigError("bench: --record keeps full runs' numbers; --quick's are not "
                              "to quote (drop one)")

    def checkpoint(self, path: str) -> Any:
        """The checkpoint at `path`, loaded once onto the benchmark's device, for the
        backends a suite builds over it."""
        from engine.hybrid.device import resolve_device
        from engine.hybrid.loader import load_checkpoint

        return load_checkpoint(path, device=resolve_device(self.device))

    def suite_dir(self, suite: str) -> Path:
        """The folder a suite writes into (created)."""
        path = self.out / suite
        path.mkdir(parents=True, exist_ok=True)
        return path

    def log(self, message: str) -> None:
        """One progress line on stderr: long suites say what they are doing."""
        sys.stderr.write(f"bench: {message}\n")
        sys.stderr.flush()


@dataclass(frozen=True)
class Goal:
    """One line of the goals table (docs/results.md)."""

    name: str
    target: str
    measured: str
    met: bool
    command: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-able mapping."""
        return asdict(self)


@dataclass
class SuiteResult:
    """What a suite produced: its numbers, a markdown table, goals and the files written."""

    name: str
    data: dict[str, Any]
    table: str
    goals: list[Goal] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    sessions: list[int] = field(default_factory=list)

    def write(self, opts: BenchOptions) -> list[Path]:
        """Write results.json and results.md into the suite's folder; return every file."""
        folder = opts.suite_dir(self.name)
        doc = {"suite": self.name, "quick": opts.quick, "sessions": self.sessions,
               "goals": [g.to_dict() for g in self.goals], **self.data}
        write_file(folder / "results.json", json.dumps(doc, indent=2, default=str) + "\n")
        md = [f"# {self.name}", "", self.table.rstrip(), ""]
        if self.goals:
            md += ["", goals_table(self.goals), ""]
        write_file(folder / "results.md", "\n".join(md))
        self.files = [folder / "results.json", folder / "results.md", *self.files]
        return self.files


def timed(fn: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T, float]:
    """`fn(*args, **kwargs)` and the wall seconds it took."""
    start = time.perf_counter()
    return fn(*args, **kwargs), time.perf_counter() - start


def group_by(items: Iterable[T], key: Callable[[T], K]) -> dict[K, list[T]]:
    """`items` in a list per `key`, the keys in the order they first occur."""
    out: dict[K, list[T]] = {}
    for item in items:
        out.setdefault(key(item), []).append(item)
    return out


def server_logs(*parts: str) -> Path:
    """The folder (created) a suite's servers write their logs into: under the cache, out
    of the results folder."""
    path = cache_root().joinpath("logs", *parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def ledger_env(**extra: Any) -> dict[str, Any]:
    """The versions a ledger benchmark's numbers depend on (Python, SQLAlchemy, SQLite,
    then `extra`) and the machine."""
    return {"python": platform.python_version(), "sqlalchemy": sqlalchemy.__version__,
            "sqlite": sqlite3.sqlite_version, **extra, "machine": platform.machine()}


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub markdown table; floats are printed as given (format them first)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def goals_table(goals: Sequence[Goal]) -> str:
    """The goals as a markdown table."""
    return md_table(
        ["goal", "target", "measured", "met", "command"],
        [(g.name, g.target, g.measured, "yes" if g.met else "**no**", f"`{g.command}`")
         for g in goals],
    )


def save_figure(fig: Any, stem: Path) -> list[Path]:
    """Save a matplotlib figure as `stem`.png and `stem`.svg, close it, return both paths."""
    import matplotlib.pyplot as plt

    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    fig.tight_layout()
    for p in paths:
        with replacing(p) as tmp:
            fig.savefig(tmp, dpi=120, format=p.suffix[1:])
    plt.close(fig)
    return paths


def new_figure(width: float = 6.4, height: float = 4.0) -> tuple[Any, Any]:
    """A figure and axes on the non-interactive backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(width, height))


def panels(n: int, width: float, height: float) -> tuple[Any, list[Any]]:
    """A figure of `n` side-by-side axes, each `width` x `height` inches (new_figure's
    single axes replaced)."""
    fig, ax = new_figure(width * n, height)
    ax.remove()
    return fig, list(fig.subplots(1, n, squeeze=False)[0])
