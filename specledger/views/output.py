"""Printing: rich tables for people, one JSON document for scripts."""

import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress
from rich.table import Table

from engine.config import RunConfig
from engine.progress import Progress
from eventlog import SessionInfo
from fsm.draft_profile import DraftProfile
from fsm.turn_metrics import TurnMetrics

Profiles = dict[tuple[int, int], DraftProfile]

TURN_FIELDS = (
    "turn", "prompt_tokens", "generated_tokens", "drafted", "accepted", "kept_tokens",
    "f_keep", "reprefill_tokens", "restores",
)

PARTIAL_CAPTION = ("* the log ends inside this turn: its figures count the events recorded "
                   "up to there")


class _Console(Console):
    """rich's console, but a closed pipe is the CLI's to handle (specledger.cli.main ends
    quietly with status 0; rich's own handler exits with status 1)."""

    def on_broken_pipe(self) -> None:
        """Stop writing and let the BrokenPipeError reach the entry point."""
        self.quiet = True
        raise BrokenPipeError


# A pipe gets a wide table rather than rich's 80-column default.
console = _Console(width=None if sys.stdout.isatty() else 132)


def emit_json(doc: Any) -> None:
    """Print one JSON document on stdout."""
    json.dump(doc, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def turn_rows(turns: Sequence[TurnMetrics],
              profiles: Profiles | None = None) -> list[dict[str, Any]]:
    """The `turns` list of the JSON contract (required fields first, extras after); with
    `profiles`, each turn's mean accepted length and acceptance per draft position."""
    rows = []
    for m in turns:
        d = m.to_dict()
        extra = profiles.get((m.slot, m.turn), DraftProfile()).to_dict() if profiles else {}
        rows.append({**{k: d[k] for k in TURN_FIELDS}, **d, **extra})
    return rows


def turn_table(turns: Sequence[TurnMetrics], title: str,
               profiles: Profiles | None = None,
               partial: Sequence[TurnMetrics] = (),
               plain: Sequence[float] | None = None) -> Table:
    """Per-turn table: the numbers that show re-prefill amplification at a glance; with
    `profiles`, the mean accepted length per round and the acceptance at each draft
    position; `partial` turns (the log ends inside them) last, marked `*`; with `plain`,
    each turn's tokens/s without speculation beside its own (red where speculation
    loses)."""
    multi = len({m.slot for m in [*turns, *partial]}) > 1
    t = Table(title=title, title_justify="left",
              caption=PARTIAL_CAPTION if partial else None, caption_justify="left")
    cols = (["slot"] if multi else []) + [
        "turn", "prompt", "gen", "drafted", "accepted", "kept", "f_keep", "reprefill",
        "restores", "stray", "tok/s", *(["plain tok/s"] if plain is not None else []),
        *(["mean len", "acc % at 1..k"] if profiles else []),
    ]
    for c in cols:
        t.add_column(c, justify="right")
    for i, m in enumerate([*turns, *partial]):
        restores = None if m.restores is None or m.ctx_restores is None else (
            m.restores + m.ctx_restores)
        turn = str(m.turn) if i < len(turns) else f"[yellow]{m.turn}*[/]"
        row = ([str(m.slot)] if multi else []) + [
            turn, _known(m.prompt_tokens), str(m.generated_tokens), str(m.drafted),
            str(m.accepted), _known(m.kept_tokens), _known(m.f_keep, "{:.4f}"),
            _flag(m.reprefill_tokens), _known(restores), _flag(m.stray_tokens),
            f"{m.decode_tps:.1f}",
        ]
        if plain is not None:
            loses = i < len(plain) and m.decode_tps < plain[i]
            value = f"{plain[i]:.1f}" if i < len(plain) else "?"
            row.append(f"[bold red]{value}[/]" if loses else value)
        if profiles:
            p = profiles.get((m.slot, m.turn), DraftProfile())
            rates = p.acc_per_pos
            row += [_known(p.mean_accept_len, "{:.2f}"),
                    "?" if rates is None else "/".join(f"{100 * r:.0f}" for r in rates) or "-"]
        t.add_row(*row)
    return t


def _known(value: float | None, fmt: str = "{}") -> str:
    """A metric, or '?' where the session's source could not tell it (an imported log)."""
    return "?" if value is None else fmt.format(value)


def _flag(n: int | None) -> str:
    if n is None:
        return "?"
    return f"[bold red]{n}[/]" if n else "0"


def sessions_table(infos: Sequence[SessionInfo]) -> Table:
    """One row per session."""
    t = Table(title="sessions", title_justify="left")
    for c in ("id", "status", "events", "backend", "strategy", "eog", "drafter", "created",
              "parent"):
        t.add_column(c, justify="right" if c in ("id", "events") else "left")
    for s in infos:
        cfg = s.config
        t.add_row(
            str(s.id), _status(s.status.value), str(s.events), s.backend,
            str(cfg.get("strategy", "")), str(cfg.get("eog_policy", "")),
            str(cfg.get("drafter", "")), s.created.strftime("%Y-%m-%d %H:%M:%S"),
            "" if s.parent_id is None else str(s.parent_id),
        )
    return t


def _status(status: str) -> str:
    colour = {"finished": "green", "failed": "red", "incomplete": "yellow"}.get(status)
    return f"[{colour}]{status}[/]" if colour else status


def session_json(s: SessionInfo) -> dict[str, Any]:
    """A session's stored facts as JSON."""
    return {
        "id": s.id, "status": s.status.value, "events": s.events, "backend": s.backend,
        "created": s.created.isoformat(), "config": s.config, "seeds": s.seeds,
        "code_version": s.code_version, "model_digest": s.model_digest, "parent": s.parent_id,
    }


class TurnBar:
    """A session's progress in turns: the total (slots x turns) is known on every backend,
    while an answer's length is known only on the sim. Within a turn the bar creeps by
    tokens over the answer cap and never past the turn; a finished turn sets it exactly."""

    def __init__(self, bar: RichProgress, task: TaskID, cap: int) -> None:
        self.bar, self.task, self.cap = bar, task, cap
        self.turns = 0
        self.in_turn = 0
        self.total_tokens = 0

    def tokens(self, n: int) -> None:
        """`n` more tokens committed."""
        self.in_turn += n
        self.total_tokens += n
        self._show()

    def turn_done(self) -> None:
        """A turn ended."""
        self.turns += 1
        self.in_turn = 0
        self._show()

    def _show(self) -> None:
        partial = min(self.in_turn / self.cap, 0.99)
        self.bar.update(self.task, completed=self.turns + partial, done=self.turns,
                        tokens=self.total_tokens)


@contextmanager
def progress_bar(config: RunConfig, label: str, show: bool) -> Iterator[Progress | None]:
    """A progress bar over the session's turns on stderr when it is a terminal; None
    otherwise."""
    if not (show and sys.stderr.isatty()):
        yield None
        return
    with RichProgress(TextColumn("{task.description}"), BarColumn(),
                  TextColumn("turn {task.fields[done]}/{task.total:.0f}, "
                             "{task.fields[tokens]} tokens"),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=config.slots * config.turns, tokens=0, done=0)
        turns = TurnBar(bar, task, config.answer_cap)
        yield turns
