"""Model options name a shipped model or a local directory, from any working directory."""

from pathlib import Path

import pytest

from engine.config import RunConfig
from engine.errors import ConfigError
from engine.shipped import NAMES, ROOT, model_dir


def test_shipped_names_resolve_inside_the_package() -> None:
    assert set(NAMES) == {"target", "draft", "wide", "wide-draft"}
    for name in NAMES:
        folder = model_dir(f"shipped:{name}")
        assert folder == ROOT / name
        assert (folder / "config.json").exists() and (folder / "model.safetensors").exists()


def test_defaults_are_the_shipped_models() -> None:
    config = RunConfig(backend="torch")
    assert model_dir(config.model) == ROOT / "target"
    assert model_dir(config.draft_model) == ROOT / "draft"


def test_the_old_checkout_paths_still_mean_the_shipped_models(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    monkeypatch.chdir(tmp_path)
    assert model_dir("models/target") == ROOT / "target"
    # A directory of that name where the user is wins: it is a real path.
    (tmp_path / "models" / "draft").mkdir(parents=True)
    assert model_dir("models/draft") == Path("models/draft")


def test_other_paths_are_taken_as_they_are(tmp_path: Path) -> None:
    assert model_dir(tmp_path / "mine") == tmp_path / "mine"


def test_an_unknown_shipped_name_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="shipped:target, shipped:draft"):
        model_dir("shipped:huge")
