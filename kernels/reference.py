"""Pure torch references for every kernel in this package.

These are the truth the Triton kernels are tested against, and the code the torch backend
runs on CPU. They follow HF transformers' Qwen3.5 ``torch_recurrent_gated_delta_rule`` and
``causal_conv1d_update`` (same step order, fp32 state), extended with what speculative
decoding needs: the state after every position, a slot pool, and deferred commit.

Shapes (shared with ``kernels.ops``):
    q, k        (B, T, H, K)     H divides HV; value head hv reads q/k head hv // (HV // H),
                                 which is HF's ``repeat_interleave`` on dim 2
    v           (B, T, HV, V)
    g, beta     (B, T, HV)       g is the log decay (<= 0), beta the write strength
    state       (N, HV, K, V)    fp32 live pool; sequence b lives in slot state_indices[b]
    per-position states (B, T, HV, K, V)
    conv x      (B, C, T)        HF layout (channels before time)
    conv_state  (N, C, S)        the last S inputs, oldest first (S = KW in HF, KW - 1 in
                                 causal-conv1d and engine/hybrid); weight (C, KW)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """L2-normalise the last dim exactly as HF's ``l2norm`` (x * rsqrt(sum(x^2) + eps))."""
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + eps)


def _prepare_qk(x: torch.Tensor, hv: int, use_qk_l2norm: bool, eps: float) -> torch.Tensor:
    """(B, T, H, K) -> (B, T, HV, K) fp32, grouped heads expanded and optionally normalised."""
    h = x.shape[2]
    if hv % h != 0:
        raise ValueError(f"value heads ({hv}) must be a multiple of q/k heads ({h})")
    x = x.float()
    if h != hv:
        x = x.repeat_interleave(hv // h, dim=2)
    # Normalise in fp32 after the cast, as HF does, so both backends see the same rounding.
    return l2norm(x, eps) if use_qk_l2norm else x


def gdn_recurrence(
    q: torch.Tensor | None,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    initial_state: torch.Tensor,
    *,
    scale: float | None = None,
    use_qk_l2norm: bool = False,
    eps: float = 1e-6,
    steps: torch.Tensor | None = None,
) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor]:
    """Run the gated delta rule from ``initial_state`` (B, HV, K, V) over T positions.

    Returns ``(o, states, final)``: o (B, T, HV, V) fp32 or None when q is None, states
    (B, T, HV, K, V) the state after each position, final (B, HV, K, V). With ``steps``
    (B,) only the first steps[b] positions of row b advance its state (prefix replay); the
    later entries of ``states`` then repeat the final state.
    """
    hv, kdim = v.shape[2], k.shape[3]
    scale = kdim**-0.5 if scale is None else scale
    kf = _prepare_qk(k, hv, use_qk_l2norm, eps)  # (B, T, HV, K)
    qf = None if q is None else _prepare_qk(q, hv, use_qk_l2norm, eps) * scale
    vf, gf, bf = v.float(), g.float(), beta.float()
    s = initial_state.float().clone()  # (B, HV, K, V)
    outs, states = [], []
    for t in range(v.shape[1]):
        k_t = kf[:, t]  # (B, HV, K)
        s_new = s * gf[:, t].exp()[..., None, None]
        kv_mem = (s_new * k_t[..., None]).sum(dim=-2)  # (B, HV, V)
        delta = (vf[:, t] - kv_mem) * bf[:, t][..., None]
        s_new = s_new + k_t[..., None] * delta[..., None, :]
        if steps is not None:
            # Rows whose prefix is exhausted keep their state: replay never looks past it.
            active = (steps > t).view(-1, 1, 1, 1)
            s_new = torch.where(active, s_new, s)
        s = s_new
        states.append(s)
        if qf is not None:
            outs.append((s * qf[:, t][..., None]).sum(dim=-2))  # (B, HV, V)
    o = torch.stack(outs, dim=1) if qf is not None else None
    return o, torch.stack(states, dim=1), s


def gdn_verify_ref(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor,
    state_indices: torch.Tensor,
    *,
    intermediate: torch.Tensor | None,
    commit: bool,
    dst_indices: torch.Tensor | None = None,
    scale: float | None = None,
    use_qk_l2norm: bool = False,
    eps: float = 1e-6,
) -> torch.Tensor:
    """Verify T positions per sequence; see ``kernels.ops.gdn_verify`` for the contract.

    Writes the per-position states into ``intermediate`` (B, T, HV, K, V) when given, and
    the final state into ``state[dst_indices]`` (default: the read slots) only when
    ``commit``. Returns o in v's dtype.
    """
    o, states, final = gdn_recurrence(
        q, k, v, g, beta, state[state_indices], scale=scale, use_qk_l2norm=use_qk_l2norm, eps=eps
    )
    if intermediate is not None:
        intermediate.copy_(states)
    if commit:
        dst = state_indices if dst_indices is None else dst_indices
        state[dst] = final.to(state.dtype)
    return o.to(v.dtype)


def gdn_commit_ref(
    state: torch.Tensor,
    intermediate: torch.Tensor,
    accept_idx: torch.Tensor,
    state_indices: torch.Tensor,
) -> None:
    """state[l, slot_b] = intermediate[l, b, accept_idx[b]] for every row with idx >= 0.

    Layer-stacked layout: state (L, N, *R), intermediate (L, B, T, *R); ``kernels.ops`` adds
    the L dim for per-layer tensors. Rows with accept_idx -1 are left alone.
    """
    rows = torch.nonzero(accept_idx >= 0).flatten()
    if rows.numel() == 0:
        return
    idx = accept_idx[rows].long()
    slots = state_indices[rows].long()
    state[:, slots] = intermediate[:, rows, idx].to(state.dtype)


def gdn_replay_ref(
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor,
    accept_idx: torch.Tensor,
    state_indices: torch.Tensor,
    *,
    use_qk_l2norm: bool = False,
    eps: float = 1e-6,
) -> None:
    """Advance state[slot_b] over positions 0..accept_idx[b] of the recorded inputs, in place.

    Rows with accept_idx -1 keep their state. q is not needed: the state never reads it.
    """
    rows = torch.nonzero(accept_idx >= 0).flatten()
    if rows.numel() == 0:
        return
    steps = accept_idx[rows].long() + 1
    n = int(steps.max())
    slots = state_indices[rows].long()
    _, _, final = gdn_recurrence(
        None,
        k[rows, :n],
        v[rows, :n],
        g[rows, :n],
        beta[rows, :n],
        state[slots],
        use_qk_l2norm=use_qk_l2norm,
        eps=eps,
        steps=steps,
    )
    state[slots] = final.to(state.dtype)


def conv_windows(x: torch.Tensor, window: torch.Tensor, width: int) -> torch.Tensor:
    """Slices of ext = [window, x] that end at each new position, ``width`` long.

    x (B, C, T), window (B, C, S) with S >= width - 1 -> (B, T, C, width); with width = S
    these are the windows kept after each position, with width = KW the conv inputs.
    """
    s = window.shape[-1]
    ext = torch.cat([window, x.to(window.dtype)], dim=-1)  # (B, C, S + T)
    return ext[..., s + 1 - width :].unfold(-1, width, 1).permute(0, 2, 1, 3)


def conv_update_ref(
    x: torch.Tensor,
    conv_state: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    state_indices: torch.Tensor,
    *,
    activation: str | None,
    intermediate: torch.Tensor | None,
    commit: bool,
    dst_indices: torch.Tensor | None = None,
) -> torch.Tensor:
    """Depthwise causal conv over T new positions of x (B, C, T); returns (B, C, T).

    conv_state (N, C, S) holds the last S inputs, weight (C, KW) with S >= KW - 1 (HF keeps
    S = KW, causal-conv1d and this project's engine S = KW - 1). The output at t is
    sum_w weight[c, w] * input[t - KW + 1 + w] + bias, then SiLU, accumulated in fp32 over
    inputs rounded to the window dtype. The window after each position goes to
    ``intermediate`` (B, T, C, S) when given, and the last one to slot ``dst_indices``
    (default: the read slots) on ``commit``.
    """
    window = conv_state[state_indices]  # (B, C, S)
    taps = conv_windows(x, window, weight.shape[-1])  # (B, T, C, KW)
    out = (taps.float() * weight.float()).sum(-1)  # (B, T, C)
    if bias is not None:
        out = out + bias.float()
    if activation in ("silu", "swish"):
        out = F.silu(out)
    elif activation is not None:
        raise ValueError(f"unsupported activation {activation!r}")
    if intermediate is not None or commit:
        wins = conv_windows(x, window, window.shape[-1])  # (B, T, C, S)
        if intermediate is not None:
            intermediate.copy_(wins)
        if commit:
            dst = state_indices if dst_indices is None else dst_indices
            conv_state[dst] = wins[:, -1].to(conv_state.dtype)
    return out.transpose(1, 2).to(x.dtype)


def conv_replay_ref(
    x: torch.Tensor,
    conv_state: torch.Tensor,
    accept_idx: torch.Tensor,
    state_indices: torch.Tensor,
) -> None:
    """Slide conv_state[slot_b] over positions 0..accept_idx[b] of the recorded x (B, C, T)."""
    rows = torch.nonzero(accept_idx >= 0).flatten()
    if rows.numel() == 0:
        return
    slots = state_indices[rows].long()
    window = conv_state[slots]  # (R, C, S)
    wins = conv_windows(x[rows], window, window.shape[-1])  # (R, T, C, S)
    picked = wins[torch.arange(rows.numel(), device=x.device), accept_idx[rows].long()]
    conv_state[slots] = picked.to(conv_state.dtype)
