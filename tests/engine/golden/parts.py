"""An event's two parts: what must be the same on every machine, and what is bits of one
machine's float arithmetic.

The exact part is the event's header (seq, slot, turn, round, trigger, source, dest) and
its payload less the fields below: token ids, counts, positions, sizes, modes, and the
ratios of counts (f_keep, acceptance: one IEEE division of two integers, the same
everywhere). The float part is what a torch forward's rounding decides bit by bit: the
fields the schema marks as digests (fsm/payloads.py) and a state-truth violation's
message and details, which quote two digests and the audit's float error. Timings (`t`,
`duration`, the fields marked timing) are in neither: the wall clock is never compared.
"""

import hashlib
import json
import os
import platform
from pathlib import Path
from typing import Any

from fsm.event import Event
from fsm.invariants import Invariant
from fsm.payload_schema import marked
from fsm.states import RoundState, Trigger

_TIMING = marked("timing")
_DIGEST = marked("digest")
_STATE_TRUTH_QUOTES = frozenset({"message", "details"})

Record = list[Any]
"""An event's exact part: [seq, slot, turn, round, trigger, source, dest, payload]."""

Floats = list[list[Any]]
"""An event's float part: [[seq, payload path, value], ...]."""


def _device_paths(ev: Event) -> frozenset[str]:
    if (ev.trigger is Trigger.INVARIANT_VIOLATION
            and ev.payload.get("invariant") == Invariant.STATE_TRUTH.value):
        return _STATE_TRUTH_QUOTES
    return _DIGEST[ev.trigger]


def split(ev: Event) -> tuple[Record, Floats]:
    """The event's exact part and its float part (timings dropped from both)."""
    floats: Floats = []
    payload = _without(ev.payload, _TIMING[ev.trigger], _device_paths(ev), "",
                       lambda path, value: floats.append([ev.seq, path, value]))
    return ([ev.seq, ev.slot, ev.turn, ev.round, ev.trigger.value, ev.source.value,
             ev.dest.value, payload], floats)


def _without(payload: dict[str, Any], timing: frozenset[str], device: frozenset[str],
             prefix: str, keep: Any) -> dict[str, Any]:
    """`payload` less the timing paths and the device paths, which go to `keep`."""
    out = {}
    for key, value in payload.items():
        path = prefix + key
        if path in timing:
            continue
        if path in device:
            keep(path, value)
        elif isinstance(value, dict) and any(p.startswith(path + ".")
                                             for p in timing | device):
            out[key] = _without(value, timing, device, path + ".", keep)
        else:
            out[key] = value
    return out


def rebuild(record: Record, floats: Floats) -> Event:
    """The event whose parts are `record` and `floats` (timings zero): what `split` took
    apart, for checking a recorded session against itself."""
    seq, slot, turn, rnd, trigger, source, dest, payload = record
    payload = json.loads(json.dumps(payload))
    for _, path, value in floats:
        *parents, last = path.split(".")
        node = payload
        for key in parents:
            node = node[key]
        node[last] = value
    return Event(seq, slot, turn, rnd, Trigger(trigger), RoundState(source),
                 RoundState(dest), 0.0, 0.0, payload)


def row_hash(ev: Event) -> str:
    """sha256 of one event's whole row (timings and digests included), as JSON."""
    return hashlib.sha256(_row_json(ev)).hexdigest()


def _row_json(ev: Event) -> bytes:
    return json.dumps(ev.to_row(), sort_keys=True, default=str).encode()


def session_hash(events: list[Event]) -> str:
    """sha256 over every event's whole row, in order (the grid's hash since its start)."""
    h = hashlib.sha256()
    for ev in events:
        h.update(_row_json(ev))
    return h.hexdigest()


_KERNEL_ENV = ("MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")


def machine_key() -> dict[str, str]:
    """What decides a torch forward's float bits here: the CPU and its vector ISA, the
    kernels ATen dispatches to (ATEN_CPU_CAPABILITY can lower them), the settings that
    lower MKL's and oneDNN's, and torch's build. The libraries pick their own code paths
    by CPU, so the capability alone does not name the bits."""
    import torch

    return {"cpu": _cpu_name(), "isa": _hardware_isa(), "arch": platform.machine(),
            "aten_capability": torch.backends.cpu.get_cpu_capability(),
            "kernel_env": " ".join(f"{k}={os.environ[k]}" for k in _KERNEL_ENV
                                   if k in os.environ),
            "torch": f"{torch.__version__} ({torch.version.git_version[:12]})"}


def _cpuinfo() -> dict[str, str]:
    path = Path("/proc/cpuinfo")
    if not path.exists():
        return {}
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out.setdefault(key.strip(), value.strip())
    return out


def _cpu_name() -> str:
    info = _cpuinfo()
    name = " ".join(filter(None, (info.get("vendor_id"), info.get("model name"))))
    return name or platform.processor() or "unknown"


def _hardware_isa() -> str:
    flags = _cpuinfo().get("flags", "").split()
    return " ".join(sorted(f for f in flags if f.startswith(("avx", "amx", "fma")))) or "?"
