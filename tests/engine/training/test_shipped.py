"""The models shipped in models/: they load, have the promised sizes, agree with the
transformers implementation, and end held-out answers with <|im_end|>."""

import csv
import json

import pytest
import torch

from engine.hybrid import LoadedCheckpoint, load_checkpoint
from engine.hybrid.mtp import load_mtp
from engine.hybrid.tokenizer import IM_END, build_tokenizer, encode
from engine.shipped import ROOT as SHIPPED_ROOT
from engine.training.evaluate import greedy, held_out_turns

MODELS = SHIPPED_ROOT
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def target() -> LoadedCheckpoint:
    return load_checkpoint(MODELS / "target")


@pytest.fixture(scope="module")
def draft() -> LoadedCheckpoint:
    return load_checkpoint(MODELS / "draft")


def _count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_sizes_and_parameter_counts(target: LoadedCheckpoint, draft: LoadedCheckpoint) -> None:
    n_target, n_draft = _count(target.model), _count(draft.model)
    assert 1_000_000 <= n_target <= 5_000_000
    assert 5 <= n_target / n_draft <= 10
    assert {"linear_attention", "full_attention"} <= set(target.config.layer_types)
    assert {"linear_attention", "full_attention"} <= set(draft.config.layer_types)
    total = sum(f.stat().st_size for f in MODELS.rglob("*") if f.is_file())
    assert total <= 20 * MiB


def test_both_use_the_byte_tokenizer(target: LoadedCheckpoint, draft: LoadedCheckpoint) -> None:
    text = "<|im_start|>user\ndef f(x):<|im_end|>"
    for loaded in (target, draft):
        assert loaded.tokenizer is not None
        assert loaded.tokenizer.encode(text, add_special_tokens=False).ids == encode(text)
        assert loaded.tokenizer.get_vocab() == build_tokenizer().get_vocab()
        assert IM_END in loaded.config.eos_token_ids


def test_mtp_head_ships_inside_the_target(target: LoadedCheckpoint) -> None:
    head = load_mtp(MODELS / "target", target.model)
    config = json.loads((MODELS / "target" / "config.json").read_text())
    assert config["mtp_num_hidden_layers"] == 1
    assert 0 < _count(head) < _count(target.model)
    ids = torch.tensor([encode("def f(x):\n    return x")])
    with torch.no_grad():
        _, hidden = target.model.train_logits(ids)
        logits, _ = head(hidden[:, :-1], ids[:, 1:])
    assert logits.shape == (1, ids.shape[1] - 1, target.config.vocab_size)


def test_training_record_and_evaluation_are_kept() -> None:
    record = json.loads((MODELS / "target" / "train_config.json").read_text())
    assert record["wall_time_s"] <= 35 * 60
    with (MODELS / "target" / "loss.csv").open() as handle:
        phases = {row["phase"] for row in csv.DictReader(handle)}
    assert phases == {"target", "mtp"}
    for name in ("target", "draft"):
        assert (MODELS / name / "loss.png").stat().st_size > 0
    evaluation = json.loads((MODELS / "target" / "eval.json").read_text())
    assert evaluation["im_end_rate"] >= 0.8
    assert evaluation["end_rate"]["max_new_tokens"] == 512
    assert 0 < evaluation["teacher_forced"]["draft_agreement"] < 1
    assert 0 < evaluation["teacher_forced"]["mtp_agreement"] < 1


def test_target_ends_held_out_turns(target: LoadedCheckpoint) -> None:
    turns = held_out_turns(5, seed=1)
    ended = sum(greedy(target.model, prompt)[-1] == IM_END for prompt, _ in turns)
    assert ended >= 4  # the 80% figure over 200 turns is in eval.json


def test_target_matches_transformers(target: LoadedCheckpoint) -> None:
    transformers = pytest.importorskip("transformers")
    reference = transformers.Qwen3_5ForCausalLM.from_pretrained(MODELS / "target").eval()
    ids = torch.tensor([encode("<|im_start|>user\nComplete this function:\n\ndef f(x):")])
    with torch.no_grad():
        want = reference(ids).logits
    torch.testing.assert_close(target.model(ids), want, atol=1e-4, rtol=1e-4)
