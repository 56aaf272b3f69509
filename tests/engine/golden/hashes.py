"""Event hashes of a fixed grid of sessions: the behaviour that refactors must keep.

`python -m tests.engine.golden.hashes --write` records them (only when a change of the
event schema is intended, and documented in docs/events.md); the test compares."""

import argparse
import hashlib
import json
from pathlib import Path

from engine.config import BackendKind, EogPolicy, ReplayPolicy, RunConfig, Strategy
from engine.session import MemoryJournal, Session
from fsm.payload_schema import check_events, marked
from fsm.states import Trigger

GOLDEN = Path(__file__).with_name("event_hashes.json")
TIMING = ("t", "duration")
# Wall-clock figures inside the end-of-turn metrics (torch runs differ in these only).
WALL_METRICS = frozenset(k.removeprefix("metrics.") for k in marked("timing")[Trigger.END_TURN])


def grid() -> dict[str, RunConfig]:
    """Named sim configurations: every strategy x EOG policy x drafter, plus near-ties
    under reverify (livelocks) and early EOGs."""
    out: dict[str, RunConfig] = {}
    base = dict(backend=BackendKind.SIM, turns=3, prompt_tokens=96, question_tokens=12,
                answer_tokens=48, seed=3)
    for strategy in Strategy:
        for eog in EogPolicy:
            for drafter in ("synthetic", "ngram-mod", "none"):
                name = f"{strategy.value}/{eog.value}/{drafter}"
                out[name] = RunConfig(strategy=strategy, eog_policy=eog, drafter=drafter,
                                      **base)
        out[f"{strategy.value}/reverify-ties"] = RunConfig(
            strategy=strategy, replay_policy=ReplayPolicy.REVERIFY, tie_flip_rate=0.3,
            drafter="synthetic", **base)
        out[f"{strategy.value}/early-eog"] = RunConfig(
            strategy=strategy, eog_prob=0.05, drafter="synthetic", slots=2, **base)
    return out


def torch_grid() -> dict[str, RunConfig]:
    """Named torch configurations (the shipped model; hashed without timings)."""
    base = dict(backend=BackendKind.TORCH, turns=2, max_answer_tokens=24, seed=1)
    out = {f"torch/{s.value}/mtp": RunConfig(strategy=s, drafter="mtp", **base)
           for s in (Strategy.CHECKPOINT, Strategy.PER_TOKEN, Strategy.INPUT_REPLAY)}
    out["torch/checkpoint/ngram-mod/legacy"] = RunConfig(
        strategy=Strategy.CHECKPOINT, drafter="ngram-mod", eog_policy=EogPolicy.LEGACY, **base)
    return out


def event_hash(config: RunConfig, timing: bool = True) -> str:
    """sha256 over every event of the session's rows, in order; every payload must be its
    trigger's type (fsm/payloads.py)."""
    journal = MemoryJournal()
    Session(config, journal).run()
    problems = check_events(journal.events)
    assert not problems, problems[:5]
    h = hashlib.sha256()
    for e in journal.events:
        row = e.to_row()
        if not timing:
            for k in TIMING:
                row.pop(k)
            metrics = row["payload"].get("metrics")
            if isinstance(metrics, dict):
                row["payload"] = {**row["payload"], "metrics": {
                    k: v for k, v in metrics.items() if k not in WALL_METRICS}}
        h.update(json.dumps(row, sort_keys=True, default=str).encode())
    return h.hexdigest()


def hashes() -> dict[str, str]:
    """The grid's hashes by name."""
    out = {name: event_hash(cfg) for name, cfg in grid().items()}
    out.update({name: event_hash(cfg, timing=False) for name, cfg in torch_grid().items()})
    return out


def main() -> None:
    """Print the grid's hashes, or record them with --write."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--write", action="store_true")
    now = hashes()
    if ap.parse_args().write:
        GOLDEN.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    print(json.dumps(now, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
