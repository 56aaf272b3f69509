"""`specledger export S --format perfetto|chrome-trace`: the files parse back (with the
Perfetto protos, and as the Trace Event Format) and hold one slice per timed event, with
its begin and end, nested in its round and turn; findings as instants; the counters."""

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import CounterDescriptor, Trace, TrackEvent

from eventlog import open_db, scan_events
from eventlog.fold import STEPS
from eventlog.postmortem import postmortem_session
from fsm.event import Event
from specledger.cli.main import main
from specledger.export.timeline import ROUND_LEVEL

RUN = ["--backend", "sim", "--slots", "2", "--turns", "2", "--prompt-tokens", "64",
       "--question-tokens", "8", "--answer-tokens", "60", "--eog-policy", "legacy",
       "--replay-policy", "reverify", "--tie-flip-rate", "0.05"]


@pytest.fixture
def recorded(db_url: str, capsys: pytest.CaptureFixture[str]) -> tuple[str, int]:
    """A two-slot session with stray tokens, retries and livelocks, on both backends."""
    assert main(["run", "--db", db_url, "--json", *RUN]) == 0
    return db_url, json.loads(capsys.readouterr().out)["session"]


@pytest.fixture
def logged(recorded: tuple[str, int]) -> tuple[list[Event], list[str]]:
    """The session's events and its findings as instant names."""
    db, sid = recorded
    engine = open_db(db, False)
    found = postmortem_session(engine, sid).findings
    return list(scan_events(engine, sid)), [f"{f.severity.value}: {f.kind.value}"
                                             for f in found]


def _value(a: Any) -> Any:
    """A debug annotation's value as a plain Python value."""
    if a.dict_entries:
        return {e.name: _value(e) for e in a.dict_entries}
    if a.array_values:
        return [_value(v) for v in a.array_values]
    kind = a.WhichOneof("value")
    return json.loads(a.legacy_json_value) if kind == "legacy_json_value" else getattr(a, kind)


def _slices(stream: list[tuple[int, str, int, str, dict[str, Any]]]
            ) -> list[dict[str, Any]]:
    """Slices from (slot, kind B/E, ts, name, args) in file order, with their parents."""
    stacks: dict[int, list[dict[str, Any]]] = defaultdict(list)
    out = []
    for slot, kind, ts, name, args in stream:
        stack = stacks[slot]
        if kind == "B":
            s = {"slot": slot, "name": name, "begin": ts, "args": dict(args),
                 "parent": stack[-1] if stack else None}
            stack.append(s)
            out.append(s)
        else:
            s = stack.pop()
            s["end"] = ts
            s["args"].update(args)
            assert s["begin"] <= ts
            assert s["parent"] is None or s["parent"]["begin"] <= s["begin"]
    assert not any(stacks.values()), "slices left open"
    return out


def _check_slices(slices: list[dict[str, Any]], events: list[Event], per_ns: float) -> None:
    """One phase slice per timed event, at its times, in its round and turn."""
    phases = {s["args"]["seq"]: s for s in slices if "seq" in s["args"]}
    timed = [e for e in events if e.trigger in STEPS]
    assert len(phases) == len(timed) == sum(1 for s in slices if s["name"] in STEPS.values())
    for ev in timed:
        s = phases[ev.seq]
        assert (s["slot"], s["name"], s["args"]["trigger"]) == (ev.slot, STEPS[ev.trigger],
                                                               ev.trigger.value)
        assert s["end"] == pytest.approx(ev.t * 1e9 / per_ns, abs=2 / per_ns)
        assert s["begin"] == pytest.approx((ev.t - ev.duration) * 1e9 / per_ns, abs=2 / per_ns)
        for key in ev.payload.keys() & {"drafts", "position", "mode", "append"}:
            assert s["args"][key] == ev.payload[key]
        parent = s["parent"]
        if ev.trigger in ROUND_LEVEL:
            assert parent["name"] == f"round {ev.round}"
            assert (parent["args"]["turn"], parent["args"]["round"]) == (ev.turn, ev.round)
            assert parent["begin"] <= s["begin"] <= s["end"] <= parent["end"]
            parent = parent["parent"]
        assert parent["name"] == f"turn {ev.turn}" and parent["parent"] is None
        assert parent["begin"] <= s["begin"] <= s["end"] <= parent["end"]
    rounds = {(e.slot, e.turn, e.round) for e in timed if e.trigger in ROUND_LEVEL}
    assert sorted(rounds) == sorted((s["slot"], s["args"]["turn"], s["args"]["round"])
                                    for s in slices if s["name"].startswith("round "))


def _acceptance(events: list[Event]) -> dict[int, list[float]]:
    """Per slot, accepted / drafted at each commit of a round that drafted."""
    out: dict[int, list[float]] = defaultdict(list)
    drafted: dict[int, int] = {}
    for ev in events:
        if ev.trigger.value in ("verify", "decode"):
            drafted[ev.slot] = ev.payload.get("drafted", 0)
        elif ev.trigger.value == "commit" and drafted.get(ev.slot):
            out[ev.slot].append(ev.payload["accepted"] / drafted[ev.slot])
    return out


def test_perfetto_trace_parses_back_with_the_protos(
    recorded: tuple[str, int], logged: tuple[list[Event], list[str]], tmp_path: Path
) -> None:
    db, sid = recorded
    events, findings = logged
    out = tmp_path / "s.pftrace"
    assert main(["export", str(sid), "--db", db, "--format", "perfetto", "--out",
                 str(out)]) == 0
    trace = Trace.FromString(out.read_bytes())
    names, parents, units = {}, {}, {}
    for packet in trace.packet:
        if packet.HasField("track_descriptor"):
            d = packet.track_descriptor
            names[d.uuid], parents[d.uuid], units[d.uuid] = d.name, d.parent_uuid, d.counter.unit
    root = next(u for u, n in names.items() if not n)
    slot_of = {u: int(n.split()[1]) for u, n in names.items() if parents.get(u) == root}
    assert sorted(slot_of.values()) == [0, 1]
    stream, instants, counters = [], [], defaultdict(list)
    for packet in trace.packet:
        ev = packet.track_event
        if not packet.HasField("track_event"):
            continue
        args = {a.name: _value(a) for a in ev.debug_annotations}
        if ev.type == TrackEvent.TYPE_COUNTER:
            counters[names[ev.track_uuid]].append(ev.double_counter_value)
        elif ev.type == TrackEvent.TYPE_INSTANT:
            instants.append((ev.name, args["kind"]))
        else:
            kind = "B" if ev.type == TrackEvent.TYPE_SLICE_BEGIN else "E"
            stream.append((slot_of[ev.track_uuid], kind, packet.timestamp, ev.name, args))
    _check_slices(_slices(stream), events, per_ns=1)
    assert [name for name, _ in instants] == findings and findings
    for slot, values in _acceptance(events).items():
        assert counters[f"slot {slot} acceptance"] == pytest.approx(values)
    held = [u for u, n in names.items() if n.endswith("checkpoint bytes")]
    assert held and all(units[u] == CounterDescriptor.UNIT_SIZE_BYTES for u in held)
    begins = [e.payload["bytes"] for e in events if e.trigger.value == "begin"]
    assert sorted(v for u in held for v in counters[names[u]] if v) == sorted(begins)


_PHASES = {"B", "E", "i", "C", "M"}


def _check_trace_event_format(doc: dict[str, Any]) -> None:
    """The Trace Event Format's rules for the event types the export writes."""
    assert isinstance(doc["traceEvents"], list) and doc["displayTimeUnit"] in ("ms", "ns")
    last: dict[tuple[int, int], float] = {}
    for e in doc["traceEvents"]:
        assert e["ph"] in _PHASES and isinstance(e["pid"], int), e
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name", "thread_sort_index")
            assert isinstance(e["args"], dict)
            continue
        assert isinstance(e["ts"], int | float) and e["ts"] >= 0
        if e["ph"] == "C":
            assert e["name"] and all(isinstance(v, int | float) for v in e["args"].values())
            continue
        assert isinstance(e["tid"], int)
        if e["ph"] in ("B", "i"):
            assert isinstance(e["name"], str) and e["name"]
        if e["ph"] == "i":
            assert e["s"] in ("g", "p", "t")
        key = (e["pid"], e["tid"])
        assert e["ts"] >= last.get(key, 0.0), "B/E events must not go back in time"
        last[key] = e["ts"]


def test_chrome_trace_follows_the_trace_event_format(
    recorded: tuple[str, int], logged: tuple[list[Event], list[str]], tmp_path: Path
) -> None:
    db, sid = recorded
    events, findings = logged
    out = tmp_path / "s.json"
    assert main(["export", str(sid), "--db", db, "--format", "chrome-trace", "--out",
                 str(out)]) == 0
    doc = json.loads(out.read_text())
    _check_trace_event_format(doc)
    evs = doc["traceEvents"]
    threads = {e["tid"]: e["args"]["name"] for e in evs if e.get("name") == "thread_name"}
    assert threads == {0: "slot 0", 1: "slot 1"}
    stream = [(e["tid"], e["ph"], e["ts"], e.get("name", ""), e["args"]) for e in evs
              if e["ph"] in ("B", "E")]
    _check_slices(_slices(stream), events, per_ns=1000)
    assert [e["name"] for e in evs if e["ph"] == "i"] == findings
    counts = Counter(e["name"] for e in evs if e["ph"] == "C")
    for slot, values in _acceptance(events).items():
        assert counts[f"slot {slot} acceptance"] == len(values)


def test_a_session_export_needs_a_format_and_a_checkpoint_export_none(
    recorded: tuple[str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    db, sid = recorded
    for argv, needle in (([str(sid)], "needs --format perfetto|chrome-trace|parquet"),
                         ([str(sid), "shipped:draft", "--format", "parquet"], "no MODEL_DIR"),
                         (["gguf", "shipped:draft", "--format", "parquet"], "for a session")):
        assert main(["export", *argv, "--db", db]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], err
    assert main(["export", "99", "--db", db, "--format", "perfetto"]) == 1
    assert "no session 99" in capsys.readouterr().err
