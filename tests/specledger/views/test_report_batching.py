"""`specledger report` has a batching section for a session whose forwards were shared
(docs/events.md: batch_id, batch_slots, batch_tokens), and none for a sequential one."""

import re
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from eventlog import Recorder, create_session, open_db
from fsm.event import Event
from specledger.cli.main import main
from specledger.views.report import build_report
from tests.eventlog.sim import sim_events
from tests.viz.batched import as_batched


def _record(engine: Engine, events: list[Event], config: dict[str, Any]) -> int:
    sid = create_session(engine, config=config, backend="sim", seeds={}, code_version="test")
    # The hand-made fields are checked by the payload schema only once it names them.
    with Recorder(engine, sid, check_payloads=False) as rec:
        for ev in events:
            rec.append(ev)
            rec.end_unit()
    return sid


def test_batched_session_has_a_batching_section_and_sequential_none(tmp_path: Path) -> None:
    engine = open_db(str(tmp_path / "log.db"), create=True)
    events, config = sim_events(slots=3, answer_tokens=30)
    seq = _record(engine, events, config)
    batched = _record(engine, as_batched(events), {**config, "schedule": "batched"})
    html = build_report(engine, [batched])
    section = re.search(r"<h3>Batching</h3><p>(\d+) of (\d+) target forwards held more than "
                        r"one slot's rows .*?: ([\d.]+) slots per forward \(most (\d+)\), "
                        r"([\d.]+) tokens per forward", html)
    assert section, html[:2000]
    shared, total, mean_slots, most, _ = section.groups()
    assert 0 < int(shared) <= int(total) and int(most) == 3 and 1 < float(mean_slots) <= 3
    slot_rows = re.findall(r"<tr><td>(\d)</td><td>(\d+)</td><td>(\d+)</td><td>(\d+)</td>"
                           r"<td>([\d.]+)%</td></tr>", html)
    assert [r[0] for r in slot_rows] == ["0", "1", "2"]
    assert abs(sum(float(r[4]) for r in slot_rows) - 100) < 0.5
    assert "shared forwards:" in html  # the timeline's row
    assert "<td>batched</td><td>3</td>" in html  # the overview names the schedule
    plain = build_report(engine, [seq])
    assert "Batching" not in plain and "shared forwards" not in plain
    assert "<td>sequential</td><td>3</td>" in plain


def test_report_of_a_batched_run(tmp_path: Path) -> None:
    db = str(tmp_path / "log.db")
    small = ["--backend", "sim", "--turns", "1", "--prompt-tokens", "32", "--answer-tokens",
             "20", "--slots", "2", "--db", db, "--json"]
    assert main(["run", *small, "--schedule", "batched"]) == 0
    assert main(["run", *small]) == 0
    out = tmp_path / "r.html"
    assert main(["report", "1", "2", "--db", db, "--out", str(out), "--json"]) == 0
    html = out.read_text(encoding="utf-8")
    assert html.count("<h3>Batching</h3>") == 1  # session 1's; the sequential 2 has none
    assert html.index("<h3>Batching</h3>") < html.index("id='session-2'")
