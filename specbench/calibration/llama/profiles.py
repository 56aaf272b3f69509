"""What the public-hardware profiles predict for llama.cpp users, and how well: decode
tokens/s of plain decoding and of MTP speculation with llama.cpp's checkpoints in host
memory (its default), on the device (`LLAMA_STATE_SEQ_FLAGS_ON_DEVICE`) and with
per-position states (`n_rs_seq`); and each profile's fit set and held-out predictions of
published measurements (engine/sim/published.py, sources in each profile's description).
No such machine was measured by this project.

`python -m specbench.calibration.llama.profiles` prints both tables (docs/results.md's);
`specledger bench calibration --backend llama` writes them beside its own results.
"""

from engine.sim.costs import CostProfile, get_profile
from engine.sim.forecast import MTP_DRAFT_SHARE, Mode, expected_rounds, forecast
from engine.sim.published import EVIDENCE, Kind, Measured, error, expected_error, predict
from specbench.common import md_table

NAMES = tuple(EVIDENCE)
CTX = 4096
DRAFT = 3  # llama.cpp's default --spec-draft-n-max (ggml-org/llama.cpp#24508)
ACCEPTANCE = 0.75  # MTP on Qwen3.6-27B at 3 drafts (ggml-org/llama.cpp#22673)


def predictions(profile: CostProfile) -> dict[str, float]:
    """Tokens/s of each way of decoding MTP rounds (`DRAFT`, `ACCEPTANCE`, at `CTX`)
    under `profile`, and one checkpoint copy against one decode forward."""
    rounds, weights = expected_rounds(DRAFT, ACCEPTANCE, CTX)
    f = forecast(profile, rounds, MTP_DRAFT_SHARE, weights)
    return {"plain_tok_s": f.tok_s(Mode.PLAIN), "host_tok_s": f.tok_s(Mode.HOST),
            "device_tok_s": f.tok_s(Mode.DEVICE), "rollback_tok_s": f.tok_s(Mode.ROLLBACK),
            "checkpoint_ms": 1e3 * profile.checkpoint_s(),
            "tensor_ms": 1e3 * profile.state_tensors * profile.tensor_copy_s,
            "forward_ms": 1e3 * profile.forward_s(1, CTX)}


def table(names: tuple[str, ...] = NAMES) -> str:
    """The predictions of every named profile as a markdown table."""
    rows = []
    for name in names:
        prof = get_profile(name)
        p = predictions(prof)
        rows.append((f"`{name}`", prof.checkpoint_place, f"{p['plain_tok_s']:.1f}",
                     *(f"{p[mtp]:.1f} ({p[mtp] / p['plain_tok_s']:.2f}x)"
                       for mtp in ("host_tok_s", "device_tok_s", "rollback_tok_s")),
                     f"{p['checkpoint_ms']:.1f} ({prof.state_tensors} x "
                     f"{1e3 * prof.tensor_copy_s:.3f}) / {p['forward_ms']:.1f} ms"))
    return md_table(["profile (prediction)", "checkpoints in", "plain tok/s",
                     "MTP, host checkpoints (llama.cpp default)", "MTP, on-device flag",
                     "MTP, n_rs_seq",
                     "one checkpoint copy (its tensor copies) / one decode forward"], rows)


def _row(name: str, role: str, m: Measured, p: CostProfile) -> tuple[str, ...]:
    value = predict(p, m)
    shown = f"{1e3 * value:.3g} ms" if m.kind is Kind.CHECKPOINT_S else f"{value:.3g}"
    return (f"`{name}`", role, m.label(), m.setup, shown,
            "fitted" if role == "fit" else f"{100 * error(p, m):+.0f}%", m.source)


def evidence_table(names: tuple[str, ...] = NAMES) -> str:
    """Every profile's fit set and held-out predictions, with its expected error."""
    rows = []
    for name in names:
        e, p = EVIDENCE[name], get_profile(name)
        if e.transfer is not None:
            rows.append((f"`{name}`", "transferred", f"terms of `{e.transfer}`",
                         "no published llama.cpp measurement found", "", "unknown", ""))
            continue
        rows += [_row(name, "fit", m, p) for m in e.fit]
        rows += [_row(name, "held out", m, p) for m in e.validation]
        rows.append((f"`{name}`", "expected error", "", "the largest held-out error", "",
                     f"{100 * expected_error(p, e):.0f}%", ""))
    return md_table(["profile", "set", "published", "setup", "predicted", "error", "source"],
                    rows)


LIMITS = (
    "Where the sim cannot follow llama.cpp on that hardware: the draft context's own "
    "checkpoints (llama-server also saves and restores the MTP context when it cannot "
    "drop a suffix) are not charged, nor is an on-device copy's per-tensor "
    "synchronisation (ON_DEVICE copies tensor by tensor too, on the device); a draft "
    "length capped by --spec-draft-p-min is read as a fixed draft; partial CPU offload "
    "(--n-cpu-moe) and Windows' WDDM driver are outside every profile (an RTX 3090 under "
    "WDDM measured MTP at 11.0 tok/s with host checkpoints against 17.0 plain and 17.7 "
    "on-device, ggml-org/llama.cpp#27836, a slowdown no profile here is fitted to); the "
    "prompt cache's full-state saves (attention KV included, growing with the context) "
    "are not modelled.")


def report() -> str:
    """Both tables and the limits, as `bench calibration --backend llama` writes them."""
    return (f"Public hardware under llama.cpp (predictions; context {CTX}, MTP draft "
            f"{DRAFT}, acceptance {ACCEPTANCE}):\n\n{table()}\n\nFit on published "
            f"measurements, checked on others:\n\n{evidence_table()}\n\n{LIMITS}\n")


if __name__ == "__main__":
    print(report())
