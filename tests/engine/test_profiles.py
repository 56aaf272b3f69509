"""Cost profiles stored as JSON: found by name after the built-ins, round trip exactly,
and a malformed file is a clear ConfigError."""

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from engine.config import RunConfig
from engine.errors import ConfigError
from engine.sim.backend import SimBackend
from engine.sim.costs import (
    PROFILE_DIR,
    PROFILES,
    get_profile,
    load_profile_file,
    profile_names,
    save_profile,
)

MEASURED = replace(PROFILES["tiny-cpu"], name="my-cpu-measured", launch_s=4.2e-3,
                   hbm_bw=1.25e9, description="a measured profile")


def test_builtin_profiles_come_first() -> None:
    assert get_profile("qwen3.5-27b-h200") is PROFILES["qwen3.5-27b-h200"]


def test_round_trip_through_get_profile(tmp_path: Path) -> None:
    path = save_profile(MEASURED, tmp_path, {"date": "2024-01-01", "fit_error": {"x": 0.1}})
    assert path == tmp_path / "my-cpu-measured.json"
    assert json.loads(path.read_text())["calibration"]["date"] == "2024-01-01"
    assert get_profile("my-cpu-measured", tmp_path) == MEASURED
    assert "my-cpu-measured" in profile_names(tmp_path)


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


@pytest.mark.parametrize("path", sorted(PROFILE_DIR.glob("*.json")), ids=lambda p: p.stem)
def test_shipped_profiles_load_and_drive_the_sim(path: Path) -> None:
    profile = load_profile_file(path)
    backend = SimBackend(RunConfig(profile=path.stem))
    assert backend.costs == profile
    assert profile.forward_s(1, 0) > 0
