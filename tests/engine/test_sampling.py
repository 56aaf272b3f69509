"""Verification rules: greedy equals argmax; rejection sampling is lossless."""

import pytest
import torch

from engine.errors import ConfigError
from engine.sampling import SamplingParams, probs, rejection_targets, verify_targets
from engine.speculative import count_accepted


def test_greedy_targets_are_the_argmax() -> None:
    logits = torch.randn(5, 11)
    assert verify_targets(logits, [1, 2, 3, 4], None, SamplingParams(), None) == \
        logits.argmax(-1).tolist()


def test_top_k_and_top_p_filter_the_distribution() -> None:
    logits = torch.tensor([[4.0, 3.0, 2.0, 1.0, 0.0]])
    pk = probs(logits, SamplingParams(temperature=1.0, top_k=2))
    assert (pk[0, 2:] == 0).all() and pk[0, :2].sum() == pytest.approx(1.0)
    pp = probs(logits, SamplingParams(temperature=1.0, top_p=0.5))
    assert pp[0, 0] == pytest.approx(1.0)  # the top token alone already holds > 50%


def test_bad_sampling_params_are_rejected() -> None:
    for kw in ({"temperature": -1.0}, {"top_k": -2}, {"top_p": 0.0}):
        with pytest.raises(ConfigError):
            SamplingParams(**kw)


@pytest.mark.parametrize("with_q", [False, True])
def test_rejection_sampling_keeps_the_target_distribution(with_q: bool) -> None:
    # The first committed token must be distributed as the target's p_0, whatever q is.
    torch.manual_seed(0)
    vocab, n = 6, 4000
    logits = torch.randn(2, vocab)
    q = torch.softmax(torch.randn(1, vocab), -1) if with_q else None
    params = SamplingParams(temperature=1.0)
    gen = torch.Generator().manual_seed(1234)
    counts = torch.zeros(vocab)
    draft_gen = torch.Generator().manual_seed(99)
    for _ in range(n):
        d = int(torch.multinomial(q[0], 1, generator=draft_gen)) if q is not None else 2
        targets = rejection_targets(logits, [d], q, params, gen)
        counts[targets[0]] += 1
    expected = probs(logits, params)[0]
    assert torch.allclose(counts / n, expected, atol=0.03)  # ~4 standard errors


def test_same_seed_same_outcome() -> None:
    logits = torch.randn(4, 9)
    params = SamplingParams(temperature=0.8, top_k=5)
    runs = [rejection_targets(logits, [1, 2, 3], None, params,
                              torch.Generator().manual_seed(7)) for _ in range(2)]
    assert runs[0] == runs[1]
    j = count_accepted([1, 2, 3], runs[0])
    assert 0 <= j <= 3 and len(runs[0]) == 4
