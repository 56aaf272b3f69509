"""Printing divergences, turn deltas and findings: JSON for scripts, rich text for people."""

from collections.abc import Sequence
from typing import Any

from rich.table import Table

from eventlog.diff import Divergence, TurnDelta
from eventlog.postmortem import Finding, Postmortem
from fsm.event import Event
from specledger.output import console

_LIST_HEAD = 8


def shorten(value: Any, limit: int = 16) -> Any:
    """Long token lists cut to their head and a count, recursively: a prompt's thousands
    of tokens would drown the one field that matters."""
    if isinstance(value, list):
        if len(value) > limit:
            return [*(shorten(v) for v in value[:_LIST_HEAD]), f"... +{len(value) - _LIST_HEAD}"]
        return [shorten(v) for v in value]
    if isinstance(value, dict):
        return {k: shorten(v) for k, v in value.items()}
    return value


def event_json(ev: Event | None) -> dict[str, Any] | None:
    """An event as JSON, with long lists shortened."""
    return None if ev is None else shorten(ev.to_row())


def divergence_json(d: Divergence | None) -> dict[str, Any] | None:
    """The `divergence` object of the diff and replay --rerun contracts."""
    if d is None:
        return None
    return {"seq": d.seq, "slot": d.slot, "turn": d.turn, "round": d.round, "field": d.field,
            "expected": shorten(d.expected), "actual": shorten(d.actual),
            "expected_event": event_json(d.expected_event),
            "actual_event": event_json(d.actual_event),
            "before": [event_json(e) for e in d.before]}


def turn_deltas_json(turns: Sequence[TurnDelta]) -> list[dict[str, Any]]:
    """The `turns` list of the diff contract: each metric as a, b and b - a."""
    out = []
    for t in turns:
        metrics = {k: {"a": a, "b": b, "delta": None if a is None or b is None else b - a}
                   for k, (a, b) in t.metrics.items()}
        out.append({"slot": t.slot, "turn": t.turn, "same_output": t.same_output,
                    "first_token_diff": t.first_token_diff, "metrics": metrics})
    return out


def print_divergence(d: Divergence | None, what: str) -> None:
    """Where two streams part, with the events just before."""
    if d is None:
        console.print(f"[green]no divergence[/]: {what}")
        return
    console.print(f"[bold red]first divergence[/] at seq {d.seq} (slot {d.slot}, turn "
                  f"{d.turn}, round {d.round}): [bold]{d.field}[/] expected "
                  f"{shorten(d.expected)!r}, actual {shorten(d.actual)!r}")
    t = Table(title="events just before, and the divergent pair", title_justify="left")
    for c in ("", "seq", "slot", "turn", "round", "trigger", "source -> dest", "payload"):
        t.add_column(c)
    rows = [("", e) for e in d.before]
    rows += [("expected", d.expected_event), ("actual", d.actual_event)]
    for label, e in rows:
        if e is None:
            t.add_row(label, "", "", "", "", "(end of log)", "", "")
            continue
        t.add_row(label, str(e.seq), str(e.slot), str(e.turn), str(e.round), e.trigger.value,
                  f"{e.source.value} -> {e.dest.value}", _brief(e.payload))
    console.print(t)


def _brief(payload: dict[str, Any], width: int = 70) -> str:
    text = str(shorten(payload, 6))
    return text if len(text) <= width else text[: width - 3] + "..."


_SHOWN = {"generated_tokens": "gen", "accepted": "accepted", "restores": "restores",
          "reprefill_tokens": "reprefill", "stray_tokens": "stray", "f_keep": "f_keep",
          "decode_tps": "tok/s", "violations": "violations"}


def print_turn_deltas(turns: Sequence[TurnDelta], a: str, b: str) -> None:
    """Per-turn table: output equality and the main metrics, a -> b."""
    t = Table(title=f"turns: {a} -> {b}", title_justify="left")
    for c in ("slot", "turn", "same output", *_SHOWN.values()):
        t.add_column(c, justify="right")
    for d in turns:
        same = {True: "yes", False: f"[red]no (token {d.first_token_diff})[/]",
                None: "-"}[d.same_output]
        cells = [_pair(*d.metrics.get(k, (None, None))) for k in _SHOWN]
        t.add_row(str(d.slot), str(d.turn), same, *cells)
    console.print(t)


def _pair(a: Any, b: Any) -> str:
    fa, fb = _num(a), _num(b)
    return fa if fa == fb else f"{fa} -> [bold]{fb}[/]"


def _num(v: Any) -> str:
    if v is None:
        return "-"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


_COLOUR = {"error": "red", "warning": "yellow", "info": "cyan"}


def print_postmortem(pm: Postmortem) -> None:
    """Findings, worst first, each with its explanation and fix."""
    ref = f", reference session {pm.reference}" if pm.reference is not None else ""
    counts = pm.counts()
    console.print(f"postmortem of session {pm.session} ({pm.status}, {pm.events} events"
                  f"{ref}): {counts['error']} error(s), {counts['warning']} warning(s), "
                  f"{counts['info']} note(s)")
    for f in pm.findings:
        print_finding(f)


def print_finding(f: Finding) -> None:
    """One finding as a short block."""
    colour = _COLOUR[f.severity.value]
    place = f"seq {f.first_seq}..{f.last_seq}"
    if f.turn is not None:
        place += f", slot {f.slot} turn {f.turn}" + (f" round {f.round}" if f.round else "")
    console.print(f"\n[bold {colour}]{f.severity.value}[/] [bold]{f.kind.value}[/] ({place})")
    console.print(f"  {f.explanation}")
    console.print(f"  [bold]fix:[/] {f.fix}")
