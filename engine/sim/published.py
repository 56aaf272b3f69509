"""The public-hardware profiles' evidence: published llama.cpp measurements on that
hardware, the terms fitted to some of them, and the others predicted to show the error.

No such machine was measured by this project. Each profile starts from public
specifications (bandwidths, sizes: its `specs`), then takes from published numbers what
specifications cannot give:

- `launch_s`, the fixed cost of a forward beyond reading the weights, from a plain
  decode rate;
- `token_s`, the cost of each further token in a forward (llama.cpp's quantised kernels
  grow with the batch long before the compute roofline), from a speculative speed-up
  without checkpoints (`n_rs_seq`);
- `tensor_copy_s`, one blocking copy of one state tensor on llama.cpp's host path, from a
  measured checkpoint time.

`host_copy_s` and `round_sync_s` are 0: no published number separates them from
`launch_s` and `tensor_copy_s`. A profile with no published measurement of its own takes
its terms from another (`transfer`) and says its error is unknown.

A speculative measurement is read as rounds of `draft` drafts whose kept share is its
`acceptance` (`engine.sim.forecast.expected_rounds`), drafted by an MTP head
(`MTP_DRAFT_SHARE`). `python -m engine.sim.published` prints the fit and the
predictions; with `--write` it stores the fitted profiles.
"""

import sys
from dataclasses import dataclass, replace
from enum import StrEnum

from engine.sim.costs import PROFILE_DIR, CostProfile, get_profile, save_profile
from engine.sim.forecast import MTP_DRAFT_SHARE, Mode, bisect, expected_rounds, forecast

LLAMA_SOURCE = ("llama.cpp's server takes speculative and context checkpoints with "
                "llama_state_seq_get_data_ext(PARTIAL_ONLY): the recurrent state only, read "
                "to host memory one blocking ggml_backend_tensor_get per tensor")


class Kind(StrEnum):
    """What a published number measures."""

    PLAIN_TOK_S = "plain tok/s"
    SPEEDUP = "speed-up"  # tok/s of `mode` over tok/s of `over`
    CHECKPOINT_S = "checkpoint seconds"  # `copies` checkpoint copies (a save, a restore)


@dataclass(frozen=True)
class Measured:
    """One published number, where it was published, and the setup behind it."""

    kind: Kind
    value: float
    source: str
    setup: str
    mode: Mode = Mode.PLAIN
    over: Mode = Mode.PLAIN
    draft: int = 0
    acceptance: float = 0.0
    copies: int = 1
    ctx: int = 512  # short prompts where the report does not say

    def label(self) -> str:
        """The measurement in a few words."""
        if self.kind is Kind.PLAIN_TOK_S:
            return f"plain {self.value:g} tok/s"
        if self.kind is Kind.CHECKPOINT_S:
            return f"{self.copies} checkpoint cop{'y' if self.copies == 1 else 'ies'} " \
                   f"{1e3 * self.value:g} ms"
        return (f"{self.mode.value} / {self.over.value} = {self.value:.3f} (draft "
                f"{self.draft}, acceptance {self.acceptance:g})")


@dataclass(frozen=True)
class Evidence:
    """A profile's public specifications, the measurements its terms are fitted to, the
    ones it predicts, or the profile it takes its terms from."""

    profile: str
    specs: str
    fit: tuple[Measured, ...] = ()
    validation: tuple[Measured, ...] = ()
    transfer: str | None = None


def predict(p: CostProfile, m: Measured) -> float:
    """What profile `p` says of measurement `m`, in its unit."""
    if m.kind is Kind.PLAIN_TOK_S:
        return 1.0 / p.verify_s(1, m.ctx)
    if m.kind is Kind.CHECKPOINT_S:
        return m.copies * p.checkpoint_s()
    rounds, weights = expected_rounds(m.draft, m.acceptance, m.ctx)
    f = forecast(p, rounds, MTP_DRAFT_SHARE, weights)
    return f.tok_s(m.mode) / f.tok_s(m.over)


def error(p: CostProfile, m: Measured) -> float:
    """Predicted over measured, less one."""
    return predict(p, m) / m.value - 1.0


def fit(base: CostProfile, fit_set: tuple[Measured, ...]) -> CostProfile:
    """`base` with `launch_s`, `token_s` and `tensor_copy_s` fitted to `fit_set` (one
    plain rate, optionally one speed-up, one checkpoint time)."""
    by = {m.kind: m for m in fit_set}
    plain = by[Kind.PLAIN_TOK_S]
    zero = replace(base, launch_s=0.0, token_s=0.0, host_copy_s=0.0, round_sync_s=0.0,
                   tensor_copy_s=0.0)

    def with_token(token_s: float) -> CostProfile:
        p = replace(zero, token_s=token_s)
        return replace(p, launch_s=max(0.0, 1.0 / plain.value - p.forward_s(1, plain.ctx)))

    p = with_token(0.0)
    speedup = by.get(Kind.SPEEDUP)
    if speedup is not None:  # more per-token cost, less speed-up: bisect to the measured
        p = with_token(bisect(lambda t: error(with_token(t), speedup), 0.0,
                              1.0 / plain.value, steps=100))
    ckpt = by.get(Kind.CHECKPOINT_S)
    if ckpt is not None:
        rest = ckpt.value / ckpt.copies - p.checkpoint_s()
        p = replace(p, tensor_copy_s=max(0.0, rest) / p.state_tensors)
    return p


_SUDOINGX_21 = "https://github.com/sudoingX/qwen38-mtp/pull/21"
_TURBO_TAN_74 = "https://github.com/turbo-tan/llama.cpp-tq3/pull/74"
_LLAMA_28118 = "https://github.com/ggml-org/llama.cpp/pull/28118"
_LLAMA_28120 = "https://github.com/ggml-org/llama.cpp/pull/28120"
_RTX3090_PLAIN = Measured(
    Kind.PLAIN_TOK_S, 41.3, _SUDOINGX_21,
    "RTX 3090, Qwen3.8-27B Q4_K_M, llama.cpp b10450, mean of 3 runs x 3 prompts")
EVIDENCE: dict[str, Evidence] = {e.profile: e for e in (
    Evidence(
        "rtx3090-qwen3.5-27b-q4-llama",
        "Qwen3.5-27B-class hybrid at 4-bit (Q4_K_M, ~4.85 bits per weight: 27e9 x 4.85 / 8 "
        "= 16.4 GB) on one GeForce RTX 3090 under llama.cpp (CUDA, checkpoints in host "
        "memory over PCIe). Specifications: NVIDIA GeForce RTX 3090 (24 GB GDDR6X, 936 GB/s, "
        "taken at 80% achieved); NVIDIA Ampere GA102 whitepaper (71 TFLOPS dense FP16 "
        "tensor, 35% achieved assumed: never binding at these batches); PCI-SIG PCIe 4.0 x16 "
        "(~25 GB/s effective); Qwen3.5-27B's public config.json (16 full-attention layers x "
        "4 KV heads x 256, f16 KV; 48 Gated DeltaNet layers x 32 value heads x 128 x 128 "
        "fp32 state + conv windows: 96 state tensors).",
        fit=(
            _RTX3090_PLAIN,
            Measured(Kind.SPEEDUP, 63.5 / 41.3, _SUDOINGX_21,
                     "the same run with --spec-type draft-mtp --spec-draft-n-max 2 "
                     "(n_rs_seq rollback): 63.5 tok/s, acceptance 0.69-0.87 (0.78 taken)",
                     mode=Mode.ROLLBACK, draft=2, acceptance=0.78),
            Measured(Kind.CHECKPOINT_S, 14.96e-3, _TURBO_TAN_74,
                     "RTX 3090, Qwen3.6-27B-MTP TQ3_4S: the full-state checkpoint saved every "
                     "speculative step, 14.96 ms per step"),
        ),
        validation=(
            Measured(Kind.PLAIN_TOK_S, 39.8, "https://github.com/sudoingX/qwen38-mtp/pull/20",
                     "RTX 3090, Q4_K_M, a turboquant llama.cpp build, median of 3 x 3"),
            Measured(Kind.SPEEDUP, 52.8 / 31.9, "https://github.com/sudoingX/qwen38-mtp/pull/42",
                     "RTX 3090 capped at 250 W, Q4_K_M, b10473: 31.9 -> 52.8 tok/s with "
                     "draft-mtp n-max 4, acceptance 0.648", mode=Mode.ROLLBACK, draft=4,
                     acceptance=0.648),
            Measured(Kind.SPEEDUP, 44.87 / 61.7, _TURBO_TAN_74,
                     "host checkpoints every step 44.87 tok/s against 61.19-62.22 with n_rs_seq; "
                     "draft and acceptance not given: llama.cpp's default n-max 3 "
                     "(ggml-org/llama.cpp#24508) and the 75% acceptance reported for Qwen3.6-27B "
                     "at 3 drafts (ggml-org/llama.cpp#22673) taken", mode=Mode.HOST,
                     over=Mode.ROLLBACK, draft=3, acceptance=0.75, ctx=1024),
        ),
    ),
    Evidence(
        "strix-halo-qwen3-next-80b-q4-llama",
        "Qwen3-Next-80B-A3B-class MoE hybrid at 4-bit (Q4_K_M, ~4.85 bits per weight; a "
        "forward reads ~6e9 parameters' worth, 3e9 active per token and more experts under "
        "a verify batch) on an AMD Ryzen AI Max+ 395 (Strix Halo) under llama.cpp (Vulkan): "
        "one unified memory, so a host checkpoint is a copy within it. Specifications: AMD "
        "Ryzen AI Max+ 395 product page (256-bit LPDDR5X-8000, 256 GB/s, taken at 82% "
        "achieved; Radeon 8060S, 59.4 TFLOPS FP16, 25% achieved assumed: never binding); "
        "Qwen3-Next-80B-A3B's public config.json (12 full-attention layers with 2 KV heads "
        "x 256, f16 KV; 36 Gated DeltaNet layers, 72 MiB of fp32 state: 72 state tensors). "
        "The published runs are of Qwen3.8-Flash-Next (qwen4exp), a larger model of the "
        "same kind: the fitted terms absorb the difference.",
        fit=(
            Measured(Kind.PLAIN_TOK_S, 32.4, _LLAMA_28118,
                     "Strix Halo gfx1151, Vulkan + RADV, Qwen3.8-Flash-Next Q4_K_M, no draft"),
            Measured(Kind.CHECKPOINT_S, 0.600, _LLAMA_28118,
                     "the per-round host round trip of the speculative checkpoint (a save and "
                     "a restore): ~600 ms of each ~825 ms round", copies=2),
            Measured(Kind.SPEEDUP, 44.0 / 32.0, _LLAMA_28120,
                     "the same machine and model: 32 tok/s plain, 44 with MTP and n_rs_seq "
                     "rollback; draft and acceptance not given: n-max 3 (llama.cpp's default) "
                     "and acceptance 0.8 ('high', #28118) taken", mode=Mode.ROLLBACK, draft=3,
                     acceptance=0.8),
        ),
        validation=(
            Measured(Kind.PLAIN_TOK_S, 32.0, _LLAMA_28120,
                     "the same setup, no draft"),
            Measured(Kind.SPEEDUP, 6.0 / 32.0, _LLAMA_28120,
                     "MTP with full checkpoints to host memory every round: 6 tok/s against "
                     "32 plain (n-max 3, acceptance 0.8 taken)", mode=Mode.HOST, draft=3,
                     acceptance=0.8),
        ),
    ),
    Evidence(
        "h200-qwen3.5-27b-bf16-llama",
        "Qwen3.5-27B in bf16 (27e9 x 2 B = 54 GB) on one NVIDIA H200 under llama.cpp (CUDA, "
        "speculative and context checkpoints in host memory over PCIe unless "
        "LLAMA_STATE_SEQ_FLAGS_ON_DEVICE is set). Specifications: NVIDIA H200 datasheet "
        "(141 GB HBM3e at 4.8 TB/s, taken at 80% achieved; 989 TFLOPS dense BF16 tensor, "
        "60% achieved); PCI-SIG PCIe 5.0 x16 (~50 GB/s effective); layer shapes from "
        "Qwen3.5-27B's public config.json (96 state tensors).",
        transfer="rtx3090-qwen3.5-27b-q4-llama",
    ),
)}


def fitted(name: str) -> CostProfile:
    """The profile `name` with its terms fitted to its evidence (or taken from the
    profile it transfers from), described with every source and number used."""
    e = EVIDENCE[name]
    base = get_profile(name)
    if e.transfer is not None:
        donor = fitted(e.transfer)
        p = replace(base, launch_s=donor.launch_s + donor.token_s, token_s=0.0,
                    host_copy_s=0.0, round_sync_s=0.0, tensor_copy_s=donor.tensor_copy_s)
        how = (f"No published llama.cpp measurement on this hardware was found, so this "
               f"profile's error is unknown. From {e.transfer}'s fit (the same CUDA engine, "
               f"host path and model family): tensor_copy_s, and as launch_s the fixed cost "
               f"of its one-token forward (its launch_s + token_s); token_s is 0, the "
               f"H200's compute is taken to keep up with a verify's few tokens.")
    else:
        p = fit(base, e.fit)
        how = (" ".join(f"Fitted to {m.label()}: {m.setup} ({m.source})." for m in e.fit)
               + " Predicted, not fitted: "
               + " ".join(f"{m.label()}: {m.setup} ({m.source}); predicted "
                          f"{predict(p, m):.3g} ({100 * error(p, m):+.0f}%)."
                          for m in e.validation)
               + f" Expected error: {100 * expected_error(p, e):.0f}% (the largest of the "
                 f"predictions').")
    description = (f"A prediction, not a measurement: no such machine was measured by this "
                   f"project. {e.specs} Sources: the specifications above; {LLAMA_SOURCE}. "
                   f"{how} host_copy_s and round_sync_s are 0: no published number "
                   f"separates them.")
    return replace(p, description=description)


def expected_error(p: CostProfile, e: Evidence) -> float:
    """The largest relative error of `p`'s predictions of `e`'s validation set."""
    return max(abs(error(p, m)) for m in e.validation)


def main(argv: list[str]) -> int:
    """Print every fit and prediction; `--write` stores the fitted profiles."""
    for name, e in EVIDENCE.items():
        p = fitted(name)
        print(f"{name}: launch_s {1e3 * p.launch_s:.3f} ms, token_s {1e3 * p.token_s:.3f} "
              f"ms, tensor_copy_s {1e3 * p.tensor_copy_s:.4f} ms x {p.state_tensors} = "
              f"checkpoint {1e3 * p.checkpoint_s():.2f} ms")
        for role, ms in (("fit", e.fit), ("validation", e.validation)):
            for m in ms:
                print(f"  {role}: {m.label()}: predicted {predict(p, m):.4g} "
                      f"({100 * error(p, m):+.1f}%)  {m.source}")
        if "--write" in argv:
            print(f"  wrote {save_profile(p, PROFILE_DIR)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
