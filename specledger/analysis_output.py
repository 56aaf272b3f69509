"""Printing divergences, turn deltas and findings: JSON for scripts, rich text for people."""

from collections.abc import Sequence
from typing import Any

from rich.markup import escape
from rich.table import Table

from eventlog.diff import Divergence, TurnDelta
from eventlog.postmortem import Finding, Postmortem
from eventlog.token_diff import Part, TokenDiff, TokenDivergence
from fsm.event import Event
from specledger.output import console
from specledger.token_text import Decoder

Decoders = tuple[Decoder | None, Decoder | None]

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
    return [{"slot": t.slot, "turn": t.turn, "same_output": t.same_output,
             "first_token_diff": t.first_token_diff, "same_prompt": t.same_prompt,
             "first_prompt_diff": t.first_prompt_diff,
             "metrics": {k: {"a": a, "b": b, "delta": None if a is None or b is None else b - a}
                         for k, (a, b) in t.metrics.items()}}
            for t in turns]


def token_diff_json(t: TokenDiff, decode: Decoders) -> dict[str, Any]:
    """The `tokens` object of the diff contract in token mode."""
    return {"first": token_divergence_json(t.first, decode), "turns": t.turns,
            "answer_tokens": t.answer_tokens,
            "unknown": {"a": t.unknown[0], "b": t.unknown[1]}}


def token_divergence_json(d: TokenDivergence | None, decode: Decoders) -> dict[str, Any] | None:
    """The first differing token: place, both ids and (with a tokenizer) their text."""
    if d is None:
        return None
    da, db = decode
    return {"slot": d.slot, "turn": d.turn, "part": d.part.value, "index": d.index,
            "position": d.position, "actual_position": d.actual_position,
            "expected": d.expected, "actual": d.actual,
            "expected_text": _text(da, d.expected), "actual_text": _text(db, d.actual),
            "expected_ended": d.ended(0), "actual_ended": d.ended(1),
            "lengths": {"a": d.lengths[0], "b": d.lengths[1]}, "before": list(d.before),
            "before_text": da(d.before) if da is not None else None}


def print_token_diff(t: TokenDiff, a: str, b: str, decode: Decoders) -> None:
    """Where two sessions' committed tokens part, or that they agree."""
    unknown = [f"{name} {n}" for name, n in zip((a, b), t.unknown, strict=True) if n]
    note = (f"; ids not in the log, matched as any: {', '.join(unknown)}" if unknown else "")
    d = t.first
    if d is None:
        console.print(f"[green]no divergence[/]: the committed tokens of {a} and {b} agree "
                      f"({t.turns} turns, {t.answer_tokens} answer tokens{note})")
        return
    ids = [_token(d, side, decode[side]) for side in (0, 1)]
    where = (f"prompt, sequence position {d.position}" if d.part is Part.PROMPT else
             f"answer token {d.index} (sequence position {d.position} in {a}, "
             f"{d.actual_position} in {b})")
    console.print(f"[bold red]first differing token[/]: slot {d.slot}, turn {d.turn}, {where}:"
                  f" expected [bold]{ids[0]}[/], actual [bold]{ids[1]}[/]", highlight=False)
    context = decode[0](d.before) if decode[0] is not None else ""
    if context:
        console.print(f"  after {context!r}", highlight=False)
    if note:
        console.print(f"  {note[2:]}")


def _token(d: TokenDivergence, side: int, decode: Decoder | None) -> str:
    tok = (d.expected, d.actual)[side]
    if d.ended(side):
        return f"<end: its {d.part.value} has {d.lengths[side]} tokens>"
    if tok is None:
        return "<id not in the log>"
    return f"{tok} {decode([tok])!r}" if decode is not None else str(tok)


def _text(decode: Decoder | None, tok: int | None) -> str | None:
    return None if decode is None or tok is None else decode([tok])


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
_SHOWN_ACROSS = {"generated_tokens": "gen", "rounds": "rounds", "drafted": "drafted",
                 "accepted": "accepted", "acceptance": "acc.", "restores": "restores",
                 "reprefill_tokens": "reprefill", "stray_tokens": "stray",
                 "decode_tps": "tok/s", "violations": "violations"}
"""A token comparison's columns: sessions of two engines differ most in their rounds."""


def print_turn_deltas(turns: Sequence[TurnDelta], a: str, b: str,
                      prompts: bool = False) -> None:
    """Per-turn table: output equality (and, from a token comparison, prompt equality:
    `prompts`) and the main metrics, a -> b."""
    t = Table(title=f"turns: {a} -> {b}", title_justify="left")
    heads, shown = (("same prompt",), _SHOWN_ACROSS) if prompts else ((), _SHOWN)
    for c in ("slot", "turn", *heads, "same output", *shown.values()):
        t.add_column(c, justify="right")
    for d in turns:
        same = {True: "yes", False: f"[red]no (token {d.first_token_diff})[/]",
                None: "-"}[d.same_output]
        prompt = ("-" if d.same_output is None else
                  {True: "yes", False: f"[red]no (pos {d.first_prompt_diff})[/]",
                   None: "ids unknown"}[d.same_prompt])
        cells = [_pair(*d.metrics.get(k, (None, None))) for k in shown]
        t.add_row(str(d.slot), str(d.turn), *((prompt,) if prompts else ()), same, *cells)
    console.print(t)


def _pair(a: Any, b: Any) -> str:
    fa, fb = value_text(a), value_text(b)
    return fa if fa == fb else f"{fa} -> [bold]{fb}[/]"


def value_text(v: Any) -> str:
    """A table cell's text for `v`: `-` for None, 4 significant digits for a float."""
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
    console.print(f"\n[bold {colour}]{f.severity.value}[/] [bold]{f.kind.value}[/] "
                  f"({f.place()})")
    console.print(f"  {escape(f.explanation)}")  # a log line's `[file.py:N]` is no markup
    console.print(f"  [bold]fix:[/] {f.fix}")
