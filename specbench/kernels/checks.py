"""On-device correctness checks run before any timing: each kernel against its reference.

Same properties as tests/speckernels, at the real head sizes (so multi-block tilings and the
compiled, not interpreted, kernels are what gets checked). Outputs are NaN-poisoned first.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from types import SimpleNamespace

import torch

from speckernels import ops as _ops
from speckernels.testing import poison_, rel_error

OPS = ("gdn_verify", "gdn_commit", "gdn_replay", "conv_update", "conv_replay")
# The kernels under test, with backend="triton" bound: "auto" would quietly time the torch
# path on a CPU smoke run, and a missing triton must fail loudly. Pass backend="torch" for
# the reference.
ops = SimpleNamespace(**{name: partial(getattr(_ops, name), backend="triton") for name in OPS})


class FlaBaseline:
    """fla's ``fused_recurrent_gated_delta_rule`` behind one call: (q, k, v, g, beta, h0).

    Grouped value heads are passed as they are when fla accepts them (``mode`` "grouped");
    older releases get q and k expanded to HV heads ("expanded", expansion included in the
    timing, a few KB).
    """

    def __init__(self, fn: Callable) -> None:
        self.fn = fn
        self.mode: str | None = None

    def __call__(self, q, k, v, g, beta, state) -> tuple[torch.Tensor, torch.Tensor]:
        """Outputs (B, T, HV, V) and final state (B, HV, K, V) from initial ``state``."""
        kw = {"g": g, "beta": beta, "initial_state": state, "output_final_state": True}
        if self.mode in (None, "grouped"):
            try:
                out = self.fn(q=q, k=k, v=v, **kw)
                self.mode = "grouped"
                return out
            except Exception:
                if self.mode == "grouped":
                    raise
                self.mode = "expanded"
        rep = v.shape[2] // q.shape[2]
        return self.fn(q=q.repeat_interleave(rep, 2), k=k.repeat_interleave(rep, 2), v=v, **kw)


class _Results(list):
    """Check records: name, relative error, tolerance, verdict."""

    def close(self, name: str, got: torch.Tensor, want: torch.Tensor, tol: float) -> None:
        """Record ||got - want|| / ||want|| against ``tol`` (NaN anywhere fails)."""
        err = rel_error(got, want)
        self.append({"name": name, "rel_err": err, "tol": tol, "ok": bool(err <= tol)})

    def flag(self, name: str, ok: bool) -> None:
        """Record a yes/no property."""
        self.append({"name": name, "rel_err": None, "tol": None, "ok": bool(ok)})


def run_checks(shape, device: torch.device, fla: FlaBaseline | None, tilings,
               make_inputs: Callable, *, smoke: bool) -> list[dict]:  # fmt: skip
    """Check verify, commit, replay, conv update and conv replay (and fla) on ``device``."""
    from speckernels.gdn_verify import gdn_verify_triton

    res = _Results()
    bsz, seq = 3, 3 if smoke else 9
    x = make_inputs(shape, bsz, seq, device)
    slots = torch.tensor([2, 0, 1], device=device)
    accept = torch.tensor([seq - 1, -1, seq // 2], device=device)
    done = accept >= 0
    rows = torch.arange(bsz, device=device)[done]
    qkvgb = (x.q, x.k, x.v, x.g, x.beta)

    pool_ref = x.state.clone()
    o_ref, i_ref = ops.gdn_verify(*qkvgb, pool_ref, state_indices=slots, commit=True,
                                  backend="torch")  # fmt: skip
    pool = x.state.clone()
    o, inter = poison_(torch.empty_like(o_ref)), poison_(torch.empty_like(i_ref))
    ops.gdn_verify(*qkvgb, pool, state_indices=slots, intermediate=inter, out=o, commit=True)
    res.close("verify.o", o, o_ref, 2e-2)  # bf16 outputs
    res.close("verify.intermediate", inter, i_ref, 1e-4)
    res.close("verify.commit", pool, pool_ref, 1e-4)
    pool = x.state.clone()
    ops.gdn_verify(*qkvgb, pool, state_indices=slots)
    res.flag("verify.deferred_leaves_state_bitwise", torch.equal(pool, x.state))
    raw = (3 * x.q, 3 * x.k, x.v, x.g, x.beta)  # not normalised: the kernel does it
    _, want = ops.gdn_verify(*raw, x.state, state_indices=slots, use_qk_l2norm=True,
                             backend="torch")  # fmt: skip
    _, got = ops.gdn_verify(*raw, x.state, state_indices=slots, use_qk_l2norm=True)
    res.close("verify.l2norm.intermediate", got, want, 1e-4)
    for bv, nw in tilings:
        got = poison_(torch.empty_like(i_ref))
        gdn_verify_triton(*qkvgb, x.state.clone(), slots.to(torch.int32), torch.empty_like(o_ref),
                          got, commit=False, scale=x.k.shape[-1] ** -0.5, use_qk_l2norm=False,
                          eps=1e-6, block_v=bv, num_warps=nw)  # fmt: skip
        res.close(f"verify.tiling(bv={bv},warps={nw})", got, i_ref, 1e-4)

    conv_ref = x.conv_state.clone()
    y_ref, w_ref = ops.conv_update(x.x, conv_ref, x.weight, state_indices=slots, commit=True,
                                   backend="torch")  # fmt: skip
    conv = x.conv_state.clone()
    y, wins = poison_(torch.empty_like(x.x)), poison_(torch.empty_like(w_ref))
    ops.conv_update(x.x, conv, x.weight, state_indices=slots, intermediate=wins, out=y,
                    commit=True)  # fmt: skip
    res.close("conv_update.out", y, y_ref, 2e-2)
    res.close("conv_update.windows", wins, w_ref, 0.0)
    res.close("conv_update.commit", conv, conv_ref, 0.0)

    got = {}
    for backend in ("triton", "torch"):
        pool, conv = x.state.clone(), x.conv_state.clone()
        pool[slots[done]], conv[slots[done]] = float("nan"), float("nan")
        ops.gdn_commit(pool, inter, accept, conv_state=conv, conv_intermediate=wins,
                       state_indices=slots, backend=backend)  # fmt: skip
        got[backend] = (pool, conv)
    res.close("commit.state", got["triton"][0], got["torch"][0], 0.0)
    res.close("commit.conv", got["triton"][1], got["torch"][1], 0.0)

    pool, pool_ref = x.state.clone(), x.state.clone()
    ops.gdn_replay(x.k, x.v, x.g, x.beta, pool, accept, state_indices=slots)
    ops.gdn_replay(x.k, x.v, x.g, x.beta, pool_ref, accept, state_indices=slots, backend="torch")
    res.close("replay.state", pool, pool_ref, 1e-4)
    res.close("replay.equals_intermediate", pool[slots[done]], inter[rows, accept[done]], 1e-5)
    res.flag("replay.skipped_row_untouched", torch.equal(pool[slots[~done]], x.state[slots[~done]]))
    conv = x.conv_state.clone()
    ops.conv_replay(x.x, conv, accept, state_indices=slots)
    res.close("conv_replay.equals_window", conv[slots[done]], wins[rows, accept[done]], 0.0)

    if fla is not None:
        try:
            o_f, s_f = fla(*qkvgb, x.state[slots].contiguous())
            res.close("fla.o", o_f, o_ref, 2e-2)
            res.close("fla.final_state", s_f, pool_ref_verify(x, slots, qkvgb), 1e-4)
        except Exception as exc:  # a broken baseline is reported, not fatal to our checks
            res.append({"name": "fla.call", "rel_err": None, "tol": None, "ok": False,
                        "note": f"fla failed, baseline dropped: {exc}"[:300]})  # fmt: skip
        for rec in res[-2:]:
            if rec["name"].startswith("fla."):
                rec["baseline"] = True  # third-party: reported, never fails our run
    return list(res)


def pool_ref_verify(x, slots: torch.Tensor, qkvgb: tuple) -> torch.Tensor:
    """Reference final states (B, HV, K, V) of the verify batch, in batch order."""
    pool = x.state.clone()
    ops.gdn_verify(*qkvgb, pool, state_indices=slots, save_intermediate=False, commit=True,
                   backend="torch")  # fmt: skip
    return pool[slots]
