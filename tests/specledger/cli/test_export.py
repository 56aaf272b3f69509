"""`specledger export gguf`: its options, the file it writes, its JSON, its errors."""

import argparse
import json
from pathlib import Path

import pytest

from adapters.cache import CACHE_ENV
from adapters.llama.errors import GgufExportError, LlamaNotBuiltError, UnknownBuildError
from adapters.llama.server.paths import DEFAULT_BUILD, require_converter
from specledger.cli import export as export_cmd
from tests.adapters.llama.conftest import require_llama


def parse(argv: list[str]) -> argparse.Namespace:
    """`argv` parsed by a parser holding only the export command."""
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    export_cmd.add_parser(sub)
    return parser.parse_args(argv)


def test_options_and_default_out() -> None:
    args = parse(["export", "gguf", "shipped:draft"])
    assert (args.format, args.model_dir, args.out, args.outtype) == ("gguf", "shipped:draft",
                                                                     None, "f32")
    assert args.llama_build == DEFAULT_BUILD and args.no_mtp is False
    assert export_cmd.default_out("shipped:draft", "f16") == Path("draft-f16.gguf")
    with pytest.raises(SystemExit):
        parse(["export", "onnx", "shipped:draft"])
    with pytest.raises(SystemExit):
        parse(["export", "gguf", "shipped:draft", "--outtype", "q8_0"])


def test_export_writes_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    require_llama(require_converter)
    out = tmp_path / "d.gguf"
    args = parse(["export", "gguf", "shipped:draft", "--out", str(out), "--outtype", "f16",
                  "--json"])
    assert export_cmd.run(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == {"format": "gguf", "model": "shipped:draft", "out": str(out),
                   "outtype": "f16", "llama_build": DEFAULT_BUILD, "mtp": True,
                   "bytes": out.stat().st_size}
    assert out.read_bytes()[:4] == b"GGUF"


def test_export_error(tmp_path: Path) -> None:
    args = parse(["export", "gguf", str(tmp_path / "absent"), "--out", str(tmp_path / "x")])
    with pytest.raises(GgufExportError, match="does not exist"):
        export_cmd.run(args)


def test_export_uses_the_named_builds_converter(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))  # a cache holding no build
    out = tmp_path / "d.gguf"
    args = parse(["export", "gguf", "shipped:draft", "--out", str(out),
                  "--llama-build", "0.3.20"])
    converter = tmp_path / "cache" / "llama.cpp" / "0.3.20" / "convert"
    with pytest.raises(LlamaNotBuiltError, match=f"0.3.20 GGUF converter is missing from "
                                                 f"{converter} .*specledger llama build 0.3.20"):
        export_cmd.run(args)
    assert not out.exists()
    bad = parse(["export", "gguf", "shipped:draft", "--out", str(out), "--llama-build", "tip"])
    with pytest.raises(UnknownBuildError, match="'tip' is not a llama-cpp-python version"):
        export_cmd.run(bad)
