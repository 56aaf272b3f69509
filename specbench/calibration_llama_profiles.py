"""What the public-hardware profiles predict for llama.cpp users: decode tokens/s of
plain decode, of an n-gram drafter's rounds with whole-state checkpoints where llama.cpp
keeps them (host memory; unified memory on an APU) and with the on-device state flag
(`LLAMA_STATE_SEQ_FLAGS_ON_DEVICE`), and of per-token recurrent states (`n_rs_seq`),
drafting excluded. The profiles are built from public specifications
(engine/sim/profiles/*-llama.json, sources in each description): predictions, not
measurements.

`python -m specbench.calibration_llama_profiles` prints the table (docs/results.md's).
"""

from dataclasses import replace

from engine.sim.costs import CostProfile, get_profile
from specbench.calibration_llama_fit import decode_s
from specbench.calibration_llama_measure import Round, Trace
from specbench.common import md_table

NAMES = ("rtx3090-qwen3.5-27b-q4-llama", "strix-halo-qwen3-next-80b-q4-llama",
         "h200-qwen3.5-27b-bf16-llama")
CTX = 4096
PATTERN = (8, 3, 0, 5)  # drafts kept per round of 8: a mean of 4, three rejects in four


def rounds(draft: int = 8, repeat: int = 16) -> Trace:
    """Speculative rounds of `draft` drafts keeping `PATTERN` in turn, from `CTX`."""
    out, ctx = [], CTX
    for i in range(repeat * len(PATTERN)):
        kept = PATTERN[i % len(PATTERN)]
        out.append(Round(ctx=ctx, drafted=draft, accepted=kept, checkpoint=True,
                         replays=(kept + 1,) if kept < draft else ()))
        ctx += kept + 1
    return Trace(prompt_n=CTX, generated=1 + ctx - CTX, rounds=tuple(out), ctx_checkpoints=0)


def predictions(profile: CostProfile) -> dict[str, float]:
    """Tokens/s of each way of decoding under `profile`, and the copy against a forward."""
    spec = rounds()
    tokens = spec.generated - 1
    on_device = replace(profile, checkpoint_place="device")
    return {
        "plain_tok_s": 1.0 / profile.verify_s(1, CTX),
        "ngram_host_tok_s": tokens / decode_s(profile, spec, "ngram-mod"),
        "ngram_on_device_tok_s": tokens / decode_s(on_device, spec, "ngram-mod"),
        "per_token_tok_s": tokens / decode_s(profile, spec, "mtp"),
        "checkpoint_ms": 1e3 * profile.checkpoint_s(),
        "forward_ms": 1e3 * profile.forward_s(1, CTX),
    }


def table(names: tuple[str, ...] = NAMES) -> str:
    """The predictions of every named profile as a markdown table."""
    rows = []
    for name in names:
        p = predictions(get_profile(name))
        rows.append((name, get_profile(name).checkpoint_place, f"{p['plain_tok_s']:.1f}",
                     f"{p['ngram_host_tok_s']:.1f}", f"{p['ngram_on_device_tok_s']:.1f}",
                     f"{p['per_token_tok_s']:.1f}",
                     f"{p['checkpoint_ms']:.2f} / {p['forward_ms']:.2f}"))
    return md_table(["profile (prediction)", "checkpoints in", "plain tok/s",
                     "n-gram, llama.cpp default tok/s", "n-gram, on-device flag tok/s",
                     "per-token states (n_rs_seq) tok/s",
                     "one checkpoint copy / one decode forward (ms)"], rows)


if __name__ == "__main__":
    print(f"context {CTX}, draft 8, drafts kept per round {PATTERN} in turn, drafting "
          f"excluded\n")
    print(table())
