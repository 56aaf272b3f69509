"""The per_token commit gather against its reference: exact copies, skipped rows, one launch."""

from __future__ import annotations

import pytest
import torch

from speckernels import ops


def _case(layers: int | None, bsz: int = 3, seq: int = 4, pool: int = 5):
    """Random live pools, per-position buffers, accept indices with at least one -1."""
    lead = () if layers is None else (layers,)
    state = torch.randn(*lead, pool, 2, 8, 8)  # (L?, N, HV, K, V)
    inter = torch.randn(*lead, bsz, seq, 2, 8, 8)  # (L?, B, T, HV, K, V)
    conv = torch.randn(*lead, pool, 6, 3).to(torch.bfloat16)  # (L?, N, C, S)
    conv_inter = torch.randn(*lead, bsz, seq, 6, 3).to(torch.bfloat16)  # (L?, B, T, C, S)
    accept = torch.randint(0, seq, (bsz,))
    accept[torch.randint(0, bsz, (1,))] = -1
    slots = torch.randperm(pool)[:bsz]
    return state, inter, conv, conv_inter, accept, slots


@pytest.mark.parametrize("layers", [None, 3], ids=["per-layer", "layer-stacked"])
def test_commit_matches_reference(check, triton_backend, layers):
    """Committed rows become exactly the accepted position's states; NaN-poisoned targets
    prove every element is written, and skipped rows keep their (poisoned) bits."""
    state, inter, conv, conv_inter, accept, slots = _case(layers)
    targets = slots[accept >= 0]
    rows = (targets,) if layers is None else (slice(None), targets)
    state[rows], conv[rows] = float("nan"), float("nan")
    outs = {}
    for backend in (triton_backend, "torch"):
        s, c = state.clone(), conv.clone()
        ops.gdn_commit(s, inter, accept, conv_state=c, conv_intermediate=conv_inter,
                       state_indices=slots, backend=backend)  # fmt: skip
        outs[backend] = (s, c)
    (s, c), (s_ref, c_ref) = outs[triton_backend], outs["torch"]
    for b, (j, slot) in enumerate(zip(accept.tolist(), slots.tolist(), strict=True)):
        if j < 0:
            continue
        if layers is None:
            assert torch.equal(s[slot], inter[b, j]) and torch.equal(c[slot], conv_inter[b, j])
        else:
            assert torch.equal(s[:, slot], inter[:, b, j])
            assert torch.equal(c[:, slot], conv_inter[:, b, j])
    # Skipped rows and slots outside the batch: bitwise what they were.
    assert torch.equal(s.view(torch.int32), s_ref.view(torch.int32))
    assert torch.equal(c.view(torch.int16), c_ref.view(torch.int16))
    check("state", s, s_ref, 0.0)  # also fails on a poisoned element left unwritten
    check("conv", c, c_ref, 0.0)


def test_all_rows_skipped_is_a_no_op(triton_backend):
    """A batch with nothing to commit leaves both pools bitwise unchanged."""
    state, inter, conv, conv_inter, _, slots = _case(None)
    accept = torch.full((slots.numel(),), -1)
    s, c = state.clone(), conv.clone()
    ops.gdn_commit(s, inter, accept, conv_state=c, conv_intermediate=conv_inter,
                   state_indices=slots, backend=triton_backend)  # fmt: skip
    assert torch.equal(s, state) and torch.equal(c, conv)


def test_commit_casts_and_reads_expanded_buffers(check, triton_backend):
    """bf16 per-position states commit into an fp32 pool; a stride-0 T dim is allowed."""
    state = torch.zeros(2, 2, 4, 4)
    base = torch.randn(2, 1, 2, 4, 4).to(torch.bfloat16)
    inter = base.expand(2, 5, 2, 4, 4)  # (B, T, HV, K, V), T stride 0
    accept = torch.tensor([4, 2])
    ops.gdn_commit(state, inter, accept, backend=triton_backend)
    check("state", state, base[:, 0].float(), 0.0)


def test_recurrent_only_commit(check, triton_backend):
    """The conv pair is optional."""
    state, inter, _, _, accept, slots = _case(None)
    s, s_ref = state.clone(), state.clone()
    ops.gdn_commit(s, inter, accept, state_indices=slots, backend=triton_backend)
    ops.gdn_commit(s_ref, inter, accept, state_indices=slots, backend="torch")
    check("state", s, s_ref, 0.0)
