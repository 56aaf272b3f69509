"""Cost profiles stored as JSON: found by name after the built-ins (a file named like one
does not shadow it), each shipped one charging a sim session its costs, round trip exactly
(with the CPU terms, or without them as older files were written), a malformed file is a
clear ConfigError; the CPU terms and the checkpoint placement left at their defaults
change no time (every existing profile's sim sessions hash as recorded before)."""

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from engine.config import BackendKind, RunConfig, Strategy
from engine.errors import ConfigError
from engine.session import MemoryJournal, Session
from engine.sim.backend import UBATCH, SimBackend
from engine.sim.costs import (
    PROFILE_DIR,
    PROFILES,
    CostProfile,
    get_profile,
    load_profile_file,
    profile_names,
    save_profile,
)
from fsm.states import Trigger
from tests.engine.golden.hashes import event_hash

MEASURED = replace(PROFILES["tiny-cpu"], name="my-cpu-measured", launch_s=4.2e-3,
                   hbm_bw=1.25e9, description="a measured profile", token_s=1.5e-4,
                   multi_token_s=2.5e-3, state_step_s=1.2e-4, recurrence_launch_s=1.9e-4)
CPU_TERMS = ("token_s", "multi_token_s", "state_step_s", "recurrence_launch_s")


def test_builtin_profiles_come_first(tmp_path: Path) -> None:
    """A JSON profile named like a built-in one does not shadow it: the name finds the
    built-in, the file is still read by its path, and the name is listed once."""
    name = "qwen3.5-27b-h200"
    path = save_profile(replace(MEASURED, name=name), tmp_path)
    assert path == tmp_path / f"{name}.json" and load_profile_file(path) != PROFILES[name]
    assert get_profile(name, tmp_path) is PROFILES[name]
    assert get_profile(str(path), tmp_path) == replace(MEASURED, name=name)
    assert profile_names(tmp_path).count(name) == 1


def test_every_profile_lives_in_the_profiles_folder() -> None:
    """One home: the built-in profiles are files in `engine/sim/profiles/` like the
    measured ones, each saying how it was derived, and found first by name."""
    for name, profile in PROFILES.items():
        path = PROFILE_DIR / f"{name}.json"
        assert load_profile_file(path) == profile
        assert json.loads(path.read_text())["calibration"]["derived"]
    assert profile_names()[:len(PROFILES)] == list(PROFILES)


def test_round_trip_through_get_profile(tmp_path: Path) -> None:
    path = save_profile(MEASURED, tmp_path, {"date": "2024-01-01", "fit_error": {"x": 0.1}})
    assert path == tmp_path / "my-cpu-measured.json"
    assert json.loads(path.read_text())["calibration"]["date"] == "2024-01-01"
    assert get_profile("my-cpu-measured", tmp_path) == MEASURED
    assert "my-cpu-measured" in profile_names(tmp_path)


def test_a_profile_written_before_the_cpu_terms_loads_with_their_defaults(
        tmp_path: Path) -> None:
    data = {k: v for k, v in asdict(MEASURED).items() if k not in CPU_TERMS}
    _write(tmp_path, "older", json.dumps({**data, "name": "older"}))
    profile = get_profile("older", tmp_path)
    assert profile == replace(MEASURED, name="older", token_s=0.0, multi_token_s=0.0,
                              state_step_s=0.0, recurrence_launch_s=None)
    # null is the default of the optional fixed cost, and round trips
    path = save_profile(replace(MEASURED, recurrence_launch_s=None), tmp_path)
    assert json.loads(path.read_text())["recurrence_launch_s"] is None
    assert load_profile_file(path).recurrence_launch_s is None


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_cpu_terms_at_their_defaults_leave_the_gpu_view_exact(name: str) -> None:
    """The built-in profiles set no CPU term; their times are the roofline's, bit for
    bit (recorded sim sessions stay reproducible)."""
    p = PROFILES[name]
    assert all(getattr(p, t) == getattr(CostProfile, t) for t in CPU_TERMS)
    for batch in (1, 2, 9, 512):
        for ctx in (0, 1000, 100_000):
            roofline = max(p.weight_bytes / p.hbm_bw, batch * p.flops_per_token / p.peak_flops)
            kv = (ctx + batch) * p.kv_bytes_per_token / p.hbm_bw
            assert p.forward_s(batch, ctx) == p.launch_s + roofline + kv
        assert p.recurrence_s(batch) == p.launch_s + batch * 2 * p.state_bytes / p.hbm_bw
        assert p.intermediate_write_s(batch) == batch * p.state_bytes / p.hbm_bw


def test_cpu_terms_shape_the_times() -> None:
    base = replace(MEASURED, token_s=0.0, multi_token_s=0.0, state_step_s=0.0,
                   recurrence_launch_s=None)
    assert MEASURED.forward_s(1, 0) - base.forward_s(1, 0) == pytest.approx(1.5e-4)
    assert MEASURED.forward_s(2, 0) - base.forward_s(2, 0) == pytest.approx(2.5e-3 + 3e-4)
    assert (MEASURED.recurrence_s(4) - base.recurrence_s(4)
            == pytest.approx(1.9e-4 - base.launch_s + 4 * 1.2e-4))
    assert (MEASURED.intermediate_write_s(4) - base.intermediate_write_s(4)
            == pytest.approx(4 * 1.2e-4))


def test_unknown_name_lists_builtin_and_json_profiles(tmp_path: Path) -> None:
    save_profile(MEASURED, tmp_path)
    with pytest.raises(ConfigError, match="unknown 'nope'") as err:
        get_profile("nope", tmp_path)
    assert "tiny-cpu" in str(err.value) and "my-cpu-measured" in str(err.value)


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.json"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("change", "message"), [
    ({"hbm_bw": "fast"}, "hbm_bw = 'fast' must be a finite positive number"),
    ({"hbm_bw": 0}, "hbm_bw = 0 must be a finite positive number"),
    ({"launch_s": -1.0}, "launch_s = -1.0 must be a finite non-negative number"),
    ({"token_s": -1e-4}, "token_s = -0.0001 must be a finite non-negative number"),
    ({"multi_token_s": None}, "multi_token_s = None must be a finite non-negative"),
    ({"recurrence_launch_s": "x"}, "recurrence_launch_s = 'x' must be a finite"),
    ({"copy_bw": True}, "copy_bw = True"),
    ({"flops": 1.0}, "unknown key"),
    ({"name": "other"}, "must match the file name"),
    ({"description": ""}, "description must be a non-empty string"),
])
def test_malformed_profile_is_a_config_error(tmp_path: Path, change: dict[str, object],
                                             message: str) -> None:
    _write(tmp_path, "bad", json.dumps({**asdict(MEASURED), "name": "bad", **change}))
    with pytest.raises(ConfigError, match=message):
        get_profile("bad", tmp_path)


def test_missing_constant_and_broken_json_are_config_errors(tmp_path: Path) -> None:
    data = {**asdict(MEASURED), "name": "short"}
    del data["state_bytes"]
    _write(tmp_path, "short", json.dumps(data))
    with pytest.raises(ConfigError, match="missing state_bytes"):
        get_profile("short", tmp_path)
    _write(tmp_path, "broken", '{"name": "broken",')
    with pytest.raises(ConfigError, match="not a readable JSON file"):
        get_profile("broken", tmp_path)
    _write(tmp_path, "list", "[1, 2]")
    with pytest.raises(ConfigError, match="expected a JSON object"):
        get_profile("list", tmp_path)


def _prefill_s(profile: CostProfile, position: int, tokens: int) -> float:
    """The sim's charge for prefilling `tokens` from `position`: one forward per ubatch."""
    return sum(profile.forward_s(min(UBATCH, tokens - i), position + i)
               for i in range(0, tokens, UBATCH))


@pytest.mark.parametrize("path", sorted(PROFILE_DIR.glob("*.json")), ids=lambda p: p.stem)
def test_shipped_profiles_load_and_drive_the_sim(path: Path) -> None:
    """A session run under the profile's name is charged the profile's costs: every
    prefill chunk and context checkpoint takes what the profile says, and the same
    session under another profile takes other times for the same tokens."""
    profile = load_profile_file(path)
    assert SimBackend(RunConfig(profile=path.stem)).costs == profile
    config = RunConfig(backend=BackendKind.SIM, turns=2, prompt_tokens=600, question_tokens=8,
                       answer_tokens=24, seed=2, ctx_checkpoint_every=256, profile=path.stem)
    other_name = "qwen3.5-27b-h200" if path.stem == "tiny-cpu" else "tiny-cpu"
    runs = {}
    for name in (path.stem, other_name):
        journal = MemoryJournal()
        Session(config.replace(profile=name), journal).run()
        runs[name] = journal.events
    evs = runs[path.stem]
    prefills = [e for e in evs if e.trigger is Trigger.PREFILL]
    saves = [e for e in evs if e.trigger is Trigger.CTX_SAVE]
    assert len(prefills) >= 3 and saves
    for e in prefills:
        tokens, end = e.payload["tokens"], e.payload["position"]
        assert e.duration == pytest.approx(_prefill_s(profile, end - tokens, tokens),
                                           rel=1e-12)
    assert all(e.duration == pytest.approx(profile.checkpoint_s(), rel=1e-12) for e in saves)
    other = runs[other_name]
    assert [(e.trigger, e.payload.get("append")) for e in evs] == [
        (e.trigger, e.payload.get("append")) for e in other]
    assert [e.duration for e in evs] != [e.duration for e in other]


# --- where checkpoints live (llama.cpp's host copies), the round's host sync ----------

PLACEMENT_TERMS = ("checkpoint_place", "host_bw", "host_copy_s", "round_sync_s")
PROFILE_HASHES = Path(__file__).with_name("profile_event_hashes.json")


def _profile_grid() -> dict[str, RunConfig]:
    """Sim sessions under every profile that existed before the placement terms: every
    strategy with a drafter that drafts long (synthetic) and one that rejects (ngram-mod),
    prompts long enough to take context checkpoints."""
    out = {}
    for prof in ("qwen3.5-27b-h200", "qwen3-next-80b-h200", "tiny-cpu",
                 "hybrid-tiny-cpu-measured"):
        for s in Strategy:
            for d in ("synthetic", "ngram-mod"):
                out[f"{prof}/{s.value}/{d}"] = RunConfig(
                    backend=BackendKind.SIM, turns=2, prompt_tokens=600, question_tokens=12,
                    answer_tokens=40, seed=5, strategy=s, drafter=d, profile=prof)
    return out


@pytest.mark.parametrize("name", sorted(json.loads(PROFILE_HASHES.read_text())))
def test_existing_profiles_times_are_unchanged_to_the_bit(name: str) -> None:
    """Recorded before the placement terms existed: their defaults change no event, no
    time."""
    assert event_hash(_profile_grid()[name]) == json.loads(PROFILE_HASHES.read_text())[name]


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_placement_terms_default_to_the_device_copy(name: str) -> None:
    p = PROFILES[name]
    assert all(getattr(p, t) == getattr(CostProfile, t) for t in PLACEMENT_TERMS)
    assert p.checkpoint_s() == p.copy_s()
    for batch in (1, 2, 9):
        assert p.verify_s(batch, 100) == p.forward_s(batch, 100)


def test_host_and_unified_checkpoints_and_the_round_sync() -> None:
    base = replace(MEASURED, state_bytes=1e6, copy_bw=1e9)
    host = replace(base, checkpoint_place="host", host_bw=1e8, host_copy_s=2e-5,
                   round_sync_s=3e-5)
    assert host.checkpoint_s() == pytest.approx(2e-5 + 1e-2)
    unified = replace(host, checkpoint_place="unified")
    assert unified.checkpoint_s() == pytest.approx(2e-5 + 1e-3)
    assert host.verify_s(1, 0) == host.forward_s(1, 0)  # a plain step: no round
    assert host.verify_s(4, 0) == pytest.approx(host.forward_s(4, 0) + 3e-5)
    # checkpoint: a save every round, a restore on a reject; per_token selects on device
    assert host.round_copy_s("checkpoint", rejected=False) == pytest.approx(host.checkpoint_s())
    assert host.round_copy_s("checkpoint", rejected=True) == pytest.approx(
        2 * host.checkpoint_s())
    assert host.round_copy_s("per_token", rejected=True) == pytest.approx(host.copy_s())
    assert host.round_copy_s("input_replay", rejected=True) == 0.0
    # a sim session under host checkpoints is slower, and only in its clock
    fast, slow = (SimBackend(RunConfig(), p) for p in (base, host))
    for b in (fast, slow):
        b.snapshot(b.new_state())
    assert slow.now() > fast.now()


def test_placement_round_trips_and_a_bad_one_is_a_config_error(tmp_path: Path) -> None:
    prof = replace(MEASURED, checkpoint_place="host", host_bw=2.5e10, host_copy_s=1e-5)
    assert get_profile(save_profile(prof, tmp_path).stem, tmp_path) == prof
    _write(tmp_path, "bad", json.dumps({**asdict(MEASURED), "name": "bad",
                                        "checkpoint_place": "disk"}))
    with pytest.raises(ConfigError, match="checkpoint_place = 'disk' must be one of"):
        get_profile("bad", tmp_path)
    _write(tmp_path, "zero", json.dumps({**asdict(MEASURED), "name": "zero", "host_bw": 0}))
    with pytest.raises(ConfigError, match="host_bw = 0 must be a finite positive"):
        get_profile("zero", tmp_path)


@pytest.mark.parametrize("name", ["rtx3090-qwen3.5-27b-q4-llama",
                                  "strix-halo-qwen3-next-80b-q4-llama",
                                  "h200-qwen3.5-27b-bf16-llama"])
def test_public_hardware_profiles_say_they_are_predictions(name: str) -> None:
    p = get_profile(name)
    assert "not a measurement" in p.description and "Sources:" in p.description
    assert p.checkpoint_place in ("host", "unified")
    assert p.checkpoint_s() > replace(p, checkpoint_place="device").checkpoint_s()
    assert p.state_tensors > 0 and p.tensor_copy_s > 0  # fitted: engine/sim/published.py


CURVED = replace(MEASURED, name="my-curve", forward_knots=(1, 2, 9, 400),
                 forward_costs=(0.4e-3, 1.2e-3, 2.25e-3, 41.35e-3), token_s=0.0)


def test_a_measured_forward_curve_is_interpolated_extended_and_scaled_below() -> None:
    plain = replace(CURVED, forward_knots=(), forward_costs=())
    extra = [CURVED.forward_s(b, 0) - plain.forward_s(b, 0) for b in (1, 5, 9, 130, 500)]
    assert extra == pytest.approx([0.4e-3, 1.65e-3, 2.25e-3, 14.35e-3, 51.35e-3])
    # below the smallest size measured, in proportion to its tokens
    low = replace(CURVED, forward_knots=(4, 9), forward_costs=(2e-3, 3e-3))
    assert low.curve_s(2) == pytest.approx(1e-3)
    # per-position states move the curve's fixed cost, not the round's own launch_s
    kept = replace(CURVED, rs_seq_s=1e-5, launch_rs_seq=4)
    none = kept.keeping(0)
    assert none.launch_s == kept.launch_s
    assert none.forward_costs == pytest.approx(tuple(c - 4e-5 for c in kept.forward_costs))


def test_a_curve_round_trips_and_a_broken_one_is_a_config_error(tmp_path: Path) -> None:
    assert get_profile(str(save_profile(CURVED, tmp_path))) == CURVED
    path = tmp_path / "bad.json"
    for change in ({"forward_knots": [2, 1, 3, 4]}, {"forward_costs": [0.1]},
                   {"forward_knots": [0, 1, 2, 3]}, {"forward_costs": [1, -1, 1, 1]}):
        data = json.loads((tmp_path / "my-curve.json").read_text()) | change | {"name": "bad"}
        path.write_text(json.dumps(data))
        with pytest.raises(ConfigError, match="forward_knots and forward_costs"):
            load_profile_file(path)
