"""The real engine side by side: plain decode and every drafter x strategy on code
conversations, time per committed token split into draft / verify / rollback / commit,
acceptance per drafter, a lossless check over many prompts, and our plain decode against
transformers' `generate` on the same weights.

    .venv/bin/python bench/torch_speculative.py [--prompts 50] [--tokens 256] [--quick]

Writes bench/results/torch_speculative.json and .md.
"""

import argparse
import json
import platform
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

from engine.config import RunConfig
from engine.hybrid.backend import TorchBackend
from engine.hybrid.loader import LoadedCheckpoint, load_checkpoint
from engine.session import MemoryJournal, Session
from fsm.states import Trigger

RESULTS = Path(__file__).parent / "results"
DRAFTERS = ["ngram-simple", "ngram-map-k", "ngram-mod", "draft-model", "mtp", "mtp,ngram-mod"]
STRATEGIES = ["checkpoint", "per_token", "input_replay"]
PHASES = {
    Trigger.DRAFT: "draft", Trigger.VERIFY: "verify", Trigger.RETRY: "verify",
    Trigger.DECODE: "verify", Trigger.RESTORE: "rollback", Trigger.REPLAY: "rollback",
    Trigger.COMMIT: "commit", Trigger.BEGIN: "checkpoint",
}


def run(base: RunConfig, ckpt: LoadedCheckpoint, **changes: Any) -> dict[str, Any]:
    """One session; its answers, decode speed, phase split and acceptance."""
    config = base.replace(**changes)
    journal = MemoryJournal()
    turns = Session(config, journal, backend=TorchBackend(config, ckpt)).run()
    generated = sum(t.generated_tokens for t in turns)
    decode_s = sum(t.decode_s for t in turns)
    split: dict[str, float] = defaultdict(float)
    for e in journal.events:
        if e.round > 0 and e.trigger in PHASES:
            split[PHASES[e.trigger]] += e.duration
    answers = [tok for e in journal.events if e.trigger in (Trigger.COMMIT, Trigger.PREFILL)
               for tok in e.payload.get("append", [])]
    drafted = sum(t.drafted for t in turns)
    return {
        "answers": answers, "generated": generated, "decode_s": decode_s,
        "tok_s": generated / decode_s if decode_s else 0.0,
        "ms_per_token": {k: 1e3 * v / max(generated, 1) for k, v in split.items()},
        "acceptance": sum(t.accepted for t in turns) / drafted if drafted else 0.0,
        "drafted": drafted,
    }


def vs_transformers(model_dir: str, prompt: list[int], tokens: int) -> dict[str, float]:
    """Greedy decode of `tokens` tokens: ours (state + recurrent steps) vs HF generate."""
    from transformers import Qwen3_5ForCausalLM

    ours = load_checkpoint(model_dir).model
    ids = torch.tensor([prompt])
    t = time.perf_counter()
    state = ours.new_state()
    logits = ours.forward(ids, state, last_only=True)
    out = []
    for _ in range(tokens):
        nxt = int(logits[0, -1].argmax())
        out.append(nxt)
        logits = ours.forward(torch.tensor([[nxt]]), state)
    ours_s = time.perf_counter() - t
    hf = Qwen3_5ForCausalLM.from_pretrained(model_dir).eval()
    t = time.perf_counter()
    with torch.inference_mode():
        gen = hf.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                          eos_token_id=None, pad_token_id=0)
    hf_s = time.perf_counter() - t
    same = gen[0, len(prompt):].tolist() == out
    return {"ours_tok_s": tokens / ours_s, "transformers_tok_s": tokens / hf_s,
            "speedup": hf_s / ours_s, "same_tokens": same}


def main() -> None:
    """Run everything and write the results."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", default="models/target")
    p.add_argument("--draft-model", default="models/draft")
    p.add_argument("--prompts", type=int, default=50)
    p.add_argument("--tokens", type=int, default=256)
    p.add_argument("--quick", action="store_true", help="few prompts, for a smoke run")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--out", type=Path, default=RESULTS / "torch_speculative")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    n_prompts = 4 if args.quick else args.prompts
    base = RunConfig(backend="torch", model=args.model, draft_model=args.draft_model,
                     turns=2, answer_tokens=10**6, max_answer_tokens=args.tokens,
                     draft_max=8, audit=False, drafter="none")
    ckpt = load_checkpoint(args.model)
    results: dict[str, Any] = {"env": {"python": platform.python_version(),
                                       "torch": torch.__version__,
                                       "threads": args.threads},
                               "config": base.to_dict()}

    # 1. one code conversation, every configuration side by side
    table = {"plain": run(base, ckpt)}
    for drafter in DRAFTERS:
        for strategy in STRATEGIES:
            table[f"{drafter}/{strategy}"] = run(base, ckpt, drafter=drafter,
                                                  strategy=strategy)
    plain = table["plain"]
    results["conversation"] = {
        k: {key: v[key] for key in ("generated", "tok_s", "ms_per_token", "acceptance",
                                    "drafted")} | {"speedup": v["tok_s"] / plain["tok_s"],
                                                   "lossless": v["answers"] == plain["answers"]}
        for k, v in table.items()}

    # 2. lossless over many one-turn prompts (the first, long, question of each seed)
    one = base.replace(turns=1)
    checked = {"prompts": n_prompts, "tokens_compared": 0, "mismatches": []}
    # every drafter once, every strategy once (the full cross product runs in the tests)
    combos = [(d, "checkpoint") for d in DRAFTERS] + [
        ("mtp", s) for s in STRATEGIES[1:]]
    for seed in range(n_prompts):
        ref = run(one, ckpt, seed=seed)
        checked["tokens_compared"] += len(ref["answers"])
        for drafter, strategy in combos:
            got = run(one, ckpt, seed=seed, drafter=drafter, strategy=strategy)
            if got["answers"] != ref["answers"]:
                checked["mismatches"].append({"seed": seed, "drafter": drafter,
                                              "strategy": strategy})
    checked["combinations"] = [f"{d}/{s}" for d, s in combos]
    results["lossless"] = checked

    # 3. plain decode against transformers' generate on the same weights
    prompt = TorchBackend(base, ckpt).question(0, 1, first=True)
    results["vs_transformers"] = vs_transformers(args.model, prompt, args.tokens)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(markdown(results) + "\n")
    print(markdown(results))


def markdown(r: dict[str, Any]) -> str:
    """The README table."""
    lines = ["| configuration | tok/s | speedup | acceptance | ms/token draft | verify | "
             "rollback | commit | lossless |", "|---|---|---|---|---|---|---|---|---|"]
    for name, v in r["conversation"].items():
        ms = v["ms_per_token"]
        lines.append(
            f"| {name} | {v['tok_s']:.0f} | {v['speedup']:.2f}x | {v['acceptance']:.2f} | "
            f"{ms.get('draft', 0):.2f} | {ms.get('verify', 0):.2f} | "
            f"{ms.get('rollback', 0):.2f} | {ms.get('commit', 0):.2f} | "
            f"{'yes' if v['lossless'] else 'NO'} |")
    lo, vt = r["lossless"], r["vs_transformers"]
    lines.append("")
    lines.append(f"Lossless: {lo['prompts']} prompts, {lo['tokens_compared']} reference tokens, "
                 f"{len(lo['combinations'])} drafter/strategy combinations, "
                 f"{len(lo['mismatches'])} mismatches.")
    lines.append(f"Plain decode: ours {vt['ours_tok_s']:.0f} tok/s, transformers generate "
                 f"{vt['transformers_tok_s']:.0f} tok/s ({vt['speedup']:.2f}x), same tokens: "
                 f"{vt['same_tokens']}.")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
