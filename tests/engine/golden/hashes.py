"""The golden file: what the grid's sessions (grid.py) did, kept so that refactors keep it.

What it pins, and where:
- sim cells: every field of every event, times and state digests included, on any
  machine. The sim is pure CPython: integer hashing (the same on every 64-bit CPython)
  and floats from +, -, *, / only (IEEE 754 rounds each exactly; no libm call, no float
  sum), so its bits do not depend on the CPU. Stored: the sha256 of the rows (the value
  this grid has had since it began) and a 6-hex mark per row that finds the first
  changed event.
- torch cells: the exact part of every event (parts.py: header, token ids, counts,
  positions) on any machine, field by field; the float part (state digests, a
  state-truth violation's quotes) only where `machine` matches this machine (parts.py
  `machine_key`), since a forward's float bits differ between CPUs and ATen kernels.
  A changed target token is reported with the target's top-two gap there (near_tie.py).

Re-record only for an intended change of events (documented in docs/events.md), and say
why in the commit: `python -m tests.engine.golden.hashes --write` (OMP_NUM_THREADS=1)
rewrites the file from this checkout on this machine (the torch float part becomes this
machine's). Without --write it compares and prints each cell's first difference;
`--show CELL [--seq N]` prints a cell's events, to see a recorded sim event at the
commit that recorded it.
"""

import argparse
import json
from pathlib import Path
from typing import Any

from engine.config import RunConfig
from engine.session import MemoryJournal, Session
from fsm.event import Event
from fsm.payload_schema import check_events
from tests.engine.golden.check import (
    check_exact,
    check_floats,
    check_sim,
    record_sim,
    record_torch,
)
from tests.engine.golden.grid import grid, torch_grid
from tests.engine.golden.parts import machine_key, session_hash

GOLDEN = Path(__file__).with_name("event_hashes.json")
FORMAT = 2
ABOUT = ("Written by python -m tests.engine.golden.hashes --write (see its docstring): sim "
         "cells pinned whole on any machine; torch cells' exact parts on any machine, their "
         "float parts on `machine` only.")


def run(config: RunConfig) -> list[Event]:
    """The session's events; every payload must be its trigger's type (fsm/payloads.py)."""
    journal = MemoryJournal()
    Session(config, journal).run()
    problems = check_events(journal.events)
    assert not problems, problems[:5]
    return journal.events


def event_hash(config: RunConfig) -> str:
    """sha256 over the session's whole rows, in order (parts.py `session_hash`)."""
    return session_hash(run(config))


def load() -> dict[str, Any]:
    """The golden file."""
    doc = json.loads(GOLDEN.read_text())
    if doc.get("format") != FORMAT:
        raise ValueError(f"{GOLDEN}: format {doc.get('format')}, expected {FORMAT}: "
                         "re-record with python -m tests.engine.golden.hashes --write")
    return doc


Runs = dict[str, list[Event]]


def runs() -> tuple[Runs, Runs]:
    """The events of every sim cell and of every torch cell."""
    return ({name: run(cfg) for name, cfg in sorted(grid().items())},
            {name: run(cfg) for name, cfg in sorted(torch_grid().items())})


def record(sim: Runs, torch: Runs) -> dict[str, Any]:
    """The golden file's content for these runs, the torch floats as this machine's."""
    return {"about": ABOUT, "format": FORMAT,
            "sim": {name: record_sim(events) for name, events in sim.items()},
            "torch": {"machine": machine_key(),
                      "cells": {name: record_torch(events) for name, events in torch.items()}}}


def compare(old: dict[str, Any], sim: Runs, torch: Runs) -> dict[str, str]:
    """Each cell's first difference from the recording `old` ("same" where none; the
    torch floats compared only when `old` was recorded on this machine)."""
    out = {name: str(check_sim(old["sim"][name], events) or "same")
           if name in old["sim"] else "new cell" for name, events in sim.items()}
    same_machine = old["torch"]["machine"] == machine_key()
    for name, events in torch.items():
        was = old["torch"]["cells"].get(name)
        if was is None:
            out[name] = "new cell"
            continue
        floats = check_floats(was, events) if same_machine else "not compared"
        out[name] = f"exact part: {check_exact(was, events) or 'same'}; floats: {floats or 'same'}"
    return out


def dumps(value: Any, indent: str = "") -> str:
    """JSON with objects indented and a list of lists or strings one item a line (an
    event record, a float field, a line of row marks), so that a re-recording diffs line
    by line."""
    inner = indent + " "
    if isinstance(value, dict) and value:
        items = [f"{inner}{json.dumps(k)}: {dumps(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    if isinstance(value, list) and value and all(isinstance(v, list | str) for v in value):
        rows = [inner + json.dumps(v, separators=(",", ":")) for v in value]
        return "[\n" + ",\n".join(rows) + f"\n{indent}]"
    return json.dumps(value)


def show(name: str, seq: int | None) -> None:
    """Print a cell's events as rows, all of them or five either side of `seq`."""
    events = run({**grid(), **torch_grid()}[name])
    for ev in events:
        if seq is None or abs(ev.seq - seq) <= 5:
            print(json.dumps(ev.to_row(), default=str))


def main() -> None:
    """Compare the grid with the golden file, or record it with --write."""
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="re-record the golden file")
    ap.add_argument("--show", metavar="CELL", choices=sorted({**grid(), **torch_grid()}),
                    help="print a cell's events")
    ap.add_argument("--seq", type=int, help="with --show: only around this event")
    args = ap.parse_args()
    if args.show:
        show(args.show, args.seq)
        return
    sim, torch = runs()
    old = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    if old.get("format") == FORMAT:
        for name, said in compare(old, sim, torch).items():
            print(f"{name}: {said}")
    if args.write:
        GOLDEN.write_text(dumps(record(sim, torch)) + "\n")
        print(f"wrote {GOLDEN} (torch floats of {machine_key()})")


if __name__ == "__main__":
    main()
