"""Input replay: reference agreement, prefix-only reads, and equality with verify's states."""

from __future__ import annotations

import pytest
import torch

from speckernels import ops


def _accept(bsz: int, seq: int) -> torch.Tensor:
    """Random accept indices covering a skip (-1), a full accept and a random partial one."""
    idx = torch.randint(0, seq, (bsz,))
    idx[0], idx[-1] = -1, seq - 1
    return idx[torch.randperm(bsz)]


def _poison_after(x: torch.Tensor, accept: torch.Tensor) -> torch.Tensor:
    """NaN in every recorded position after a row's accepted one: replay must not read it."""
    x = x.clone()
    for b, j in enumerate(accept.tolist()):
        x[b, j + 1 :] = float("nan")
    return x


@pytest.mark.parametrize("l2norm", [False, True], ids=["prenormed", "l2norm"])
def test_replay_matches_reference_and_reads_prefix_only(
    gdn_inputs, check, triton_backend, l2norm
):
    """Replay over NaN-poisoned tails equals the reference replay over clean inputs."""
    inp = gdn_inputs(bsz=3, seq=4, heads=2, hv=4, normalized=not l2norm)
    accept = _accept(3, 4)
    rec = [_poison_after(inp[n], accept) for n in ("k", "v", "g", "beta")]
    pool, pool_ref = inp["state"].clone(), inp["state"].clone()
    ops.gdn_replay(*rec, pool, accept, state_indices=inp["slots"], use_qk_l2norm=l2norm,
                   backend=triton_backend)  # fmt: skip
    clean = [inp[n] for n in ("k", "v", "g", "beta")]
    ops.gdn_replay(*clean, pool_ref, accept, state_indices=inp["slots"], use_qk_l2norm=l2norm,
                   backend="torch")  # fmt: skip
    check("pool", pool, pool_ref, 1e-5)
    skipped = inp["slots"][accept < 0]
    assert torch.equal(pool[skipped], inp["state"][skipped]), "a -1 row changed"


@pytest.mark.parametrize("backend", ["triton", "torch"])
def test_replay_equals_verify_intermediate(gdn_inputs, check, triton_backend, backend):
    """The input_replay commit lands on the per_token state at the same index."""
    inp = gdn_inputs(bsz=3, seq=4, heads=1, hv=2)
    accept = _accept(3, 4)
    _, inter = ops.gdn_verify(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"],
                              inp["state"], state_indices=inp["slots"],
                              backend=triton_backend)  # fmt: skip
    pool = inp["state"].clone()
    ops.gdn_replay(inp["k"], inp["v"], inp["g"], inp["beta"], pool, accept,
                   state_indices=inp["slots"], backend=backend)  # fmt: skip
    done = accept >= 0
    rows = torch.arange(3)[done]
    check(f"replay-vs-intermediate[{backend}]", pool[inp["slots"][done]],
          inter[rows, accept[done]], 1e-6)  # fmt: skip


def test_replay_bf16_inputs(gdn_inputs, check, triton_backend):
    """Recorded inputs in bf16 (the model dtype) replay like the reference."""
    inp = gdn_inputs(bsz=2, seq=3, heads=2, hv=2, dtype=torch.bfloat16)
    accept = torch.tensor([2, 0])
    pool, pool_ref = inp["state"].clone(), inp["state"].clone()
    args = (inp["k"], inp["v"], inp["g"], inp["beta"])
    ops.gdn_replay(*args, pool, accept, state_indices=inp["slots"], backend=triton_backend)
    ops.gdn_replay(*args, pool_ref, accept, state_indices=inp["slots"], backend="torch")
    check("pool", pool, pool_ref, 1e-5)
