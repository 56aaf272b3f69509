"""The one torch implementation of the gated delta rule (S <- exp(g) S; S <- S + k ⊗
beta (v - kᵀS); o = qᵀS, S fp32): the truth the Triton kernels are tested against, and the
code the engine's GDN layer runs on CPU (decode, per-token capture and replay all step
through ``delta_step_``, so they agree bit for bit; prefill uses the chunked form). They
follow HF transformers' Qwen3.5 ``torch_recurrent_gated_delta_rule`` and
``causal_conv1d_update``, extended with what speculative decoding needs: the state after
every position, a slot pool, and deferred commit.

Shapes (shared with ``speckernels.ops``):
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


def delta_step_(state: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
                beta: torch.Tensor) -> None:
    """Advance `state` (B, H, K, V) in place by one position: k (B, H, K), v (B, H, V),
    g and beta (B, H)."""
    k, v = k.contiguous(), v.contiguous()
    state.mul_(g.exp()[..., None, None])
    predicted = (k.unsqueeze(-2) @ state).squeeze(-2)  # (B, H, V)
    delta = (v - predicted) * beta.unsqueeze(-1)
    state.addcmul_(k.unsqueeze(-1), delta.unsqueeze(-2))


def readout(q: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """qᵀS: q (B, H, K), state (B, H, K, V) -> (B, H, V)."""
    return (q.contiguous().unsqueeze(-2) @ state).squeeze(-2)


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
    # (T, B, ...) copies up front: each step's slice is contiguous, delta_step_ copies nothing
    ks = _prepare_qk(k, hv, use_qk_l2norm, eps).transpose(0, 1).contiguous()
    vs = v.float().transpose(0, 1).contiguous()
    qf = None if q is None else _prepare_qk(q, hv, use_qk_l2norm, eps) * scale
    gf, bf = g.float(), beta.float()
    s = initial_state.float().clone()  # (B, HV, K, V)
    outs, states = [], []
    for t in range(v.shape[1]):
        before = None if steps is None else s.clone()
        delta_step_(s, ks[t], vs[t], gf[:, t], bf[:, t])
        if before is not None:
            # Rows whose prefix is exhausted keep their state: replay never looks past it.
            s = torch.where((steps > t).view(-1, 1, 1, 1), s, before)
        states.append(s.clone())
        if qf is not None:
            outs.append(readout(qf[:, t], s))  # (B, HV, V)
    o = torch.stack(outs, dim=1) if qf is not None else None
    return o, torch.stack(states, dim=1), s


def chunk_gated_delta(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
    state: torch.Tensor, chunk_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunked (parallel) gated delta rule over T positions from `state` (not modified).
    q, k (B, T, H, K) (prepared: normalised, q scaled); v (B, T, H, V); g, beta (B, T, H).
    Returns the outputs (B, T, H, V) and the final state (B, H, K, V). Within a chunk the
    T sequential rank-1 updates become one unit-lower-triangular solve (the UT transform)."""
    length, dk, dv = k.shape[1], k.shape[-1], v.shape[-1]
    size = min(chunk_size, length)
    pad = (-length) % size
    # Padded positions have k = 0 and g = 0: they neither write nor decay the state.
    q, k, v = (F.pad(x.transpose(1, 2), (0, 0, 0, pad)) for x in (q, k, v))  # (B, H, T', D)
    g, beta = (F.pad(x.transpose(1, 2), (0, pad)) for x in (g, beta))  # (B, H, T')
    batch, heads = q.shape[:2]
    q, k, v = (x.reshape(batch, heads, -1, size, x.shape[-1]) for x in (q, k, v))  # (B,H,N,C,D)
    g, beta = (x.reshape(batch, heads, -1, size) for x in (g, beta))  # (B, H, N, C)

    g_cum = g.cumsum(-1)
    causal = torch.ones(size, size, dtype=torch.bool, device=q.device).tril()
    # Mask before exp: above the diagonal the difference is positive and could overflow.
    decay = (g_cum[..., :, None] - g_cum[..., None, :]).masked_fill(~causal, -torch.inf).exp()
    k_beta = k * beta[..., None]
    system = (k_beta @ k.transpose(-1, -2)) * decay  # (B, H, N, C, C); diagonal ignored
    rhs = torch.cat((v * beta[..., None], k_beta * g_cum.exp()[..., None]), dim=-1)
    solved = torch.linalg.solve_triangular(system, rhs, upper=False, unitriangular=True)
    new_values, decayed_keys = solved.split((dv, dk), dim=-1)  # (B,H,N,C,V), (B,H,N,C,K)

    intra = (q @ k.transpose(-1, -2)) * decay  # (B, H, N, C, C)
    q_decayed = q * g_cum.exp()[..., None]
    k_to_end = k * (g_cum[..., -1:] - g_cum).exp()[..., None]
    chunk_decay = g_cum[..., -1].exp()[..., None, None]  # (B, H, N, 1, 1)

    s = state
    out = torch.empty_like(new_values)
    for i in range(q.shape[2]):
        v_new = new_values[:, :, i] - decayed_keys[:, :, i] @ s  # (B, H, C, V)
        out[:, :, i] = q_decayed[:, :, i] @ s + intra[:, :, i] @ v_new
        s = s * chunk_decay[:, :, i] + k_to_end[:, :, i].transpose(-1, -2) @ v_new
    out = out.reshape(batch, heads, -1, dv)[:, :, :length].transpose(1, 2)  # (B, T, H, V)
    return out, s


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
    """Verify T positions per sequence; see ``speckernels.ops.gdn_verify`` for the contract.

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

    Layer-stacked layout: state (L, N, *R), intermediate (L, B, T, *R); ``speckernels.ops`` adds
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
