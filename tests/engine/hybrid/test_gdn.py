"""The gated delta rule's chunked form against its recurrent form (both in
`speckernels.reference`, which the GDN layer calls), and the conv helper against torch's
padded conv1d (the formulation transformers uses)."""

import pytest
import torch
import torch.nn.functional as F

from engine.hybrid.gdn import LayerInputs, causal_conv, replay_inputs_
from speckernels.backend import KernelBackend
from speckernels.reference import chunk_gated_delta, delta_step_, gdn_recurrence, l2norm, readout


def _inputs(length: int, heads: int = 3, dk: int = 8, dv: int = 6) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(length)
    q = l2norm(torch.randn(2, length, heads, dk, generator=gen)) * dk**-0.5
    k = l2norm(torch.randn(2, length, heads, dk, generator=gen))
    v = torch.randn(2, length, heads, dv, generator=gen)
    g = -torch.rand(2, length, heads, generator=gen)
    beta = torch.rand(2, length, heads, generator=gen)
    state = torch.randn(2, heads, dk, dv, generator=gen)
    return q, k, v, g, beta, state


@pytest.mark.parametrize(("length", "chunk"), [(2, 64), (7, 64), (64, 16), (50, 16)])
def test_chunked_matches_recurrent(length: int, chunk: int) -> None:
    q, k, v, g, beta, state = _inputs(length)
    out, final = chunk_gated_delta(q, k, v, g, beta, state, chunk_size=chunk)
    running = state.clone()
    expected = []
    for t in range(length):
        delta_step_(running, k[:, t], v[:, t], g[:, t], beta[:, t])
        expected.append(readout(q[:, t], running))
    torch.testing.assert_close(out, torch.stack(expected, dim=1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(final, running, rtol=1e-5, atol=1e-5)


def test_states_and_replay_are_bitwise_the_same_steps() -> None:
    q, k, v, g, beta, state = _inputs(5)
    _, states, _ = gdn_recurrence(q, k, v, g, beta, state, scale=1.0)
    conv = torch.randn(2, 4, 3)
    inputs = LayerInputs(q=q, k=k, v=v, g=g, beta=beta, conv_in=torch.randn(2, 4, 5))
    live = state.clone()
    replay_inputs_(conv, live, inputs, 3, KernelBackend.TORCH)
    assert torch.equal(live, states[:, 2])
    assert torch.equal(conv, torch.cat((torch.zeros(2, 4, 0), inputs.conv_in[..., :3]), -1))


@pytest.mark.parametrize("taps", [2, 3, 4])
def test_causal_conv_matches_padded_conv1d(taps: int) -> None:
    x = torch.randn(2, 5, 9)
    weight = torch.randn(5, 1, taps)
    out, full = causal_conv(torch.zeros(2, 5, taps - 1), x, weight)
    expected = F.silu(F.conv1d(x, weight, padding=taps - 1, groups=5)[..., :9])
    torch.testing.assert_close(out, expected)
    assert torch.equal(full[..., -(taps - 1):], x[..., -(taps - 1):])
