"""ServerOptions: validated once, mapped onto llama-server's flags (common/arg.cpp
spellings), loopback only; the paths module's environment overrides."""

from pathlib import Path

import pytest

from adapters.cache import CACHE_ENV
from adapters.llama.errors import LlamaNotBuiltError
from adapters.llama.server import paths
from adapters.llama.server.options import (
    HOST,
    ChainOrderError,
    Drafter,
    ServerOptions,
    our_drafter,
    parse_drafters,
    server_args,
)
from engine.config import RunConfig
from engine.errors import ConfigError


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    """A file standing in for a GGUF (the mapping never reads it)."""
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF")
    return path


def flag(args: list[str], name: str) -> str:
    """The value after `name` (which must occur exactly once)."""
    assert args.count(name) == 1, (name, args)
    return args[args.index(name) + 1]


def test_plain_server_args(gguf: Path) -> None:
    args = server_args(ServerOptions(model=gguf, threads=1, ctx_checkpoints=5), 4321)
    assert flag(args, "--host") == HOST == "127.0.0.1"
    assert flag(args, "--port") == "4321" and flag(args, "-m") == str(gguf)
    assert flag(args, "-t") == "1" and flag(args, "-tb") == "1" and flag(args, "-np") == "1"
    assert flag(args, "--ctx-checkpoints") == "5"
    assert flag(args, "--cache-type-k") == "f32" and flag(args, "--flash-attn") == "off"
    assert "-v" in args and "--spec-type" not in args and "--metrics" not in args
    # a verbose log carries its clock on every build (older ones print none by default)
    assert {"--log-timestamps", "--log-prefix"} <= set(args)
    counted = server_args(ServerOptions(model=gguf, metrics=True), 4321)
    assert "--metrics" in counted  # Prometheus counters at /metrics


@pytest.mark.parametrize(("drafter", "spec_type", "sizes"), [
    ("mtp", "draft-mtp", {"--spec-draft-n-max": "6", "--spec-draft-n-min": "2"}),
    ("ngram-simple", "ngram-simple", {"--spec-ngram-simple-size-n": "3",
                                      "--spec-ngram-simple-size-m": "6",
                                      "--spec-ngram-simple-min-hits": "2"}),
    ("ngram-map-k", "ngram-map-k", {"--spec-ngram-map-k-size-n": "3",
                                    "--spec-ngram-map-k-size-m": "6",
                                    "--spec-ngram-map-k-min-hits": "2"}),
    ("ngram-mod", "ngram-mod", {"--spec-ngram-mod-n-match": "3",
                                "--spec-ngram-mod-n-max": "6",
                                "--spec-ngram-mod-n-min": "2"}),
])
def test_drafter_flags(gguf: Path, drafter: str, spec_type: str, sizes: dict[str, str]) -> None:
    config = RunConfig(backend="torch", drafter=drafter, draft_max=6, draft_min=2, ngram_n=3,
                       ngram_min_hits=2)
    args = server_args(ServerOptions.from_run_config(config, gguf, verbose=False), 0)
    assert flag(args, "--spec-type") == spec_type and "-v" not in args
    for name, value in sizes.items():
        assert flag(args, name) == value
    assert "-md" not in args


def test_device_cuda_runs_every_layer_on_the_gpu(gguf: Path) -> None:
    config = RunConfig(backend="torch", drafter="draft-model", device="cuda")
    opts = ServerOptions.from_run_config(config, gguf, gguf)
    args = server_args(opts, 0)
    assert opts.cuda and flag(args, "-ngl") == "999" and flag(args, "-ngld") == "999"
    mtp = ServerOptions.from_run_config(config.replace(drafter="mtp"), gguf)
    assert flag(server_args(mtp, 0), "-ngl") == "999" and "-ngld" not in server_args(mtp, 0)
    for device in ("auto", "cpu"):  # the CPU build, as before
        opts = ServerOptions.from_run_config(config.replace(device=device), gguf, gguf)
        assert not opts.cuda and "-ngl" not in server_args(opts, 0)


def test_draft_model_needs_its_gguf(gguf: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="draft-model needs the draft GGUF"):
        ServerOptions(model=gguf, drafters=(Drafter.DRAFT_MODEL,))
    with pytest.raises(ConfigError, match="draft-model needs the draft GGUF"):
        ServerOptions(model=gguf, drafters=("draft-model",), draft_model=tmp_path / "no.gguf")
    args = server_args(ServerOptions(model=gguf, drafters=("draft-model",), draft_model=gguf,
                                     threads=2), 0)
    assert flag(args, "--spec-type") == "draft-simple" and flag(args, "-md") == str(gguf)
    assert flag(args, "--spec-draft-threads") == "2"


def test_chain_and_none() -> None:
    assert parse_drafters("none") == ()
    assert parse_drafters("ngram-mod, mtp") == (Drafter.NGRAM_MOD, Drafter.MTP)
    with pytest.raises(ConfigError, match="chains 'none'"):
        parse_drafters("none,mtp")
    with pytest.raises(ConfigError, match="drafters llama-server has"):
        parse_drafters("synthetic")
    with pytest.raises(ChainOrderError, match="names mtp twice"):
        parse_drafters("mtp,mtp")


@pytest.mark.parametrize(("spec", "honoured"), [
    ("mtp,ngram-mod", "ngram-mod,mtp"), ("draft-model,ngram-simple", "ngram-simple,draft-model"),
    ("mtp,draft-model", "draft-model,mtp"), ("ngram-mod,ngram-map-k", "ngram-map-k,ngram-mod"),
])
def test_a_chain_llama_server_would_reorder_is_refused(gguf: Path, spec: str,
                                                       honoured: str) -> None:
    with pytest.raises(ChainOrderError, match=f"would run as '{honoured}': pass --drafter "
                                              f"{honoured}$"):
        parse_drafters(spec)
    with pytest.raises(ChainOrderError):
        ServerOptions(model=gguf, drafters=tuple(spec.split(",")))  # type: ignore[arg-type]
    assert ",".join(d.value for d in parse_drafters(honoured)) == honoured


def test_chain_flags(gguf: Path) -> None:
    args = server_args(ServerOptions(model=gguf, drafters=("ngram-mod", "mtp")), 0)
    assert flag(args, "--spec-type") == "ngram-mod,draft-mtp"
    assert flag(args, "--spec-draft-n-max") == "8" and flag(args, "--spec-ngram-mod-n-max") == "8"


@pytest.mark.parametrize(("field", "value", "message"), [
    ("draft_max", 0, "draft_max"), ("draft_min", 9, "draft_min"), ("threads", 0, "threads"),
    ("port", 70000, "port"), ("startup_timeout_s", 0.0, "startup_timeout_s"),
])
def test_out_of_range(gguf: Path, field: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ServerOptions(model=gguf, **{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("draft_max", [0, 1, 64, 65])
def test_draft_max_bounds_are_the_run_configs(gguf: Path, draft_max: int) -> None:
    """A draft size a run accepts, the server options accept, and only that."""
    try:
        RunConfig(draft_max=draft_max)
    except ConfigError as exc:
        with pytest.raises(ConfigError, match=str(exc)):
            ServerOptions(model=gguf, draft_max=draft_max)
    else:
        assert ServerOptions(model=gguf, draft_max=draft_max).draft_max == draft_max


def test_missing_model(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="export gguf"):
        ServerOptions(model=tmp_path / "absent.gguf")


def test_paths_follow_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(paths.SERVER_ENV, raising=False)
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert paths.cache_root() == tmp_path / "xdg" / "specledger"
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    root = tmp_path / "cache" / "llama.cpp" / paths.LLAMA_PY_VERSION
    assert paths.server_path() == root / "bin" / "llama-server"
    assert paths.converter_dir() == root / "convert"
    with pytest.raises(LlamaNotBuiltError, match="run make llama"):
        paths.require_server()
    with pytest.raises(LlamaNotBuiltError, match="run make llama"):
        paths.require_converter()
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\n")
    monkeypatch.setenv(paths.SERVER_ENV, str(fake))
    with pytest.raises(LlamaNotBuiltError, match="SPECLEDGER_LLAMA_SERVER"):
        paths.require_server()  # not executable
    fake.chmod(0o755)
    assert paths.require_server() == fake
    # the CUDA server lives beside the CPU one; the variable names the CPU one only
    cuda = root / "bin" / "llama-server-cuda"
    assert paths.server_path(cuda=True) == cuda
    with pytest.raises(LlamaNotBuiltError, match=r"llama-server \(CUDA\) .* run specledger "
                                                 r"llama build 0.3.36 --cuda"):
        paths.require_server(cuda=True)
    cuda.parent.mkdir(parents=True)
    cuda.write_text("#!/bin/sh\n")
    cuda.chmod(0o755)
    assert paths.require_server(cuda=True) == cuda and paths.built(paths.DEFAULT_BUILD, True)


@pytest.mark.parametrize(("spec_type", "ours"), [
    ("draft-mtp", "mtp"), ("draft-simple", "draft-model"), ("ngram-mod", "ngram-mod"),
    # builds before 0.3.24 (common_speculative_type_to_str)
    ("draft", "draft-model"), ("ngram_mod", "ngram-mod"), ("ngram_simple", "ngram-simple"),
    ("ngram_map_k", "ngram-map-k"), ("ngram_cache", "ngram_cache"),
])
def test_every_builds_spec_type_names_map_to_ours(spec_type: str, ours: str) -> None:
    assert our_drafter(spec_type) == ours
