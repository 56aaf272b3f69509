"""Causal conv1d update over several positions and the conv half of input replay."""

from __future__ import annotations

import pytest
import torch

from speckernels import ops
from speckernels.testing import poison_


def _conv_case(bsz: int, channels: int, seq: int, width: int, taps: int, dtype: torch.dtype):
    """x as the (B, C, T) transpose of a (B, T, C) projection, as the model produces it."""
    pool = bsz + 1
    x = torch.randn(bsz, seq, channels).to(dtype).transpose(1, 2)  # (B, C, T) view
    conv_state = torch.randn(pool, channels, width).to(dtype)  # (N, C, S)
    weight = torch.randn(channels, taps).to(dtype)
    bias = torch.randn(channels).to(dtype)
    slots = torch.randperm(pool)[:bsz]
    return x, conv_state, weight, bias, slots


def _run(x, conv_state, weight, bias, slots, backend, *, commit, activation, poisoned=True):
    """conv_update on a copy of the pool into poisoned out/intermediate buffers."""
    pool = conv_state.clone()
    bsz, channels, seq = x.shape
    out = torch.empty(bsz, seq, channels, dtype=x.dtype).transpose(1, 2)  # (B, C, T)
    inter = torch.empty(bsz, seq, channels, conv_state.shape[2], dtype=conv_state.dtype)
    if poisoned:
        poison_(out), poison_(inter)
    out, inter = ops.conv_update(x, pool, weight, bias, state_indices=slots, intermediate=inter,
                                 out=out, commit=commit, activation=activation,
                                 backend=backend)  # fmt: skip
    return out, inter, pool


CASES = [
    # (B, C, T, S, KW, dtype, bias, activation)
    pytest.param(2, 6, 4, 4, 4, torch.float32, True, "silu", id="hf-window"),
    pytest.param(2, 5, 3, 3, 4, torch.float32, False, None, id="kw-minus-1-window"),
    pytest.param(1, 7, 5, 2, 3, torch.bfloat16, True, "silu", id="bf16-long-batch"),
]


@pytest.mark.parametrize(
    ("bsz", "channels", "seq", "width", "taps", "dtype", "use_bias", "activation"), CASES
)
@pytest.mark.parametrize("commit", [False, True], ids=["deferred", "commit"])
def test_conv_update_matches_reference(
    check, triton_backend, bsz, channels, seq, width, taps, dtype, use_bias, activation, commit
):
    """Outputs, per-position windows and the live pool agree with the reference."""
    x, conv_state, weight, bias, slots = _conv_case(bsz, channels, seq, width, taps, dtype)
    bias = bias if use_bias else None
    args = (x, conv_state, weight, bias, slots)
    out, inter, pool = _run(*args, triton_backend, commit=commit, activation=activation)
    o_ref, i_ref, p_ref = _run(*args, "torch", commit=commit, activation=activation,
                               poisoned=False)  # fmt: skip
    check("out", out, o_ref, 1e-2 if dtype == torch.bfloat16 else 1e-6)
    check("windows", inter, i_ref, 0.0)  # windows are copies: exact
    check("pool", pool, p_ref, 0.0)
    if not commit:
        assert torch.equal(pool, conv_state), "deferred conv update wrote the live window"


def test_conv_replay_equals_saved_window_and_reads_prefix_only(check, triton_backend):
    """conv_replay over NaN-poisoned tails lands bitwise on conv_update's saved window."""
    x, conv_state, weight, bias, slots = _conv_case(3, 6, 5, 3, 4, torch.float32)
    _, inter, _ = _run(x, conv_state, weight, bias, slots, triton_backend, commit=False,
                       activation="silu")  # fmt: skip
    accept = torch.tensor([4, -1, 1])
    x_rec = x.clone()
    for b, j in enumerate(accept.tolist()):
        x_rec[b, :, j + 1 :] = float("nan")
    for backend in (triton_backend, "torch"):
        pool = conv_state.clone()
        ops.conv_replay(x_rec, pool, accept, state_indices=slots, backend=backend)
        for b, j in enumerate(accept.tolist()):
            want = conv_state[slots[b]] if j < 0 else inter[b, j]
            check(f"window[{backend}]", pool[slots[b]], want, 0.0)


def test_conv_weight_in_conv1d_layout(check, triton_backend):
    """nn.Conv1d's (C, 1, KW) weight is accepted as well as (C, KW)."""
    x, conv_state, weight, bias, slots = _conv_case(2, 4, 2, 3, 4, torch.float32)
    out, _ = ops.conv_update(x, conv_state.clone(), weight[:, None], bias, state_indices=slots,
                             backend=triton_backend)  # fmt: skip
    ref, _ = ops.conv_update(x, conv_state.clone(), weight, bias, state_indices=slots,
                             backend="torch")  # fmt: skip
    check("out", out, ref, 1e-6)


def test_conv_commit_to_spare_slot(check, triton_backend):
    """dst_indices writes the last window into spare slots; the read slots stay as they were."""
    x, conv_state, weight, bias, slots = _conv_case(2, 4, 3, 3, 4, torch.float32)
    pool = torch.cat([conv_state, conv_state])  # (2N, C, S): second half spare
    spare = slots + conv_state.shape[0]
    _, wins = ops.conv_update(x, pool, weight, bias, state_indices=slots, dst_indices=spare,
                              commit=True, backend=triton_backend)  # fmt: skip
    assert torch.equal(pool[slots], conv_state[slots])
    check("spare", pool[spare], wins[:, -1], 0.0)
