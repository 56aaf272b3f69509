"""GGUF export: what it writes (the converter's tensors, our vocabulary, specials and
ChatML template), f16 output that llama-server loads too, and one-line errors for what it
cannot convert."""

import json
import shutil
import sys
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models

from adapters.cache import CACHE_ENV
from adapters.llama.builds.matrix import matrix
from adapters.llama.errors import GgufExportError, LlamaNotBuiltError
from adapters.llama.gguf.compare import compare_files
from adapters.llama.gguf.convert import CHATML_TEMPLATE, MERGES, PRE_TOKENIZER
from adapters.llama.gguf.export import export_gguf
from adapters.llama.server import paths
from adapters.llama.server.options import ServerOptions
from adapters.llama.server.paths import DEFAULT_BUILD
from adapters.llama.server.process import LlamaServer
from engine.shipped import model_dir
from tests.adapters.llama.conftest import PRE_MTP_BUILD, TARGET, Ggufs, require_llama


def read_gguf(path: Path) -> tuple[dict[str, object], list[str]]:
    """Metadata and tensor names of a GGUF file, read with the converter's own gguf."""
    sys.path.insert(0, str(paths.require_converter() / "gguf-py"))
    try:
        import gguf
    finally:
        sys.path.pop(0)
    reader = gguf.GGUFReader(path)
    meta = {k: f.contents() for k, f in reader.fields.items()
            if not k.startswith("GGUF.")}
    return meta, [t.name for t in reader.tensors]


def test_target_gguf_holds_our_vocab_template_and_mtp_head(ggufs: Ggufs) -> None:
    meta, tensors = read_gguf(ggufs.target)
    config = json.loads((model_dir(TARGET) / "config.json").read_text())
    layers = config["num_hidden_layers"]
    assert meta["general.architecture"] == "qwen35"
    assert meta["qwen35.block_count"] == layers + 1 and meta["qwen35.nextn_predict_layers"] == 1
    assert any(t.startswith(f"blk.{layers}.nextn.") for t in tensors)  # the MTP head
    tokens = meta["tokenizer.ggml.tokens"]
    assert isinstance(tokens, list) and len(tokens) == 259
    assert tokens[256:] == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    assert meta["tokenizer.ggml.pre"] == PRE_TOKENIZER
    assert meta["tokenizer.ggml.merges"] == list(MERGES)
    assert meta["tokenizer.ggml.eos_token_id"] == 258
    assert meta["tokenizer.ggml.add_bos_token"] is False
    assert meta["tokenizer.chat_template"] == CHATML_TEMPLATE


def test_draft_gguf_has_no_nextn_layer(ggufs: Ggufs) -> None:
    meta, tensors = read_gguf(ggufs.draft)
    layers = json.loads((model_dir("shipped:draft") / "config.json").read_text())
    assert meta["qwen35.block_count"] == layers["num_hidden_layers"]
    assert "qwen35.nextn_predict_layers" not in meta
    assert not any(".nextn." in t for t in tensors)


def test_f16_export_loads(ggufs: Ggufs, tmp_path: Path) -> None:
    out = export_gguf(TARGET, tmp_path / "f16" / "target-f16.gguf", outtype="f16")
    assert out.stat().st_size < 0.6 * ggufs.target.stat().st_size
    assert not list(out.parent.glob("*.partial"))
    with LlamaServer(ServerOptions(model=out, verbose=False), tmp_path / "s.log") as server:
        assert len(server.client.complete([257, *b"user\nhi", 258, 10], 8).tokens) == 8


def test_converter_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "empty-cache"))
    with pytest.raises(LlamaNotBuiltError, match=r"converter is missing.*run make llama"):
        export_gguf(TARGET, tmp_path / "x.gguf")


def test_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(GgufExportError, match="outtype 'q4' is not one of f32, f16"):
        export_gguf(TARGET, tmp_path / "x.gguf", outtype="q4")
    with pytest.raises(GgufExportError, match="does not exist"):
        export_gguf(tmp_path / "absent", tmp_path / "x.gguf")
    (tmp_path / "empty").mkdir()
    with pytest.raises(GgufExportError, match=r"no config\.json"):
        export_gguf(tmp_path / "empty", tmp_path / "x.gguf")


def copy_checkpoint(tmp_path: Path) -> Path:
    """A copy of the shipped target to spoil."""
    dest = tmp_path / "ckpt"
    shutil.copytree(model_dir(TARGET), dest)
    return dest


def test_other_tokenizer_refused(tmp_path: Path) -> None:
    ckpt = copy_checkpoint(tmp_path)
    Tokenizer(models.WordLevel({"a": 0, "b": 1}, unk_token="a")).save(
        str(ckpt / "tokenizer.json"))
    with pytest.raises(GgufExportError, match="not the shipped byte-level tokenizer"):
        export_gguf(ckpt, tmp_path / "x.gguf")


def test_converter_failure_is_one_line(llama_server_binary: Path, tmp_path: Path) -> None:
    paths.require_converter()
    ckpt = copy_checkpoint(tmp_path)
    (ckpt / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{bad json")
    with pytest.raises(GgufExportError, match=r"GGUF conversion of .* failed: error: ") as err:
        export_gguf(ckpt, tmp_path / "x.gguf")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "x.gguf").exists() and not list(tmp_path.glob("x.gguf*.partial"))


@pytest.fixture(scope="module")
def target_without_mtp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped target exported by the default converter without its MTP head."""
    require_llama(paths.require_converter)
    return export_gguf(TARGET, tmp_path_factory.mktemp("nomtp") / "t.gguf", mtp=False)


def test_target_without_mtp_head_is_the_target_less_its_nextn_block(
        ggufs: Ggufs, target_without_mtp: Path) -> None:
    layers = json.loads((model_dir(TARGET) / "config.json").read_text())["num_hidden_layers"]
    diff = compare_files(ggufs.target, target_without_mtp)
    assert diff.tensors_removed and all(t.startswith(f"blk.{layers}.")
                                        for t in diff.tensors_removed)
    assert not diff.tensors_added and not diff.layout_changed and diff.max_abs_diff == 0.0
    assert set(diff.keys_removed) == {"qwen35.nextn_predict_layers"}
    changed = {c.key: (c.old, c.new) for c in diff.keys_changed}
    assert changed["qwen35.block_count"] == (layers + 1, layers)
    assert set(changed) <= {"qwen35.block_count", "qwen35.attention.recurrent_layers",
                            "general.size_label"}


@pytest.mark.builds
def test_a_build_before_draft_mtp_answers_on_it_as_the_default_build(
        ggufs: Ggufs, target_without_mtp: Path, tmp_path: Path) -> None:
    """`make test-builds` runs it (it fails there when the older build is missing)."""
    builds = [b.version for b in matrix()]
    has_mtp = ["mtp" in b.spec_types for b in matrix()]  # draft-mtp, by its source name
    # The newest build without draft-mtp: the next one has it.
    assert not has_mtp[builds.index(PRE_MTP_BUILD)] and has_mtp[builds.index(PRE_MTP_BUILD) + 1]
    require_llama(lambda: paths.require_server(PRE_MTP_BUILD))
    prompt = [257, *b"user\nWhat is a tuple?", 258, 10, 257, *b"assistant\n"]
    answers = []
    for build, model in ((DEFAULT_BUILD, ggufs.target), (PRE_MTP_BUILD, target_without_mtp)):
        options = ServerOptions(model=model, verbose=False, build=build)
        with LlamaServer(options, tmp_path / f"{build}.log") as server:
            answers.append(server.client.complete(prompt, 24).tokens)
    assert answers[0] == answers[1] and len(answers[0]) == 24
