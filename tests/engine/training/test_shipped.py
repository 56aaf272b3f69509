"""The shipped models, both pairs (target/draft, and wide/wide-draft, the widths vLLM's CPU
kernels take): they load, have the promised sizes, carry their MTP head and training
record, agree with the transformers implementation, and end held-out answers with
<|im_end|>."""

import csv
import json
from dataclasses import dataclass

import pytest
import torch

from engine.hybrid import LoadedCheckpoint, load_checkpoint
from engine.hybrid.mtp import load_mtp
from engine.hybrid.tokenizer import IM_END, build_tokenizer, encode
from engine.shipped import ROOT as MODELS
from engine.training.evaluate import greedy, held_out_turns

MiB = 1024 * 1024
PAIRS = {"default": ("target", "draft"), "wide": ("wide", "wide-draft")}
# The share of held-out turns a target must end with <|im_end|> within 512 greedy tokens.
# The wide target is there to run in three engines: with four layers to the default's eight
# it falls into loops more often under greedy decoding and ends 37% of 200 (the default
# 89%), though teacher-forced it predicts better (top-1 accuracy 0.66 to 0.64).
END_RATE = {"target": 0.8, "wide": 0.3}


@dataclass(frozen=True)
class Shipped:
    """One shipped pair, loaded: the target's and the draft's folder names and models."""

    target_name: str
    draft_name: str
    target: LoadedCheckpoint
    draft: LoadedCheckpoint


@pytest.fixture(scope="module", params=list(PAIRS))
def shipped(request: pytest.FixtureRequest) -> Shipped:
    target, draft = PAIRS[request.param]
    return Shipped(target, draft, load_checkpoint(MODELS / target),
                   load_checkpoint(MODELS / draft))


def _count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _size(name: str) -> int:
    return sum(f.stat().st_size for f in (MODELS / name).rglob("*") if f.is_file())


def test_sizes_and_parameter_counts(shipped: Shipped) -> None:
    n_target, n_draft = _count(shipped.target.model), _count(shipped.draft.model)
    assert 1_000_000 <= n_target <= 5_000_000
    assert 5 <= n_target / n_draft <= 10
    for loaded in (shipped.target, shipped.draft):
        assert {"linear_attention", "full_attention"} <= set(loaded.config.layer_types)
    assert _size(shipped.target_name) + _size(shipped.draft_name) <= 20 * MiB


def test_all_shipped_models_stay_small() -> None:
    assert sum(_size(name) for pair in PAIRS.values() for name in pair) <= 32 * MiB


def test_both_use_the_byte_tokenizer(shipped: Shipped) -> None:
    text = "<|im_start|>user\ndef f(x):<|im_end|>"
    for loaded in (shipped.target, shipped.draft):
        assert loaded.tokenizer is not None
        assert loaded.tokenizer.encode(text, add_special_tokens=False).ids == encode(text)
        assert loaded.tokenizer.get_vocab() == build_tokenizer().get_vocab()
        assert IM_END in loaded.config.eos_token_ids


def test_mtp_head_ships_inside_the_target(shipped: Shipped) -> None:
    target = shipped.target
    head = load_mtp(MODELS / shipped.target_name, target.model)
    config = json.loads((MODELS / shipped.target_name / "config.json").read_text())
    assert config["mtp_num_hidden_layers"] == 1
    assert 0 < _count(head) < _count(target.model)
    ids = torch.tensor([encode("def f(x):\n    return x")])
    with torch.no_grad():
        _, hidden = target.model.train_logits(ids)
        logits, _ = head(hidden[:, :-1], ids[:, 1:])
    assert logits.shape == (1, ids.shape[1] - 1, target.config.vocab_size)


def test_training_record_and_evaluation_are_kept(shipped: Shipped) -> None:
    target = MODELS / shipped.target_name
    record = json.loads((target / "train_config.json").read_text())
    planned = {name: record["train"][name]["steps"] for name in ("target", "draft", "mtp")}
    if None in planned.values():  # phases on the clock: the budget held
        assert record["wall_time_s"] <= (record["train"]["minutes"] + 5) * 60
    else:  # phases of fixed length: each ran its steps
        assert {name: p["steps"] for name, p in record["phases"].items()} == planned
    with (target / "loss.csv").open() as handle:
        phases = {row["phase"] for row in csv.DictReader(handle)}
    assert phases == {"target", "mtp"}
    for name in (shipped.target_name, shipped.draft_name):
        assert (MODELS / name / "loss.png").stat().st_size > 0
    evaluation = json.loads((target / "eval.json").read_text())
    assert END_RATE[shipped.target_name] <= evaluation["im_end_rate"] <= 1
    assert evaluation["end_rate"]["max_new_tokens"] == 512
    assert 0 < evaluation["teacher_forced"]["draft_agreement"] < 1
    assert 0 < evaluation["teacher_forced"]["mtp_agreement"] < 1


def test_target_ends_held_out_turns(shipped: Shipped) -> None:
    turns = held_out_turns(10, seed=1)
    ended = sum(greedy(shipped.target.model, prompt)[-1] == IM_END for prompt, _ in turns)
    # Ten turns are a small sample of the 200 in eval.json: half the promised rate.
    assert ended >= 5 * END_RATE[shipped.target_name]


def test_target_matches_transformers(shipped: Shipped) -> None:
    transformers = pytest.importorskip("transformers")
    reference = transformers.Qwen3_5ForCausalLM.from_pretrained(
        MODELS / shipped.target_name).eval()
    ids = torch.tensor([encode("<|im_start|>user\nComplete this function:\n\ndef f(x):")])
    with torch.no_grad():
        want = reference(ids).logits
    torch.testing.assert_close(shipped.target.model(ids), want, atol=1e-4, rtol=1e-4)
