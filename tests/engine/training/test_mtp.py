"""The MTP head: layout, differentiable pass vs cached steps, checkpoint round trip."""

from pathlib import Path

import pytest
import torch

from engine.hybrid import CheckpointFormatError, HybridModel, load_checkpoint
from engine.hybrid.mtp import MtpHead, load_mtp
from engine.training.checkpoint import save_checkpoint
from engine.training.loop import init_weights


def _head(model: HybridModel) -> MtpHead:
    head = MtpHead(model)
    init_weights(head)
    with torch.no_grad():  # non-identity norms, so a mixed-up norm would show
        for name, p in head.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.3)
    return head


def test_head_has_the_qwen_mtp_layout_and_shares_embeddings(model: HybridModel) -> None:
    names = set(_head(model).state_dict())
    assert {"fc.weight", "pre_fc_norm_embedding.weight", "pre_fc_norm_hidden.weight",
            "norm.weight", "layers.0.self_attn.q_proj.weight",
            "layers.0.mlp.gate_proj.weight"} <= names
    assert not any(n.startswith(("embed_tokens", "lm_head")) for n in names)


def test_cached_steps_match_the_full_pass(model: HybridModel) -> None:
    head = _head(model)
    ids = torch.randint(0, model.config.vocab_size, (2, 12))
    with torch.no_grad():
        _, hidden = model.train_logits(ids)
        full, full_hidden = head(hidden[:, :-1], ids[:, 1:])
    state = head.new_state(batch_size=2)
    first, _ = head.step(hidden[:, :5], ids[:, 1:6], state)
    rest = [head.step(hidden[:, i:i + 1], ids[:, i + 1:i + 2], state) for i in range(5, 11)]
    stepped = torch.cat([first, *(logits for logits, _ in rest)], dim=1)
    assert state.position == 11
    torch.testing.assert_close(stepped, full, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rest[-1][1], full_hidden[:, -1:], atol=1e-5, rtol=1e-5)


def test_head_trains_through_forward(model: HybridModel) -> None:
    head = _head(model)
    ids = torch.randint(0, model.config.vocab_size, (1, 9))
    with torch.no_grad():
        _, hidden = model.train_logits(ids)
    logits, _ = head(hidden[:, :-1], ids[:, 1:])
    logits.sum().backward()
    assert head.fc.weight.grad is not None and head.fc.weight.grad.abs().sum() > 0


def test_checkpoint_round_trip(model: HybridModel, tmp_path: Path) -> None:
    head = _head(model)
    save_checkpoint(tmp_path, model, head.state_dict())
    loaded = load_checkpoint(tmp_path)  # the decoder loader skips mtp.*
    again = load_mtp(tmp_path, loaded.model)
    ids = torch.randint(0, model.config.vocab_size, (1, 10))
    with torch.no_grad():
        _, hidden = model.train_logits(ids)
        want, _ = head(hidden[:, :-1], ids[:, 1:])
        got, _ = again(hidden[:, :-1], ids[:, 1:])
    torch.testing.assert_close(got, want)


def test_head_loads_in_its_targets_dtype(model: HybridModel, tmp_path: Path) -> None:
    head = _head(model)
    save_checkpoint(tmp_path, model, head.state_dict())
    again = load_mtp(tmp_path, dtype=torch.bfloat16)
    assert {p.dtype for p in again.parameters()} == {torch.bfloat16}
    assert again.target.dtype == torch.bfloat16
    ids = torch.randint(0, model.config.vocab_size, (1, 10))
    with torch.no_grad():
        _, hidden = model.train_logits(ids)
        want, _ = head(hidden[:, :-1], ids[:, 1:])
        got, _ = again(hidden[:, :-1].bfloat16(), ids[:, 1:])
    # bfloat16 keeps 8 bits of mantissa: the head's logits agree to its rounding.
    torch.testing.assert_close(got.float(), want, atol=0.1, rtol=0.05)


def test_a_checkpoint_without_mtp_is_refused(model: HybridModel, tmp_path: Path) -> None:
    save_checkpoint(tmp_path, model)
    with pytest.raises(CheckpointFormatError, match="no usable MTP head"):
        load_mtp(tmp_path)

