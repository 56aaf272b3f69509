"""The sim's cost model: plausible times for forwards, state copies and recurrences.

A forward is bounded by reading the weights (decode is memory bound) or by compute
(prefill is compute bound), plus reading the KV cache of the attention layers. State
operations move the recurrent + conv state through memory. That is the GPU view, and the
built-in profiles use nothing else.

On a CPU running the model through torch one operator at a time, the time goes
elsewhere: every operator costs a fixed dispatch overhead, so a forward is a fixed cost
plus a cost per token, a one-token forward takes the recurrent step while a longer one
sets up the chunked form, and replaying the recurrence steps it position by position in
small operators. A few optional terms say so (`token_s`, `multi_token_s`,
`state_step_s`, `recurrence_launch_s`); their defaults (0, None) leave the GPU view's
times unchanged to the last bit, and `specledger bench calibration` fits them. A profile
fitted from a llama-server log (`specledger calibrate`) gives instead the forward's cost
at the batch sizes the log measured (`forward_knots`, `forward_costs`), a curve through
them: the cost per token falls from a verify of a few tokens to a prompt's hundreds.

Where a whole-state checkpoint lives is a term too (`checkpoint_place`, `Placement`).
llama.cpp keeps its speculative and context checkpoints in host memory and copies the
recurrent state there and back every round unless `LLAMA_STATE_SEQ_FLAGS_ON_DEVICE` is
set; per-position states (`n_rs_seq`, our `per_token`) stay on the device. A host copy
crosses PCIe (or is a memcpy on a CPU) at `host_bw` after a fixed `host_copy_s`; on
unified memory it runs at the memory's own copy rate, still paying the fixed cost. A
speculative round may also pay a host synchronisation (`round_sync_s`: the engine reads
the verify's logits back and decides on the host). `ROUND_COPIES` says which copies each
strategy's round makes. The defaults (device, 0) leave every time unchanged to the bit,
and `specledger bench calibration --backend llama` fits them to llama-server.

llama.cpp's host path (`llama_state_seq_get_data_ext` without the on-device flag) reads
the state out tensor by tensor, each read a blocking copy that waits for the device: a
checkpoint costs `state_tensors` x `tensor_copy_s` beside its bytes, which is what makes
it cost hundreds of milliseconds on some backends whatever the bandwidth
(docs/design.md#llama-checkpoints). Both default to 0.

Profiles are named so a session records which one produced its times, and all of them live
as JSON in `engine/sim/profiles/`: the built-in ones (`BUILT_IN`, derived from
specifications), the published ones (`engine/sim/published.py`) and the measured ones
(`specledger bench calibration` writes them).
"""

import itertools
import json
import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import MISSING, asdict, dataclass, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from engine.errors import ConfigError
from engine.files import write_file

PROFILE_DIR = Path(__file__).parent / "profiles"
"""Where JSON profiles live: `<name>.json`, found by `get_profile` after the built-ins."""


class Placement(StrEnum):
    """Where whole-state checkpoints (speculative and context) are kept."""

    DEVICE = "device"  # beside the live state: a device-to-device copy at copy_bw
    HOST = "host"  # host memory: over PCIe (a GPU) or a memcpy (a CPU) at host_bw
    UNIFIED = "unified"  # one memory for host and device (an APU): copy_bw, host-side cost


@dataclass(frozen=True)
class RoundCopies:
    """The state copies one speculative round of a strategy makes: whole-state
    checkpoints saved at `begin` and restored on a reject (at the checkpoint placement),
    and per-position states selected on a reject (on the device)."""

    saves: int
    restores_on_reject: int
    selects_on_reject: int


ROUND_COPIES: dict[str, RoundCopies] = {
    "checkpoint": RoundCopies(saves=1, restores_on_reject=1, selects_on_reject=0),
    "per_token": RoundCopies(saves=0, restores_on_reject=0, selects_on_reject=1),
    "input_replay": RoundCopies(saves=0, restores_on_reject=0, selects_on_reject=0),
    "none": RoundCopies(saves=0, restores_on_reject=0, selects_on_reject=0),
}
"""Per strategy, the copies of one round (llama.cpp: the n-gram types, without
`n_rs_seq`, are `checkpoint`; draft-mtp with `n_rs_seq` is `per_token`)."""


@dataclass(frozen=True)
class CostProfile:
    """Hardware x model constants, in bytes, bytes/s, FLOP and FLOP/s."""

    name: str
    weight_bytes: float
    hbm_bw: float
    flops_per_token: float
    peak_flops: float
    kv_bytes_per_token: float
    state_bytes: float
    copy_bw: float
    launch_s: float
    description: str
    # GDN inputs kept per verified position by `input_replay` (q, k, v, g, beta, bf16)
    input_bytes_per_token: float = 0.0
    # Terms of operator-bound hardware (a CPU); the defaults leave them out.
    # Per token of a forward, beyond bandwidth and FLOPs: the operators whose work grows
    # with the batch but is dispatch-bound (norms, activations, per-position sampling).
    token_s: float = 0.0
    # Once per forward of more than one token: the chunked form of the recurrence (its
    # masks, triangular solve, chunk loop) that a one-token forward skips for one step.
    multi_token_s: float = 0.0
    # Per position stepped outside a forward: the recurrence run one position at a time
    # (replay of recorded inputs; the per-position states a `per_token` verify captures),
    # a few small operators per layer whatever the bandwidth.
    state_step_s: float = 0.0
    # The fixed cost of a recurrence replay; None: one forward launch (`launch_s`). On a
    # CPU a replay runs a handful of operators, far fewer than a forward.
    recurrence_launch_s: float | None = None
    # Where whole-state checkpoints live (a `Placement` value); the default: the device.
    checkpoint_place: str = Placement.DEVICE.value
    # Bytes/s of a copy between device and host memory; None: copy_bw.
    host_bw: float | None = None
    # Fixed cost of one checkpoint copy off the device: the synchronisation before it and
    # the state read out (or written back) tensor by tensor.
    host_copy_s: float = 0.0
    # Per speculative round (a verify of drafts): the host synchronisation that reads the
    # verify's results back and runs the accept decision.
    round_sync_s: float = 0.0
    # llama.cpp's host path copies a checkpoint one tensor at a time, each copy a blocking
    # read (or write) with its own synchronisation: the tensors of one recurrent state
    # (conv + recurrent state per recurrent layer) and the cost of each such copy.
    state_tensors: int = 0
    tensor_copy_s: float = 0.0
    # llama.cpp's per-position recurrent states (`n_rs_seq`): each kept position adds this
    # to every forward's fixed cost (a conv-state copy per recurrent layer, on the graph);
    # `launch_s` (or the measured curve) is a forward's keeping `launch_rs_seq` of them
    # (`keeping` moves it).
    rs_seq_s: float = 0.0
    launch_rs_seq: int = 0
    # A forward's cost measured at batch sizes (ascending) and interpolated between them:
    # above the largest the last slope goes on, below the smallest it is charged in
    # proportion to its tokens (adapters/llama/calibration/curve.py). Empty: no such curve.
    forward_knots: tuple[int, ...] = ()
    forward_costs: tuple[float, ...] = ()

    def keeping(self, n_rs_seq: int) -> "CostProfile":
        """This profile for a server whose target keeps `n_rs_seq` per-position states: the
        forward's fixed cost moved (the measured curve's, where it has one)."""
        shift = (n_rs_seq - self.launch_rs_seq) * self.rs_seq_s
        if self.forward_knots:
            return replace(self, launch_rs_seq=n_rs_seq,
                           forward_costs=tuple(max(c + shift, 0.0) for c in self.forward_costs))
        return replace(self, launch_s=max(self.launch_s + shift, 0.0), launch_rs_seq=n_rs_seq)

    def forward_s(self, batch: int, ctx: int) -> float:
        """One target forward over `batch` new tokens with `ctx` tokens already cached."""
        return self._rows_forward_s(((batch, ctx),))

    def _rows_forward_s(self, rows: Sequence[tuple[int, int]]) -> float:
        """One forward over sequences' rows, each `(tokens, ctx)`: the weights are read
        once and the fixed costs paid once, compute and the per-token terms grow with all
        the tokens, each row reads its own KV."""
        # A plain loop: every prefill chunk, replay and verify of the sim comes here.
        tokens, kv_read, multi = 0, 0.0, False
        for n, ctx in rows:
            tokens += n
            kv_read += (ctx + n) * self.kv_bytes_per_token / self.hbm_bw
            multi = multi or n > 1  # a row of several tokens runs the chunked recurrence
        weights = self.weight_bytes / self.hbm_bw
        compute = tokens * self.flops_per_token / self.peak_flops
        fixed = self.launch_s + (self.multi_token_s if multi else 0.0)
        curve = self.curve_s(tokens) if self.forward_knots else 0.0
        return fixed + curve + tokens * self.token_s + max(weights, compute) + kv_read

    def curve_s(self, tokens: int) -> float:
        """The measured curve's cost of a forward of `tokens` (`forward_knots`)."""
        knots, costs = self.forward_knots, self.forward_costs
        if tokens <= knots[0] or len(knots) == 1:
            return costs[0] * min(tokens / knots[0], 1.0)
        i = min(bisect_left(knots, tokens), len(knots) - 1)
        a, b, ca, cb = knots[i - 1], knots[i], costs[i - 1], costs[i]
        return ca + (cb - ca) * (tokens - a) / (b - a)

    def copy_s(self, n_states: float = 1.0) -> float:
        """Copying `n_states` whole recurrent + conv states device to device."""
        return n_states * self.state_bytes / self.copy_bw

    def verify_s(self, batch: int, ctx: int) -> float:
        """A verify forward: a speculative one (drafts: `batch` > 1) also pays the
        round's host synchronisation."""
        return self.batch_verify_s(((batch, ctx),))

    def batch_verify_s(self, rows: Sequence[tuple[int, int]]) -> float:
        """One verify forward over several sequences' rows, each `(tokens, ctx)`
        (`_rows_forward_s`), and one host synchronisation for every speculative row; a
        single row is `verify_s`, so a batch of one changes no time."""
        forward = self._rows_forward_s(rows)
        return forward + self.round_sync_s if any(n > 1 for n, _ in rows) else forward

    def plain_decode_s(self, ctx: int, rounds: int) -> float:
        """Plain decoding of `rounds` tokens one forward each, from `ctx` cached tokens:
        what a turn would take without speculation (its first token comes from the
        prefill, so a turn of `n` tokens decodes `n - 1`); a server without a drafter keeps
        no per-position states."""
        plain = self.keeping(0)
        return sum(plain.verify_s(1, ctx + i) for i in range(rounds))

    def checkpoint_s(self) -> float:
        """Saving or restoring one whole-state checkpoint where `checkpoint_place` keeps
        it: a device copy, a host copy at `host_bw`, or a copy within unified memory."""
        place = Placement(self.checkpoint_place)
        if place is Placement.DEVICE:
            return self.copy_s()
        host = place is Placement.HOST and self.host_bw is not None
        bw = self.host_bw if host else self.copy_bw
        per_tensor = self.state_tensors * self.tensor_copy_s
        return self.host_copy_s + per_tensor + self.state_bytes / bw

    def round_copy_s(self, strategy: str, rejected: bool) -> float:
        """The state copies of one speculative round of `strategy` (`ROUND_COPIES`)."""
        c = ROUND_COPIES[strategy]
        saves = c.saves + (c.restores_on_reject if rejected else 0)
        selects = c.selects_on_reject if rejected else 0
        return saves * self.checkpoint_s() + selects * self.copy_s()

    def recurrence_s(self, n_tokens: int) -> float:
        """Replaying only the recurrence over `n_tokens` recorded inputs (read + write of
        the state per token, no projections, no attention)."""
        launch = self.launch_s if self.recurrence_launch_s is None else self.recurrence_launch_s
        traffic = n_tokens * 2 * self.state_bytes / self.hbm_bw
        return launch + traffic + n_tokens * self.state_step_s

    def intermediate_write_s(self, n_tokens: int) -> float:
        """Extra time for the state after each of `n_tokens` verified positions: writing
        it, and stepping to it where the recurrence is stepped (`state_step_s`)."""
        return n_tokens * self.state_bytes / self.hbm_bw + n_tokens * self.state_step_s

    def strategy_bytes(self, strategy: str, draft: int) -> float:
        """Extra memory a rollback strategy holds per sequence during a round of `draft`
        drafts: one state copy, a state per verified position, the per-position inputs,
        or nothing."""
        positions = draft + 1
        return {
            "checkpoint": self.state_bytes,
            "per_token": positions * self.state_bytes,
            "input_replay": positions * self.input_bytes_per_token,
            "none": 0.0,
        }[strategy]


# Rates divide: they must be positive. Sizes and the launch time may be zero.
_RATES = ("hbm_bw", "peak_flops", "copy_bw", "host_bw")
_TEXT = ("name", "description")
_CHOICES = {"checkpoint_place": tuple(p.value for p in Placement)}
_OPTIONAL = ("recurrence_launch_s", "host_bw")  # null: the default rule (see the field)
_CURVE = ("forward_knots", "forward_costs")  # lists in JSON: checked apart
_METADATA = "calibration"  # free-form: how a measured profile was obtained


def profile_to_dict(profile: CostProfile, calibration: dict[str, Any] | None = None
                    ) -> dict[str, Any]:
    """The JSON form of a profile, with how it was measured under `calibration`."""
    data: dict[str, Any] = asdict(profile)
    if calibration is not None:
        data[_METADATA] = calibration
    return data


def profile_from_dict(data: Any, source: str) -> CostProfile:
    """A profile from its JSON form; `source` names the file in errors. Every constant
    must be a finite number (rates positive, the rest non-negative)."""
    if not isinstance(data, dict):
        raise ConfigError(f"profile {source}: expected a JSON object, got {type(data).__name__}")
    known = {f.name: f for f in fields(CostProfile)}
    unknown = sorted(set(data) - set(known) - {_METADATA})
    if unknown:
        raise ConfigError(f"profile {source}: unknown key(s) {', '.join(unknown)}")
    required = [n for n, f in known.items()
                if f.default is MISSING and f.default_factory is MISSING]
    missing = [n for n in required if n not in data]
    if missing:
        raise ConfigError(f"profile {source}: missing {', '.join(missing)}")
    given = [name for name in known if name in data]
    curve = _curve_from(data, source)
    for name in given:
        value = data[name]
        if name in _CURVE:
            continue
        if name in _TEXT:
            if not isinstance(value, str) or not value:
                raise ConfigError(f"profile {source}: {name} must be a non-empty string")
        elif name in _CHOICES:
            if value not in _CHOICES[name]:
                raise ConfigError(f"profile {source}: {name} = {value!r} must be one of "
                                  f"{', '.join(_CHOICES[name])}")
        elif value is None and name in _OPTIONAL:
            pass
        elif (isinstance(value, bool) or not isinstance(value, int | float)
              or not math.isfinite(value) or value < 0 or (name in _RATES and value == 0)):
            bound = "positive" if name in _RATES else "non-negative"
            raise ConfigError(f"profile {source}: {name} = {value!r} must be a finite "
                              f"{bound} number")
    return CostProfile(**{name: data[name] for name in given if name not in _CURVE}, **curve)


def _curve_from(data: dict[str, Any], source: str) -> dict[str, tuple[Any, ...]]:
    """A profile's forward curve from its JSON lists: knots positive ascending integers,
    as many costs, each a finite non-negative number."""
    knots, costs = (data.get(name, []) for name in _CURVE)
    ok = (isinstance(knots, list) and isinstance(costs, list) and len(knots) == len(costs)
          and all(isinstance(k, int) and not isinstance(k, bool) and k > 0 for k in knots)
          and all(a < b for a, b in itertools.pairwise(knots))
          and all(isinstance(c, int | float) and not isinstance(c, bool) and math.isfinite(c)
                  and c >= 0 for c in costs))
    if not ok:
        raise ConfigError(f"profile {source}: forward_knots and forward_costs must be lists "
                          "of one length: ascending positive integers, non-negative seconds")
    return {"forward_knots": tuple(knots), "forward_costs": tuple(float(c) for c in costs)}


def load_profile_file(path: Path) -> CostProfile:
    """The profile stored at `path`; its `name` must be the file's stem."""
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"profile {path}: not a readable JSON file ({exc})") from None
    profile = profile_from_dict(data, str(path))
    if profile.name != path.stem:
        raise ConfigError(f"profile {path}: its name '{profile.name}' must match the file "
                          f"name '{path.stem}'")
    return profile


BUILT_IN = ("qwen3.5-27b-h200", "qwen3-next-80b-h200", "tiny-cpu")
"""The profiles derived from specifications, not measured (each file's `calibration` block
says from which): listed first, and a file of the same name elsewhere never shadows one."""
PROFILES: dict[str, CostProfile] = {
    name: load_profile_file(PROFILE_DIR / f"{name}.json") for name in BUILT_IN}


def save_profile(profile: CostProfile, folder: Path,
                 calibration: dict[str, Any] | None = None) -> Path:
    """Write `profile` as `<folder>/<name>.json` (the folder is created); return the path."""
    path = folder / f"{profile.name}.json"
    write_file(path, json.dumps(profile_to_dict(profile, calibration), indent=2) + "\n")
    return path


def profile_calibration(name: str, folder: Path = PROFILE_DIR) -> dict[str, Any] | None:
    """How the named profile was measured: its JSON file's `calibration` block (None: a
    built-in profile, or a file without one)."""
    if name in PROFILES:
        return None
    path = Path(name) if name.endswith(".json") else folder / f"{name}.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    block = data.get(_METADATA) if isinstance(data, dict) else None
    return block if isinstance(block, dict) else None


def profile_names(folder: Path = PROFILE_DIR) -> list[str]:
    """Every profile `get_profile` can find: the built-ins, then the JSON files."""
    stored = sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []
    return [*PROFILES, *(n for n in stored if n not in PROFILES)]


def get_profile(name: str, folder: Path = PROFILE_DIR) -> CostProfile:
    """The named profile: a built-in one, else `<folder>/<name>.json`, or the file a name
    ending in `.json` is the path of; a clear error lists the known ones."""
    if name in PROFILES:
        return PROFILES[name]
    if name.endswith(".json"):  # fitted elsewhere: `bench calibration` writes to its --out
        return load_profile_file(Path(name))
    path = folder / f"{name}.json"
    if path.is_file():
        return load_profile_file(path)
    known = ", ".join(profile_names(folder))
    raise ConfigError(f"profile: unknown '{name}' (known: {known})")


__all__ = [
    "BUILT_IN",
    "PROFILES",
    "PROFILE_DIR",
    "ROUND_COPIES",
    "CostProfile",
    "Placement",
    "RoundCopies",
    "get_profile",
    "load_profile_file",
    "profile_calibration",
    "profile_from_dict",
    "profile_names",
    "profile_to_dict",
    "save_profile",
]
