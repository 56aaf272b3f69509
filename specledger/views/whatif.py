"""A session's rounds replayed through a cost profile (`specledger whatif`): the
forecast per mode, the modes that extrapolate past the profile's reach, and the document
printed as JSON or as text."""

from collections.abc import Iterable
from typing import Any

from adapters.llama.calibration.reach import (
    Reach,
    drafter_outside,
    sizes_outside,
    states_outside,
)
from adapters.llama.server.options import SPEC_TYPES, parse_drafters
from engine.errors import ConfigError
from engine.sim.costs import CostProfile, profile_calibration
from engine.sim.forecast import Forecast, Mode, Round, placed
from fsm.event import Event
from fsm.states import Trigger
from specledger.views import output

_LABEL = {Mode.PLAIN: "plain decoding", Mode.HOST: "speculation, host checkpoints",
          Mode.DEVICE: "speculation, on-device checkpoints",
          Mode.ROLLBACK: "speculation, per-position states (n_rs_seq)"}


def session_rounds(events: Iterable[Event]) -> list[Round]:
    """Every committed round of a session's log: the context it started from, the drafts
    its verify checked (0 for a plain step) and the drafts it kept. A plain commit of
    several tokens (an imported log's merged steps) counts as that many plain steps."""
    drafted: dict[int, int] = {}
    rounds = []
    for e in events:
        if e.trigger is Trigger.VERIFY:
            drafted.setdefault(e.slot, int(e.payload["batch"]) - 1)
        elif e.trigger is Trigger.DECODE:
            drafted.setdefault(e.slot, 0)
        elif e.trigger is Trigger.COMMIT:
            n = len(e.payload["append"])
            start = int(e.payload["position"]) - n
            k = drafted.pop(e.slot, 0)
            if k == 0:
                rounds += [Round(ctx=start + i, drafted=0, accepted=0) for i in range(n)]
            elif n:
                rounds.append(Round(ctx=start, drafted=k,
                                    accepted=min(int(e.payload["accepted"]), k)))
    return rounds


def profile_reach(name: str) -> Reach | None:
    """The reach of a profile `specledger calibrate` fitted (None: any other profile)."""
    block = profile_calibration(name) or {}
    reach = (block.get("calibrate") or {}).get("reach")
    return Reach.from_dict(reach) if isinstance(reach, dict) else None


def _sizes(rounds: list[Round], mode: Mode) -> list[int]:
    """The batch of every target forward `mode` runs for the pattern: plain decoding one
    token each; speculation a verify of the drafts and the next token, and with host or
    device checkpoints a replay of the kept tokens after a reject."""
    if mode is Mode.PLAIN:
        return [1] * sum(r.accepted + 1 for r in rounds)
    verifies = [r.drafted + 1 for r in rounds]
    if mode is Mode.ROLLBACK:
        return verifies
    return verifies + [r.accepted + 1 for r in rounds if r.accepted < r.drafted]


ON_DEVICE = ("on-device checkpoints: no llama-server log measures them (the copy is the "
             "profile's state bytes at a rate the log never gave)")


def mode_outside(reach: Reach, rounds: list[Round], drafters: list[str]) -> dict[Mode, list[str]]:
    """Per mode, why its forecast is an extrapolation of the fit log's reach (empty:
    inside): forwards of sizes it never measured, a drafter it never ran, checkpoints it
    never saved or restored, rounds of a kind it never ran, another count of per-position
    states."""
    rejected = any(r.accepted < r.drafted for r in rounds)
    kept = max((r.drafted for r in rounds), default=0)
    out: dict[Mode, list[str]] = {}
    for mode in Mode:
        plain = mode is Mode.PLAIN
        clauses = [sizes_outside(reach, _sizes(rounds, mode)),
                   states_outside(reach, kept if mode is Mode.ROLLBACK else 0)]
        if plain:
            clauses.append(None if reach.plain else
                           "plain rounds: the fit log's were all speculative")
        else:
            clauses += [drafter_outside(reach, d) for d in drafters]
            clauses.append(None if reach.speculative else
                           "speculative rounds: the fit log ran none")
        if mode is Mode.HOST:
            clauses.append(None if reach.saves else
                           "checkpoints: the fit log saved none (charged its save_s, 0)")
            clauses.append(None if reach.restores or not rejected else
                           "restores: the fit log restored none")
        if mode is Mode.DEVICE:
            clauses.append(ON_DEVICE)
        out[mode] = [c for c in clauses if c is not None]
    return out


def llama_names(drafter: str) -> list[str]:
    """llama.cpp's names of a session's drafter chain (ours, comma-separated; a name we
    do not know is kept as it is)."""
    if not drafter or drafter == "none":
        return []
    try:
        return [SPEC_TYPES[d] for d in parse_drafters(drafter) if d in SPEC_TYPES]
    except ConfigError:
        return [d.strip() for d in drafter.split(",")]


def document(session: int, profile: CostProfile, rounds: list[Round], f: Forecast,
             draft_share: float, draft_max: int | None,
             beyond: dict[Mode, list[str]] | None = None) -> dict[str, Any]:
    """What `--json` prints (`beyond`: each mode's reasons it is an extrapolation of the
    profile's log; None: the profile carries no reach)."""
    return {"session": session, "profile": profile.name, "draft_max": draft_max,
            "rounds": len(rounds), "tokens": f.tokens,
            "drafted": sum(r.drafted for r in rounds),
            "accepted": sum(r.accepted for r in rounds), "draft_share": draft_share,
            "checkpoint_ms": 1e3 * placed(profile, Mode.HOST).checkpoint_s(),
            "checkpoint_tensors": profile.state_tensors,
            "tok_s": {m.value: f.tok_s(m) for m in Mode},
            "speedup": {m.value: f.speedup(m) for m in Mode},
            "outside": None if beyond is None else {m.value: beyond[m] for m in Mode}}


def print_document(doc: dict[str, Any]) -> None:
    """The forecast's document as text: tokens/s per mode, marked where it extrapolates."""
    c = output.console
    acc = doc["accepted"] / doc["drafted"] if doc["drafted"] else 0.0
    cap = f", drafts capped at {doc['draft_max']}" if doc["draft_max"] is not None else ""
    c.print(f"session {doc['session']} on {doc['profile']}: {doc['rounds']} rounds, "
            f"{doc['tokens']} tokens, {doc['accepted']}/{doc['drafted']} drafts kept "
            f"({100 * acc:.0f}%){cap}; drafting {doc['draft_share']:g} of a forward per "
            f"drafted token", markup=False, highlight=False)
    c.print(f"one checkpoint copy on the host path: {doc['checkpoint_ms']:.2f} ms "
            f"({doc['checkpoint_tensors']} tensor copies)",
            markup=False, highlight=False)
    beyond = doc["outside"] or {}
    for m in Mode:
        mark = "  (extrapolated)" if beyond.get(m.value) else ""
        c.print(f"  {_LABEL[m]:<46} {doc['tok_s'][m.value]:>10.1f} tok/s  "
                f"{doc['speedup'][m.value]:.2f}x{mark}", markup=False, highlight=False)
        for clause in beyond.get(m.value, []):
            c.print(f"      beyond the profile's log: {clause}", markup=False, highlight=False)
    if doc["speedup"][Mode.HOST.value] < 1.0:
        c.print(f"[bold red]speculation loses on {doc['profile']}[/] with host checkpoints")
