"""The training pieces: the differentiable forward, the batches, the schedule, and a
tiny run whose loss must fall."""

import pytest
import torch

from engine.hybrid import HybridModel
from engine.hybrid.mtp import MtpHead
from engine.hybrid.tokenizer import END_OF_TEXT, IM_START, decode
from engine.training.configs import PhaseConfig
from engine.training.conversations import Conversation, Turn
from engine.training.data import TokenStream
from engine.training.loop import init_weights, learning_rate, run_phase
from engine.training.train import lm_loss, mtp_loss
from tests.engine.training.tiny import tiny_config

ANSWERS = ["    return a + b", "    for x in xs:\n        yield x * 2", "    self.items = []"]


def _stream() -> TokenStream:
    conversations = [
        Conversation(f"m{i}.py", (Turn(f"Complete this function:\n\ndef f{i}(a, b):",
                                       ANSWERS[i % 3]),
                                  Turn("Now complete this one:\n\ndef g(self):",
                                       ANSWERS[(i + 1) % 3])))
        for i in range(12)
    ]
    return TokenStream(conversations)


@pytest.fixture(scope="module")
def trained() -> tuple[HybridModel, list[float]]:
    """The tiny model after 40 steps on the toy conversations, and its losses."""
    torch.manual_seed(0)
    model = HybridModel(tiny_config())
    init_weights(model)
    phase = PhaseConfig("tiny", share=1.0, batch_size=4, seq_len=48, lr=1e-2, steps=40)
    result = run_phase(phase, model.parameters(), lm_loss(model, 0.25), _stream(), 60.0,
                       torch.Generator().manual_seed(0), log=lambda _: None)
    assert result.steps == 40 and result.tokens == 40 * 4 * 48
    return model.requires_grad_(False), [row.loss for row in result.rows]


def test_train_logits_match_serving_forward_and_carry_gradients(model: HybridModel) -> None:
    ids = torch.randint(0, model.config.vocab_size, (2, 70))  # more than one GDN chunk
    logits, hidden = model.train_logits(ids)
    torch.testing.assert_close(logits.detach(), model(ids), atol=1e-5, rtol=1e-5)
    assert hidden.shape == (2, 70, model.config.hidden_size)
    logits.logsumexp(-1).mean().backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and g.abs().sum() > 0 for g in grads)


def test_windows_start_at_conversations() -> None:
    stream = _stream()
    batch = stream.batch(8, 40, torch.Generator().manual_seed(0))
    assert batch.tokens.shape == batch.answer.shape == (8, 40)
    assert (batch.tokens[:, 0] == IM_START).all()
    assert int((stream.tokens == END_OF_TEXT).sum()) == len(stream.starts)
    # Answers are exactly the tokens after each assistant header, through im_end.
    assert decode(stream.tokens[stream.answer].tolist()).count("<|im_end|>") == 24
    assert "user" not in decode(stream.tokens[stream.answer].tolist())
    weights = batch.target_weights(0.25)
    answer = batch.answer[:, 1:]
    assert weights.sum() == pytest.approx(1.0)
    torch.testing.assert_close(weights[answer], 4 * weights[~answer][:answer.sum()])

def test_schedule_warms_up_then_decays() -> None:
    phase = PhaseConfig("p", share=1.0, lr=1e-3, warmup=0.1, min_lr_ratio=0.1)
    assert learning_rate(phase, 0.0) == 0.0
    assert learning_rate(phase, 0.1) == pytest.approx(1e-3)
    assert learning_rate(phase, 0.55) == pytest.approx(0.55e-3)
    assert learning_rate(phase, 1.0) == pytest.approx(1e-4)


def test_tiny_run_lowers_the_loss(trained: tuple[HybridModel, list[float]]) -> None:
    _, losses = trained
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 1.5


def test_mtp_phase_lowers_its_loss_and_leaves_the_target_alone(
    trained: tuple[HybridModel, list[float]],
) -> None:
    model, _ = trained
    before = {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(1)
    head = MtpHead(model)
    init_weights(head)
    phase = PhaseConfig("mtp", share=1.0, batch_size=4, seq_len=48, lr=1e-2, steps=30)
    result = run_phase(phase, head.parameters(), mtp_loss(head, 0.25), _stream(), 60.0,
                       torch.Generator().manual_seed(1), log=lambda _: None)
    losses = [row.loss for row in result.rows]
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.5
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(tensor, before[name])


def test_short_sequences_are_refused(model: HybridModel) -> None:
    with pytest.raises(Exception, match="length >= 2"):
        model.train_logits(torch.zeros(1, 1, dtype=torch.long))
