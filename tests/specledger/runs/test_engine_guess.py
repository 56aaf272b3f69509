"""Which engine wrote a log: every real log users published, and our captures, are named
for the engine that wrote them; a log passed to the wrong `import` is refused with the
command that reads it."""

from pathlib import Path

import pytest

from specbench.interval_logs import corpus_root
from specledger.cli.main import main
from specledger.runs.engine_guess import guess_engine

ENGINES = ("llama-server", "vllm", "sglang")
FIXTURES = Path(__file__).parents[2] / "adapters"


def _logs() -> list[tuple[str, Path]]:
    """(engine, log) of the corpus and of our captured fixtures."""
    corpus = [(e, f) for e in ENGINES for f in sorted((corpus_root() / e).glob("*.log*"))]
    ours = [("vllm", f) for f in sorted((FIXTURES / "vllm").rglob("*.log*"))]
    ours += [("llama-server", f) for f in sorted((FIXTURES / "llama" / "fixtures").rglob("*.log"))]
    return corpus + ours


def test_every_log_is_named_for_its_engine() -> None:
    logs = _logs()
    assert {e for e, _ in logs} == set(ENGINES) and len(logs) > 40
    assert [(e, f.name) for e, f in logs if guess_engine(f) != e] == []


def test_text_of_no_engine_is_named_none(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("shopping list\nmilk\n")
    assert guess_engine(path) is None
    assert guess_engine(tmp_path / "missing.log") is None


def test_the_wrong_import_names_the_right_one(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    log = corpus_root() / "vllm" / "vllm-project-vllm-39680-qwen35-0.8b-mtp-slower.log"
    assert main(["import", "sglang", str(log), "--db", str(tmp_path / "l.db")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.endswith(f"; it reads as a vllm log: specledger import vllm {log}")


def test_an_sglang_log_read_as_llama_server_s_names_sglang(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """llama-server's reader takes an SGLang log's lines, then records nothing: the refusal
    names the command that reads it."""
    log = corpus_root() / "sglang" / "sgl-project-sglang-11948-qwen3-8b-eagle3-a800-tp2.log"
    assert main(["import", "llama-server", str(log), "--db", str(tmp_path / "l.db")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("specledger: error: nothing recorded")
    assert err[-1].endswith(f"; it reads as a sglang log: specledger import sglang {log}")
