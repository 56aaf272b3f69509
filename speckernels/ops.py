"""Public entry points: the GDN verify/commit/replay and conv update ops, one switch apiece.

Every op takes ``backend`` (``KernelBackend`` or its string): ``auto`` runs the Triton
kernel on CUDA tensors and the torch reference elsewhere. Both backends share validation
and semantics, so a session can record the resolved backend and replay on either.

Index conventions shared by commit and both replays: ``accept_idx[b]`` is the verify-batch
position whose state becomes live, which is the number of accepted drafts when position 0
is the last committed token; -1 means nothing to commit for that row. ``state_indices[b]``
is the pool slot of sequence b (default: slot b); slots must be distinct within a batch, and
a ``dst_indices`` slot may not be another row's read slot.

Triton is imported lazily, inside the triton branch only.
"""

from __future__ import annotations

import torch

from speckernels import reference as ref
from speckernels._validate import (
    check_conv,
    check_gdn,
    dense_tail,
    indices,
    layer_stacked,
    unit_last,
)
from speckernels.backend import KernelBackend, resolve_backend

__all__ = [
    "KernelBackend",
    "conv_replay",
    "conv_update",
    "gdn_commit",
    "gdn_replay",
    "gdn_verify",
    "resolve_backend",
]


def gdn_verify(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor,
    *,
    state_indices: torch.Tensor | None = None,
    intermediate: torch.Tensor | None = None,
    save_intermediate: bool = True,
    commit: bool = False,
    dst_indices: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    scale: float | None = None,
    use_qk_l2norm: bool = False,
    eps: float = 1e-6,
    backend: KernelBackend | str = KernelBackend.AUTO,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Gated delta rule over a verify batch of T positions, from each sequence's live state.

    q, k (B, T, H, K); v (B, T, HV, V); g, beta (B, T, HV); state (N, HV, K, V) fp32 pool.
    HV may be a multiple of H (grouped heads, HF's repeat_interleave order). q is scaled by
    ``scale`` (default K**-0.5); pass 1.0 for pre-scaled q. With ``use_qk_l2norm`` q and k
    are L2-normalised first, as HF's use_qk_l2norm_in_kernel.

    Returns ``(o, intermediate)``: o (B, T, HV, V) in v's dtype, and the state after every
    position (B, T, HV, K, V) (written into ``intermediate`` if given, fp32 allocated
    otherwise; None when ``save_intermediate`` is False). o goes into ``out`` when given
    (preallocated buffers, CUDA graphs). The final state is written only when ``commit``,
    into slot ``dst_indices[b]`` (default: the sequence's own slot; a spare slot gives the
    ``input_replay`` ping-pong where a full accept commits by swapping slot indices).
    ``commit=False`` (deferred commit) leaves the pool bitwise untouched.
    """
    check_gdn(k, v, g, beta, state)
    if q.shape != k.shape:
        raise ValueError(f"q {tuple(q.shape)} and k {tuple(k.shape)} must match")
    bsz, seq, _, kdim = k.shape
    hv, vdim = v.shape[2], v.shape[3]
    slots = indices(state_indices, bsz, state.device, "state_indices")
    dst = slots if dst_indices is None else indices(dst_indices, bsz, state.device, "dst_indices")
    if intermediate is None and save_intermediate:
        intermediate = torch.empty(bsz, seq, hv, kdim, vdim, device=v.device, dtype=torch.float32)
    if intermediate is not None and intermediate.shape != (bsz, seq, hv, kdim, vdim):
        raise ValueError(f"intermediate must be (B, T, HV, K, V), got {tuple(intermediate.shape)}")
    if out is not None and out.shape != v.shape:
        raise ValueError(f"out must be (B, T, HV, V), got {tuple(out.shape)}")
    scale = kdim**-0.5 if scale is None else float(scale)
    if resolve_backend(backend, v.device) is KernelBackend.TORCH:
        o = ref.gdn_verify_ref(
            q, k, v, g, beta, state, slots.long(), intermediate=intermediate, commit=commit,
            dst_indices=dst.long(), scale=scale, use_qk_l2norm=use_qk_l2norm, eps=eps,
        )  # fmt: skip
        return (o if out is None else out.copy_(o)), intermediate
    from speckernels.gdn_verify import gdn_verify_triton

    for name, t in (("state", state), ("intermediate", intermediate)):
        if t is not None and not dense_tail(t, 2):
            raise ValueError(f"{name} needs contiguous (K, V) blocks for the triton backend")
    o = torch.empty(v.shape, device=v.device, dtype=v.dtype) if out is None else out
    if o.stride(-1) != 1:
        raise ValueError("out needs a unit stride on its last dim for the triton backend")
    q, k, v, g, beta = (unit_last(x) for x in (q, k, v, g, beta))
    gdn_verify_triton(
        q, k, v, g, beta, state, slots, o, intermediate,
        commit=commit, dst_indices=dst, scale=scale, use_qk_l2norm=use_qk_l2norm, eps=eps,
    )  # fmt: skip
    return o, intermediate


def gdn_commit(
    state: torch.Tensor,
    intermediate: torch.Tensor,
    accept_idx: torch.Tensor,
    *,
    conv_state: torch.Tensor | None = None,
    conv_intermediate: torch.Tensor | None = None,
    state_indices: torch.Tensor | None = None,
    backend: KernelBackend | str = KernelBackend.AUTO,
) -> None:
    """``per_token`` commit: copy each row's accepted per-position state into its live slot.

    Per layer: state (N, HV, K, V) with intermediate (B, T, HV, K, V), and optionally
    conv_state (N, C, S) with conv_intermediate (B, T, C, S). Layer-stacked, in the same
    single launch: state (L, N, HV, K, V) with intermediate (L, B, T, HV, K, V), conv
    (L, N, C, S) with (L, B, T, C, S). Rows with accept_idx -1 are skipped; values are
    copied exactly (cast only if the dtypes differ).
    """
    state, intermediate, conv_state, conv_intermediate = layer_stacked(
        state, intermediate, conv_state, conv_intermediate
    )
    bsz = intermediate.shape[1]
    accept = indices(accept_idx, bsz, state.device, "accept_idx")
    slots = indices(state_indices, bsz, state.device, "state_indices")
    if resolve_backend(backend, state.device) is KernelBackend.TORCH:
        ref.gdn_commit_ref(state, intermediate, accept, slots)
        if conv_state is not None:
            ref.gdn_commit_ref(conv_state, conv_intermediate, accept, slots)
        return
    from speckernels.gdn_commit import gdn_commit_triton

    pairs = [(state, intermediate, 3), (conv_state, conv_intermediate, 2)]
    for dst, src, dims in pairs[: 1 + (conv_state is not None)]:
        if not (dense_tail(dst, dims) and dense_tail(src, dims)):
            raise ValueError("the triton commit needs each state row to be one contiguous block")
    gdn_commit_triton(state, intermediate, accept, slots, conv_state, conv_intermediate)


def gdn_replay(
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor,
    accept_idx: torch.Tensor,
    *,
    state_indices: torch.Tensor | None = None,
    use_qk_l2norm: bool = False,
    eps: float = 1e-6,
    backend: KernelBackend | str = KernelBackend.AUTO,
) -> None:
    """``input_replay`` commit: advance each live state over positions 0..accept_idx[b].

    k (B, T, H, K), v (B, T, HV, V), g and beta (B, T, HV) are the recorded inputs of the
    verify batch (k as given to ``gdn_verify``; q is not needed); state (N, HV, K, V) is
    updated in place. The result equals ``gdn_verify``'s intermediate[b, accept_idx[b]].
    Rows with -1 keep their state.
    """
    check_gdn(k, v, g, beta, state)
    bsz = k.shape[0]
    accept = indices(accept_idx, bsz, state.device, "accept_idx")
    slots = indices(state_indices, bsz, state.device, "state_indices")
    if resolve_backend(backend, state.device) is KernelBackend.TORCH:
        ref.gdn_replay_ref(k, v, g, beta, state, accept, slots.long(),
                           use_qk_l2norm=use_qk_l2norm, eps=eps)  # fmt: skip
        return
    from speckernels.gdn_replay import gdn_replay_triton

    if not dense_tail(state, 2):
        raise ValueError("state needs contiguous (K, V) blocks for the triton backend")
    k, v, g, beta = (unit_last(x) for x in (k, v, g, beta))
    gdn_replay_triton(k, v, g, beta, state, accept, slots, use_qk_l2norm=use_qk_l2norm, eps=eps)


def conv_update(
    x: torch.Tensor,
    conv_state: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    activation: str | None = "silu",
    state_indices: torch.Tensor | None = None,
    intermediate: torch.Tensor | None = None,
    save_intermediate: bool = True,
    commit: bool = False,
    dst_indices: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    backend: KernelBackend | str = KernelBackend.AUTO,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Depthwise causal conv1d (+SiLU) over T new positions, keeping the window after each.

    x (B, C, T) (HF's layout; any strides), conv_state (N, C, S) pool of the last S inputs,
    weight (C, KW) or nn.Conv1d's (C, 1, KW) with S >= KW - 1, bias (C,) or None.
    Returns ``(out, intermediate)``: out (B, C, T) in x's dtype and the windows
    (B, T, C, S) in conv_state's dtype (None when ``save_intermediate`` is False); out goes
    into ``out`` when given. The last window is written only when ``commit``, into slot
    ``dst_indices[b]`` (default: the sequence's own slot), as in ``gdn_verify``.
    """
    if weight.dim() == 3:
        weight = weight.squeeze(1)
    check_conv(x, conv_state, weight)
    if activation not in (None, "silu", "swish"):
        raise ValueError(f"unsupported activation {activation!r}")
    bsz, channels, seq = x.shape
    width = conv_state.shape[2]
    slots = indices(state_indices, bsz, conv_state.device, "state_indices")
    dst = slots if dst_indices is None else indices(dst_indices, bsz, x.device, "dst_indices")
    if intermediate is None and save_intermediate:
        intermediate = conv_state.new_empty(bsz, seq, channels, width)
    if intermediate is not None and intermediate.shape != (bsz, seq, channels, width):
        raise ValueError(f"intermediate must be (B, T, C, S), got {tuple(intermediate.shape)}")
    if out is not None and out.shape != x.shape:
        raise ValueError(f"out must be (B, C, T), got {tuple(out.shape)}")
    if resolve_backend(backend, x.device) is KernelBackend.TORCH:
        o = ref.conv_update_ref(x, conv_state, weight, bias, slots.long(), activation=activation,
                                intermediate=intermediate, commit=commit,
                                dst_indices=dst.long())  # fmt: skip
        return (o if out is None else out.copy_(o)), intermediate
    from speckernels.conv_update import conv_update_triton

    if out is None:
        out = torch.empty_like(x)  # keeps x's strides: (B, C, T) views of (B, T, C) coalesce
    conv_update_triton(x, conv_state, weight, bias, slots, out, intermediate,
                       silu=activation is not None, commit=commit, dst_indices=dst)  # fmt: skip
    return out, intermediate


def conv_replay(
    x: torch.Tensor,
    conv_state: torch.Tensor,
    accept_idx: torch.Tensor,
    *,
    state_indices: torch.Tensor | None = None,
    backend: KernelBackend | str = KernelBackend.AUTO,
) -> None:
    """``input_replay`` conv commit: slide each live window over x[b, :, :accept_idx[b]+1].

    x (B, C, T) the recorded conv inputs, conv_state (N, C, S) updated in place; the result
    equals ``conv_update``'s intermediate[b, accept_idx[b]] bitwise. Rows with -1 are kept.
    """
    if x.dim() != 3 or conv_state.dim() != 3 or x.shape[1] != conv_state.shape[1]:
        raise ValueError("expected x (B, C, T) and conv_state (N, C, S)")
    accept = indices(accept_idx, x.shape[0], conv_state.device, "accept_idx")
    slots = indices(state_indices, x.shape[0], conv_state.device, "state_indices")
    if resolve_backend(backend, x.device) is KernelBackend.TORCH:
        ref.conv_replay_ref(x, conv_state, accept, slots.long())
        return
    from speckernels.conv_replay import conv_replay_triton

    conv_replay_triton(x, conv_state, accept, slots)
