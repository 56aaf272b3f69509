"""The real engine's correctness and its plain decode speed: a lossless sweep (greedy
speculative output compared token for token with plain greedy output, on the first, long,
question of many held-out conversations, every drafter once and every rollback strategy
once) and our plain decode against transformers' `generate` on the same weights.

    .venv/bin/python bench/torch_speculative.py [--prompts 50] [--tokens 256] [--quick]
                                                [--device auto|cpu|cuda]
                                                [--out STEM | --record]

Both comparisons run on `--device` (auto: CUDA when torch sees one, as everywhere else in
the project); the resolved device is recorded in the results.

Writes <STEM>.json and .md (default ./out/bench/torch_speculative; --record: the checkout's
tracked bench/results/torch_speculative). The per-drafter speed table (acceptance,
tok/s, speedup over plain, draft share) is `specledger bench drafters`; the rollback
strategies side by side are `specledger bench strategies`.
"""

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import torch

from engine.config import SHIPPED_DRAFT, SHIPPED_TARGET, RunConfig
from engine.conversation import HeldOutConversation
from engine.errors import BackendError
from engine.hybrid.device import resolve_device, synchronize
from engine.hybrid.loader import LoadedCheckpoint, load_checkpoint
from engine.shipped import model_dir
from specbench.drafters import DRAFTERS, torch_config
from specbench.drafters.runs import run_unrecorded
from specbench.record import results_folder

STRATEGIES = ("checkpoint", "per_token", "input_replay")
# every drafter once, every strategy once (the full cross product runs in the tests)
COMBOS = [(d, "checkpoint") for d in DRAFTERS] + [("mtp", s) for s in STRATEGIES[1:]]


def lossless(base: RunConfig, ckpt: LoadedCheckpoint, prompts: int) -> dict[str, Any]:
    """Every combination's answer against plain decode's, one-turn prompts of seeds
    0..prompts-1."""
    checked: dict[str, Any] = {"prompts": prompts, "tokens_compared": 0, "mismatches": [],
                               "combinations": [f"{d}/{s}" for d, s in COMBOS]}
    for seed in range(prompts):
        ref = run_unrecorded(base.replace(seed=seed), ckpt)
        checked["tokens_compared"] += len(ref.answer)
        for drafter, strategy in COMBOS:
            got = run_unrecorded(base.replace(seed=seed, drafter=drafter, strategy=strategy),
                                 ckpt)
            if got.answer != ref.answer:
                checked["mismatches"].append({"seed": seed, "drafter": drafter,
                                              "strategy": strategy})
    return checked


def vs_transformers(model: str, prompt: list[int], tokens: int,
                    device: torch.device) -> dict[str, Any]:
    """Greedy decode of `tokens` tokens on `device`: ours (state + recurrent steps) vs HF
    generate. The clock is read after the device's queued work is done."""
    from transformers import Qwen3_5ForCausalLM

    ours = load_checkpoint(model, device=device).model
    ids = torch.tensor([prompt], device=device)
    synchronize(device)
    t = time.perf_counter()
    state = ours.new_state()
    logits = ours.forward(ids, state, last_only=True)
    out = []
    for _ in range(tokens):
        nxt = int(logits[0, -1].argmax())
        out.append(nxt)
        logits = ours.forward(torch.tensor([[nxt]], device=device), state)
    synchronize(device)
    ours_s = time.perf_counter() - t
    # transformers reads a directory: a shipped model's name (the default) is not one.
    hf = Qwen3_5ForCausalLM.from_pretrained(model_dir(model)).to(device).eval()
    synchronize(device)
    t = time.perf_counter()
    with torch.inference_mode():
        gen = hf.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                          eos_token_id=None, pad_token_id=0)
    synchronize(device)
    hf_s = time.perf_counter() - t
    same = gen[0, len(prompt):].tolist() == out
    return {"ours_tok_s": tokens / ours_s, "transformers_tok_s": tokens / hf_s,
            "speedup": hf_s / ours_s, "same_tokens": same}


def main() -> None:
    """Run the sweep and the comparison, write the results."""
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=SHIPPED_TARGET)
    p.add_argument("--draft-model", default=SHIPPED_DRAFT)
    p.add_argument("--prompts", type=int, default=50)
    p.add_argument("--tokens", type=int, default=256)
    p.add_argument("--quick", action="store_true",
                   help="2 prompts of at most 32 tokens: a smoke run")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="where both comparisons run (auto: CUDA when torch sees one)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, help="results stem (./out/bench/torch_speculative)")
    where.add_argument("--record", action="store_true",
                       help="write the checkout's tracked bench/results/torch_speculative")
    args = p.parse_args()
    if args.record and args.quick:  # the tracked results are numbers to quote
        p.error("--record keeps full runs' numbers; --quick's are not to quote (drop one)")
    try:
        device = resolve_device(args.device)
    except BackendError as exc:
        p.error(str(exc))
    out = args.out or results_folder(None, args.record) / "torch_speculative"
    torch.set_num_threads(args.threads)
    prompts, tokens = (2, min(args.tokens, 32)) if args.quick else (args.prompts, args.tokens)
    base = torch_config(args.model, args.draft_model, turns=1, tokens=tokens,
                        device=device.type)
    ckpt = load_checkpoint(args.model, device=device)
    env = {"python": platform.python_version(), "torch": torch.__version__,
           "threads": args.threads, "device": device.type}
    if device.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
    results: dict[str, Any] = {"env": env, "config": base.to_dict(), "quick": args.quick}
    results["lossless"] = lossless(base, ckpt, prompts)
    prompt = HeldOutConversation(base).question(0, 1)
    results["vs_transformers"] = vs_transformers(args.model, prompt, tokens, device)

    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(results) + "\n")
    print(markdown(results))


def markdown(r: dict[str, Any]) -> str:
    """The README lines."""
    lo, vt = r["lossless"], r["vs_transformers"]
    return "\n".join([
        f"Lossless: {lo['prompts']} prompts, {lo['tokens_compared']} reference tokens, "
        f"{len(lo['combinations'])} drafter/strategy combinations, "
        f"{len(lo['mismatches'])} mismatches.",
        f"Plain decode on {r['env']['device']}: ours {vt['ours_tok_s']:.0f} tok/s, "
        f"transformers generate {vt['transformers_tok_s']:.0f} tok/s ({vt['speedup']:.2f}x), "
        f"same tokens: {vt['same_tokens']}.",
    ])


if __name__ == "__main__":
    main()
