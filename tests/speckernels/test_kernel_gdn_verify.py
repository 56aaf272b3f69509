"""The verify kernel against its torch reference, and the properties the engine relies on."""

from __future__ import annotations

import pytest
import torch

from speckernels import ops
from speckernels.reference import gdn_recurrence
from speckernels.testing import poison_

CASES = [
    # (B, T, H, HV, K, V, dtype, l2norm)
    pytest.param(2, 5, 2, 2, 16, 16, torch.float32, False, id="plain"),
    pytest.param(2, 4, 2, 4, 16, 16, torch.float32, True, id="grouped-l2norm"),
    pytest.param(1, 3, 1, 2, 12, 20, torch.float32, False, id="odd-dims"),
    pytest.param(3, 4, 2, 4, 16, 16, torch.bfloat16, True, id="bf16-inputs"),
]


def _run(inp: dict, backend: str, *, commit: bool, l2norm: bool, poisoned: bool = True):
    """Verify on a copy of the pool with NaN-poisoned output buffers; returns (o, inter, pool)."""
    pool = inp["state"].clone()
    bsz, seq, hv, vdim = inp["v"].shape
    kdim = inp["k"].shape[-1]
    out = torch.empty(bsz, seq, hv, vdim, dtype=inp["v"].dtype)
    inter = torch.empty(bsz, seq, hv, kdim, vdim)
    if poisoned:
        poison_(out), poison_(inter)
    o, inter = ops.gdn_verify(
        inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], pool,
        state_indices=inp["slots"], intermediate=inter, out=out, commit=commit,
        use_qk_l2norm=l2norm, backend=backend,
    )  # fmt: skip
    return o, inter, pool


@pytest.mark.parametrize(("bsz", "seq", "heads", "hv", "kdim", "vdim", "dtype", "l2norm"), CASES)
@pytest.mark.parametrize("commit", [False, True], ids=["deferred", "commit"])
def test_verify_matches_reference(
    gdn_inputs, check, triton_backend, bsz, seq, heads, hv, kdim, vdim, dtype, l2norm, commit
):
    """Outputs, per-position states and the live pool agree with the torch reference."""
    inp = gdn_inputs(bsz, seq, heads, hv, kdim, vdim, dtype, normalized=not l2norm)
    o, inter, pool = _run(inp, triton_backend, commit=commit, l2norm=l2norm)
    o_ref, inter_ref, pool_ref = _run(inp, "torch", commit=commit, l2norm=l2norm, poisoned=False)
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5  # o is stored in bf16
    check("o", o, o_ref, tol)
    check("intermediate", inter, inter_ref, 1e-5)
    check("pool", pool, pool_ref, 1e-5)
    if commit:
        slots = inp["slots"]
        assert torch.equal(pool[slots], inter[:, -1]), "committed state != last intermediate"
    others = torch.ones(pool.shape[0], dtype=torch.bool)
    others[inp["slots"]] = False
    assert torch.equal(pool[others], inp["state"][others]), "a slot outside the batch changed"


def test_deferred_commit_leaves_live_state_bitwise(gdn_inputs, triton_backend):
    """commit=False must not write the pool at all: every bit of every slot survives."""
    inp = gdn_inputs(bsz=3, seq=4)
    before = inp["state"].clone()
    _, _, pool = _run(inp, triton_backend, commit=False, l2norm=False)
    assert torch.equal(pool.view(torch.int32), before.view(torch.int32))


@pytest.mark.parametrize("l2norm", [False, True])
def test_intermediate_j_is_reference_over_prefix(gdn_inputs, check, triton_backend, l2norm):
    """intermediate[:, j] equals the reference run over positions 0..j only."""
    inp = gdn_inputs(bsz=2, seq=5, heads=2, hv=4, normalized=not l2norm)
    _, inter, _ = _run(inp, triton_backend, commit=False, l2norm=l2norm)
    start = inp["state"][inp["slots"]]
    for j in range(inp["v"].shape[1]):
        cut = slice(0, j + 1)
        _, _, final = gdn_recurrence(
            None, inp["k"][:, cut], inp["v"][:, cut], inp["g"][:, cut], inp["beta"][:, cut],
            start, use_qk_l2norm=l2norm,
        )  # fmt: skip
        check(f"prefix[{j}]", inter[:, j], final, 1e-5)


def test_no_intermediate_mode_is_a_plain_pass(gdn_inputs, check, triton_backend):
    """save_intermediate=False returns None and still commits the right final state."""
    inp = gdn_inputs(bsz=2, seq=4)
    pool = inp["state"].clone()
    o, inter = ops.gdn_verify(
        inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], pool, state_indices=inp["slots"],
        save_intermediate=False, commit=True, backend=triton_backend,
    )  # fmt: skip
    assert inter is None
    o_ref, _, pool_ref = _run(inp, "torch", commit=True, l2norm=False, poisoned=False)
    check("o", o, o_ref)
    check("pool", pool, pool_ref)


def test_non_contiguous_inputs(gdn_inputs, check, triton_backend):
    """q, k, v as slices of one fused projection (how the model produces them) still work."""
    inp = gdn_inputs(bsz=2, seq=3, heads=2, hv=2, kdim=16, vdim=16)
    fused = torch.cat([inp["q"], inp["k"], inp["v"]], dim=-1)  # (B, T, H, 3K)
    q, k, v = fused.split(16, dim=-1)
    assert not q.is_contiguous()
    pool, pool_ref = inp["state"].clone(), inp["state"].clone()
    args = (inp["g"], inp["beta"])
    o, _ = ops.gdn_verify(q, k, v, *args, pool, state_indices=inp["slots"], commit=True,
                          backend=triton_backend)  # fmt: skip
    o_ref, _ = ops.gdn_verify(q.contiguous(), k.contiguous(), v.contiguous(), *args, pool_ref,
                              state_indices=inp["slots"], commit=True, backend="torch")  # fmt: skip
    check("o", o, o_ref)
    check("pool", pool, pool_ref)


def test_commit_to_spare_slot_ping_pong(gdn_inputs, check, triton_backend):
    """dst_indices commits the final state into spare slots and leaves the read slots alone,
    so a full accept can commit by swapping slot indices (input_replay ping-pong)."""
    inp = gdn_inputs(bsz=2, seq=3, heads=2, hv=2)
    pool = inp["state"].clone()  # 4 slots; the batch reads 2 of them
    spare = torch.tensor([s for s in range(pool.shape[0]) if s not in inp["slots"].tolist()])
    _, inter = ops.gdn_verify(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], pool,
                              state_indices=inp["slots"], dst_indices=spare, commit=True,
                              backend=triton_backend)  # fmt: skip
    assert torch.equal(pool[inp["slots"]], inp["state"][inp["slots"]]), "read slots changed"
    check("spare", pool[spare], inter[:, -1], 0.0)
