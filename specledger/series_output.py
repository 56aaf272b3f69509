"""How `show` prints an interval session (adapters/logs/intervals/): what its log says of
the server, its failures, the series of intervals (throughput, requests, KV use, prefix
hits, acceptance length and per-position acceptance over time) and its requests."""

from collections import Counter
from collections.abc import Sequence
from typing import Any

from rich.table import Table
from sqlalchemy import Engine

from eventlog.reader import PAYLOAD, SessionInfo, scan_rows
from eventlog.series import Point, interval_series
from fsm.states import Trigger
from specledger import output

_COLUMNS = ("line", "clock", "t s", "prompt tok/s", "gen tok/s", "run", "wait", "KV %",
            "prefix hit %", "mean len", "acc %", "accepted/drafted", "acc % at 1..k")


def _v(x: float | int | None, fmt: str = "{}") -> str:
    """A figure, or '-' where the line does not give it."""
    return "-" if x is None else fmt.format(x)


def _pct(x: float | None) -> str:
    return _v(None if x is None else x * 100, "{:.1f}")


def series_table(points: Sequence[Point], title: str) -> Table:
    """One row per interval, in log order; '-' where its line gives no figure. `acc %` is
    the engine's own acceptance rate (SGLang's `accept rate` is all its lines give of it)."""
    t = Table(title=title, title_justify="left")
    for c in _COLUMNS:
        t.add_column(c, justify="right")
    for p in points:
        iv = p.interval
        pos = iv["acc_per_pos"]
        counts = (None if iv["drafted"] is None and iv["accepted"] is None
                  else f"{_v(iv['accepted'])}/{_v(iv['drafted'])}")
        t.add_row(str(iv["line"]), _v(iv["clock"]), f"{p.t:.0f}", _v(iv["prompt_tps"]),
                  _v(iv["generation_tps"]), _v(iv["running"]), _v(iv["waiting"]),
                  _pct(iv["kv_usage"]), _pct(iv["prefix_hit_rate"]),
                  _v(iv["mean_accept_len"], "{:.2f}"), _pct(iv["draft_acceptance"]),
                  counts or "-",
                  "-" if pos is None else " ".join(f"{x * 100:.0f}" for x in pos))
    return t


def header_lines(info: SessionInfo, statuses: Counter[str]) -> list[str]:
    """The session's first lines: engine, model, speculation, source, run ending, requests
    by status, and each failure with its last lines."""
    cfg: dict[str, Any] = info.config
    src = cfg["source"]
    run = src["run"]
    spec = (f"{cfg['drafter']} k={cfg['draft_max']}" if cfg.get("drafter")
            else "not logged")
    lines = [f"session {info.id}: {info.status.value}, {info.events} events, {cfg['engine']} "
             f"{cfg.get('version') or '(version not logged)'} log, model "
             f"{cfg.get('model') or '(not logged)'}, speculative {spec}, prefix caching "
             f"{_known_bool(cfg.get('prefix_caching'))}",
             f"  from {src['path']} run {run['index']} of {run['of']}, lines "
             f"{run['first_line']}-{run['last_line']}, ending {run['ending']}"]
    if statuses:
        lines.append("  requests: " + ", ".join(f"{n} HTTP {s}" for s, n in
                                                sorted(statuses.items())))
    for f in src["failures"]:
        lines.append(f"  failure {f['kind']} at log line {f['line']}: {f['message']}")
    return lines


def _known_bool(x: bool | None) -> str:
    return "not logged" if x is None else ("on" if x else "off")


def series_json(points: Sequence[Point]) -> list[dict[str, Any]]:
    """The series as `show --json` gives it: each interval's payload with its seq and t."""
    return [{"seq": p.seq, "t": p.t, **p.interval} for p in points]


def show_series(engine: Engine, info: SessionInfo, as_json: bool) -> int:
    """`show` of an interval session: its header, failures, series and requests."""
    points = interval_series(engine, info.id)
    statuses: Counter[str] = Counter()
    for rows in scan_rows(engine, info.id, triggers={Trigger.END_TURN}):
        for row in rows:
            error = row[PAYLOAD]["metrics"].get("error")
            statuses[error.split()[1] if error else "2xx/3xx"] += 1
    if as_json:
        output.emit_json({"session": output.session_json(info), "requests": dict(statuses),
                          "intervals": series_json(points)})
        return 0
    for line in header_lines(info, statuses):
        output.console.print(line, markup=False, highlight=False)
    output.console.print(series_table(points, f"{len(points)} intervals"))
    return 0
