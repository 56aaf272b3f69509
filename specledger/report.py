"""`specledger report S [S ...]`: one self-contained HTML file per call, with every graph
inline as SVG, the per-turn metrics, the postmortem findings, and (for two or more
sessions) the divergence tree and each session's diff against the first. No scripts, no
external resources: it opens anywhere, offline, years later."""

from datetime import UTC, datetime
from html import escape
from typing import Any

from sqlalchemy import Engine

from eventlog import get_session
from eventlog.diff import DiffMode, StreamDiff, diff_mode, diff_streams
from eventlog.postmortem import Finding, postmortem_session
from eventlog.reader import scan_events
from eventlog.series import interval_series, is_series
from eventlog.token_diff import TOKEN_TRIGGERS, Part
from eventlog.turns import fold_turns
from specledger.analysis_output import Decoders, shorten, value_text
from specledger.api import code_version
from specledger.graphs import GraphKind, graph_dot
from specledger.token_text import decoders
from viz import inline_svg
from viz.batching import FORWARD_TRIGGERS, BatchSummary, collect_forwards, summarize
from viz.series import series_svg

_TURN_COLUMNS = (("turn", "turn"), ("slot", "slot"), ("prompt_tokens", "prompt"),
                 ("generated_tokens", "gen"), ("drafted", "drafted"),
                 ("accepted", "accepted"), ("acceptance", "acc. rate"),
                 ("kept_tokens", "kept"), ("f_keep", "f_keep"),
                 ("reprefill_tokens", "reprefill"), ("restores", "restores"),
                 ("stray_tokens", "stray"), ("violations", "violations"),
                 ("decode_tps", "tok/s"))
_DIFF_METRICS = ("generated_tokens", "rounds", "drafted", "accepted", "restores",
                 "reprefill_tokens", "stray_tokens", "violations", "decode_tps")

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px;
       padding: 0 1em; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 2px solid #ddd; padding-bottom: 0.2em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ddd; padding: 0.2em 0.5em; text-align: right; }
th { background: #f3f5f8; } td.l, th.l { text-align: left; }
.fig { overflow-x: auto; margin: 0.5em 0 1.5em; border: 1px solid #eee; padding: 0.5em; }
.fit svg { max-width: 100%; height: auto; }
.finding { border-left: 5px solid #999; background: #fafafa; padding: 0.4em 0.8em;
           margin: 0.6em 0; }
.finding.error { border-color: #c0392b; } .finding.warning { border-color: #e0a000; }
.finding.info { border-color: #2a7ab0; }
.sev { font-weight: bold; text-transform: uppercase; font-size: 0.85em; }
.error .sev { color: #c0392b; } .warning .sev { color: #a07000; } .info .sev { color: #2a7ab0; }
.muted { color: #777; } .bad { color: #c0392b; font-weight: bold; } code { font-size: 0.95em; }
"""


def build_report(engine: Engine, sessions: list[int]) -> str:
    """The whole HTML document for `sessions` (the first is the baseline of comparisons)."""
    for sid in sessions:
        get_session(engine, sid)
    body = [f"<h1>specledger report</h1><p class='muted'>sessions "
            f"{escape(', '.join(map(str, sessions)))}; generated "
            f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC by specledger "
            f"{escape(code_version())}</p>"]
    postmortems = {sid: postmortem_session(engine, sid) for sid in sessions}
    body.append(_overview(engine, sessions, postmortems))
    for sid in sessions:
        body.append(_session(engine, sid, postmortems[sid].findings))
    if len(sessions) > 1:
        body.append(_comparison(engine, sessions))
    body.append("<h2>The round machine</h2>" + _figure(engine, GraphKind.MACHINE, [], "m"))
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>specledger report: {escape(', '.join(map(str, sessions)))}</title>"
            f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>\n")


def _overview(engine: Engine, sessions: list[int], postmortems: dict[int, Any]) -> str:
    head = ["session", "status", "events", "backend", "strategy", "eog", "replay", "drafter",
            "schedule", "slots", "parent", "errors", "warnings"]
    rows = []
    for sid in sessions:
        info, counts = get_session(engine, sid), postmortems[sid].counts()
        c = info.config
        rows.append([sid, info.status.value, info.events, info.backend, c.get("strategy"),
                     c.get("eog_policy"), c.get("replay_policy"), c.get("drafter"),
                     c.get("schedule", "sequential"), c.get("slots", 1),
                     info.parent_id if info.parent_id is not None else "",
                     _flag(counts["error"]), counts["warning"]])
    return "<h2>Sessions</h2>" + _table(head, rows)


def _session(engine: Engine, sid: int, findings: list[Finding]) -> str:
    info = get_session(engine, sid)
    if is_series(info.config):
        return _series(engine, sid, info.config, findings)
    turns = [r.metrics for r in fold_turns(scan_events(engine, sid)).values() if r.metrics]
    rows = [[value_text(m.get(key)) for key, _ in _TURN_COLUMNS] for m in turns]
    config = ", ".join(f"{k}={v}" for k, v in info.config.items())
    out = [f"<h2 id='session-{sid}'>Session {sid}</h2>",
           f"<p class='muted'><code>{escape(config)}</code></p>",
           "<h3>Turns</h3>", _table([label for _, label in _TURN_COLUMNS], rows)]
    batching = summarize(collect_forwards(scan_events(engine, sid, triggers=FORWARD_TRIGGERS)))
    if batching is not None:
        out.append(_batching(batching))
    out.append("<h3>Findings</h3>")
    out.append("".join(_finding(f) for f in findings) or "<p>No findings: every invariant "
               "held and no waste pattern was seen.</p>")
    out.append("<h3>Round state machine as walked</h3>"
               + _figure(engine, GraphKind.FSM, [sid], f"f{sid}"))
    out.append("<h3>Round timeline</h3>" + _figure(engine, GraphKind.TIMELINE, [sid], f"t{sid}"))
    return "".join(out)


def _series(engine: Engine, sid: int, config: dict[str, Any],
            findings: list[Finding]) -> str:
    """An interval session (a vLLM or SGLang log): its series drawn over time, then the
    findings."""
    points = interval_series(engine, sid)
    shown = ", ".join(f"{k}={config.get(k)}" for k in ("engine", "version", "model",
                                                        "drafter", "draft_max"))
    charts = series_svg([p.t for p in points], [dict(p.interval) for p in points])
    return "".join([f"<h2 id='session-{sid}'>Session {sid}</h2>",
                    f"<p class='muted'><code>{escape(shown)}</code></p>",
                    f"<h3>Interval series ({len(points)} intervals)</h3>",
                    *(f"<div class='fig fit'>{c}</div>" for c in charts),
                    "<h3>Findings</h3>",
                    "".join(_finding(f) for f in findings) or "<p>No findings.</p>"])


def _batching(s: BatchSummary) -> str:
    """The batched schedule's forwards: how many were shared, slots and tokens per
    forward, and each slot's part (docs/events.md: batch_id, batch_slots, batch_tokens)."""
    text = (f"<p>{s.shared} of {s.forwards} target forwards held more than one slot's rows "
            f"({100 * s.shared_share:.1f}%): {s.mean_slots:.2f} slots per forward (most "
            f"{s.max_slots}), {s.mean_tokens:.1f} tokens per forward; {s.shared_rows} of "
            f"{s.rows} slot rows rode in a shared forward. The timeline's shared-forwards "
            "row shows which.</p>")
    rows = [[x.slot, x.forwards, x.shared, x.tokens, f"{100 * x.token_share:.1f}%"]
            for x in s.slots]
    return ("<h3>Batching</h3>" + text
            + _table(["slot", "forwards", "shared", "tokens", "token share"], rows))


def _finding(f: Finding) -> str:
    place = f.place()
    numbers = ", ".join(f"{k}: {v}" for k, v in f.numbers.items()
                        if not isinstance(v, list | dict))
    return (f"<div class='finding {f.severity.value}'><span class='sev'>"
            f"{f.severity.value}</span> <b>{escape(f.kind.value)}</b> "
            f"<span class='muted'>({escape(place)})</span><p>{escape(f.explanation)}</p>"
            f"<p><b>Fix:</b> {escape(f.fix)}</p><p class='muted'>{escape(numbers)}</p></div>")


def _comparison(engine: Engine, sessions: list[int]) -> str:
    base = sessions[0]
    out = ["<h2>Comparison</h2>",
           _figure(engine, GraphKind.DIVERGENCE, sessions, "d")]
    info = get_session(engine, base)
    for other in sessions[1:]:
        info_other = get_session(engine, other)
        mode = diff_mode(info, info_other)
        only = TOKEN_TRIGGERS if mode is DiffMode.TOKENS else None
        diff = diff_streams(scan_events(engine, base, triggers=only),
                            scan_events(engine, other, triggers=only), mode=mode)
        out.append(f"<h3>Session {other} against session {base}</h3>"
                   + _diff(diff, decoders(info, info_other)))
    return "".join(out)


def _diff(diff: StreamDiff, decode: Decoders) -> str:
    d = diff.divergence
    if diff.tokens is not None:
        text = _token_text(diff, decode)
    elif d is None:
        text = f"<p>No divergence: all {diff.compared} events agree (timings aside).</p>"
    else:
        text = (f"<p>First divergence at <b>seq {d.seq}</b> (slot {d.slot}, turn {d.turn}, "
                f"round {d.round}): <code>{escape(d.field)}</code> expected "
                f"<code>{escape(str(shorten(d.expected)))}</code>, actual "
                f"<code>{escape(str(shorten(d.actual)))}</code>.</p>")
    tokens = diff.tokens is not None
    head = ["slot", "turn", *(["same prompt"] if tokens else []), "same output",
            *_DIFF_METRICS]
    rows = []
    for t in diff.turns:
        same = {True: "yes", False: _flag(f"no (token {t.first_token_diff})"),
                None: "-"}[t.same_output]
        prompt = ("-" if t.same_output is None else
                  {True: "yes", False: _flag(f"no (position {t.first_prompt_diff})"),
                   None: "ids unknown"}[t.same_prompt])
        rows.append([t.slot, t.turn, *([prompt] if tokens else []), same,
                     *(_pair(*t.metrics.get(k, (None, None))) for k in _DIFF_METRICS)])
    return text + _table(head, rows)


def _token_text(diff: StreamDiff, decode: Decoders) -> str:
    """The token comparison of two sessions of different backends, as a paragraph."""
    assert diff.tokens is not None
    t, d = diff.tokens, diff.tokens.first
    if d is None:
        return (f"<p>Compared token by token: the committed tokens agree ({t.turns} turns, "
                f"{t.answer_tokens} answer tokens).</p>")
    ids = []
    for side, tok in enumerate((d.expected, d.actual)):
        dec = decode[side]
        ids.append("end" if d.ended(side) else "not in the log" if tok is None
                   else f"{tok} {dec([tok])!r}" if dec is not None else str(tok))
    where = (f"prompt position {d.position}" if d.part is Part.PROMPT
             else f"answer token {d.index} (sequence positions {d.position}, "
                  f"{d.actual_position})")
    return (f"<p>Compared token by token; first differing token: <b>slot {d.slot}, turn "
            f"{d.turn}, {escape(where)}</b>: expected <code>{escape(ids[0])}</code>, actual "
            f"<code>{escape(ids[1])}</code>.</p>")


def _figure(engine: Engine, kind: GraphKind, sessions: list[int], prefix: str) -> str:
    # Timelines keep their scale (3 px per token) and scroll; the other graphs fit the page.
    fit = "" if kind is GraphKind.TIMELINE else " fit"
    return (f"<div class='fig{fit}'>{inline_svg(graph_dot(engine, kind, sessions), prefix)}"
            "</div>")


def _table(head: list[str], rows: list[list[Any]]) -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{_html(v)}</td>" for v in row) + "</tr>"
                   for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


class _Markup(str):
    """Text that is already HTML."""


def _html(v: Any) -> str:
    return v if isinstance(v, _Markup) else escape(str(v))


def _flag(v: Any) -> str:
    return _Markup(f"<span class='bad'>{escape(str(v))}</span>") if v else str(v)


def _pair(a: Any, b: Any) -> str:
    ca, cb = value_text(a), value_text(b)
    return ca if ca == cb else _Markup(f"{escape(ca)} &rarr; <b>{escape(cb)}</b>")
