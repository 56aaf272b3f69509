"""The build matrix: its facts as tools/llama_matrix.py wrote them, the banner match, the
per-build cache layout, and the legacy flag dialect of the builds before 0.3.24."""

from pathlib import Path

import pytest

from adapters.cache import CACHE_ENV
from adapters.llama.builds.incidents import INCIDENTS, by_key
from adapters.llama.builds.matrix import MATRIX, Dialect, Exposure, facts, match_banner, matrix
from adapters.llama.errors import LlamaNotBuiltError, UnknownBuildError
from adapters.llama.server import paths
from adapters.llama.server.options import BuildLacksDrafterError, ServerOptions, server_args
from engine.config import RunConfig
from engine.errors import ConfigError


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    """A file standing in for a GGUF (the mapping never reads it)."""
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF")
    return path


def test_every_pinned_build_has_facts_oldest_first() -> None:
    assert tuple(b.version for b in matrix()) == MATRIX
    dates = [b.date for b in matrix()]
    assert dates == sorted(dates)
    assert all(len(b.commit) == 40 for b in matrix())
    assert {b.key for b in INCIDENTS} == set(matrix()[0].exposures)


def test_the_facts_say_what_each_era_can_do() -> None:
    oldest, first_ckpt, newest = facts("0.3.20"), facts("0.3.21"), facts(paths.DEFAULT_BUILD)
    assert oldest is not None and first_ckpt is not None and newest is not None
    assert not oldest.spec_checkpoints and first_ckpt.spec_checkpoints
    assert first_ckpt.dialect is Dialect.LEGACY and newest.dialect is Dialect.SPEC_DRAFT
    assert "mtp" not in first_ckpt.spec_types and "mtp" in newest.spec_types
    assert newest.chains and not first_ckpt.chains
    # The one fix of the set that landed inside the matrix, and the build before it.
    assert facts("0.3.30").exposures[by_key("PR 26320").key] is Exposure.BUG
    assert newest.exposures["PR 26320"] is Exposure.FIXED
    assert first_ckpt.exposures["PR 22521"] is Exposure.BUG
    assert facts("0.3.24").exposures["PR 22521"] is Exposure.FIXED
    assert all(v is Exposure.ABSENT for k, v in oldest.exposures.items() if k != "#24055")
    assert facts("9.9.9") is None


def test_the_banner_names_its_build_by_commit() -> None:
    newest = facts(paths.DEFAULT_BUILD)
    assert newest is not None
    line = f"build 1 ({newest.short}) with GNU 12.2.0 for Linux x86_64"
    assert match_banner(line) == newest
    assert match_banner("build: 7123 (abcdef1) with cc") is None  # outside the matrix
    assert match_banner(None) is None and match_banner("no banner here") is None
    assert newest.label().startswith(f"{paths.DEFAULT_BUILD} (llama.cpp {newest.short}, ")


def test_builds_live_side_by_side(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    monkeypatch.setenv(paths.SERVER_ENV, str(tmp_path / "elsewhere"))
    assert paths.server_path("0.3.21") == tmp_path / "llama.cpp/0.3.21/bin/llama-server"
    assert paths.converter_dir("0.3.30") == tmp_path / "llama.cpp/0.3.30/convert"
    assert paths.server_path() == tmp_path / "elsewhere"  # the override is the default's
    with pytest.raises(LlamaNotBuiltError, match=r"specledger llama build 0\.3\.21"):
        paths.require_server("0.3.21")
    with pytest.raises(LlamaNotBuiltError, match=r"specledger llama build 0\.3\.24"):
        paths.require_converter("0.3.24")
    for bad in ("latest", "0.3", "../0.3.36", ""):
        with pytest.raises(UnknownBuildError, match="llama builds"):
            paths.llama_root(bad)


def test_run_config_names_the_build() -> None:
    assert RunConfig(backend="llama").llama_build == paths.DEFAULT_BUILD
    assert RunConfig(backend="llama", llama_build="0.3.21").to_dict()["llama_build"] == "0.3.21"
    with pytest.raises(ConfigError, match="llama_build: 'tip'"):
        RunConfig(backend="llama", llama_build="tip")


def flag(args: list[str], name: str) -> str:
    """The value after `name` (which must occur exactly once)."""
    assert args.count(name) == 1, (name, args)
    return args[args.index(name) + 1]


def test_legacy_ngram_flags(gguf: Path) -> None:
    opts = ServerOptions(model=gguf, drafters=("ngram-mod",), draft_max=6, draft_min=2,
                         ngram_n=3, ngram_min_hits=2, build="0.3.21")
    args = server_args(opts, 0, Dialect.LEGACY)
    assert flag(args, "--spec-type") == "ngram-mod"
    assert flag(args, "--draft-max") == "6" and flag(args, "--draft-min") == "2"
    assert flag(args, "--spec-ngram-size-n") == "3" and flag(args, "--spec-ngram-size-m") == "6"
    assert flag(args, "--spec-ngram-min-hits") == "2"
    assert not [a for a in args if a.startswith("--spec-draft") or a.startswith("--spec-ngram-mod")]
    # The shared flags are the same in both dialects.
    modern = server_args(opts, 0, Dialect.SPEC_DRAFT)
    assert args[:args.index("--spec-type")] == modern[:modern.index("--spec-type")]


def test_legacy_draft_model_flags(gguf: Path) -> None:
    opts = ServerOptions(model=gguf, drafters=("draft-model",), draft_model=gguf, draft_max=4,
                         threads=2, build="0.3.21")
    args = server_args(opts, 0, Dialect.LEGACY)
    assert "--spec-type" not in args  # -md alone selects the draft model
    assert flag(args, "-md") == str(gguf) and flag(args, "--draft-max") == "4"
    assert flag(args, "-ctkd") == "f32" and flag(args, "-ctvd") == "f32"
    assert flag(args, "-td") == "2" and flag(args, "-tbd") == "2"


@pytest.mark.parametrize(("drafters", "why"), [
    (("mtp",), "no draft-mtp"), (("ngram-mod", "mtp"), "runs one speculative type"),
])
def test_legacy_refuses_what_the_build_lacks(gguf: Path, drafters: tuple[str, ...],
                                             why: str) -> None:
    opts = ServerOptions(model=gguf, drafters=drafters, build="0.3.21")
    with pytest.raises(BuildLacksDrafterError, match=why):
        server_args(opts, 0, Dialect.LEGACY)
    assert "--spec-type" in server_args(opts, 0, Dialect.SPEC_DRAFT)
