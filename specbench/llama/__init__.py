"""`specledger bench llama`: llama.cpp's llama-server and our engine side by side, in one
run, on the same weights (the shipped target with its MTP head and the draft model,
exported to f32 GGUF for llama.cpp), one thread each, the same prompts, greedy; and
transformers' `generate` on the target's safetensors beside our plain decode
(`specbench.llama.hf`). Goals: our plain decode at least `LLAMA_SHARE` of llama.cpp's
tokens/s and at least `HF_TIMES` transformers'.

Prompts: the first-turn held-out questions of a torch session with one slot per prompt
(`session_prompts`), so both engines answer exactly the same token ids; answers capped at
`tokens` tokens, drafts at 8. Per drafter (ours -> llama.cpp's: none, mtp -> draft-mtp,
ngram-simple, ngram-map-k, ngram-mod, draft-model -> draft-simple): decode tokens/s and
acceptance. llama.cpp's numbers are its responses' `timings` (predicted_n over
predicted_ms, draft_n, draft_n_accepted), ours the recorded sessions' turn metrics
(generated tokens over decode seconds, drafted, accepted), with the `input_replay`
rollback strategy (the fastest on this CPU), the decode step compiled (`--compile`; the
unrecorded warm-ups compile it) and the audit off. Our engine runs on the CPU
whatever `--device` says: the llama-server built here is CPU-only. Each engine's
configurations are interleaved and repeated, and each one's fastest pass counts.

Both engines are lossless, so every answer must equal plain decode's, and llama.cpp's
plain answers must equal ours (the goal). `quick`: one prompt of 32 tokens, three drafters,
one pass: numbers not to quote.
"""

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from engine.config import RunConfig
from eventlog import open_db
from specbench.common import (
    BenchOptions,
    Goal,
    SuiteResult,
    md_table,
    panels,
    save_figure,
    server_logs,
    timed,
)
from specbench.drafters.runs import PLAIN, Run, recorded_passes, summary
from specbench.llama.hf import run_transformers
from specbench.llama.runs import llama_summary, run_llama, session_prompts

SUITE = "llama"
DRAFTERS = (PLAIN, "mtp", "ngram-simple", "ngram-map-k", "ngram-mod", "draft-model")
QUICK_DRAFTERS = (PLAIN, "ngram-mod", "mtp")
STRATEGY = "input_replay"
COMMAND = "specledger bench llama"
LLAMA_SHARE = 0.25  # our plain decode's tokens/s over llama.cpp's, at least
HF_TIMES = 3.0  # our plain decode's tokens/s over transformers' generate, at least
PANEL = (5.6, 3.6)


@dataclass(frozen=True)
class Plan:
    """`repeats` interleaved passes of every drafter over `prompts` prompts, answers
    capped at `tokens`, drafts at `draft`."""

    drafters: tuple[str, ...]
    prompts: int
    tokens: int
    draft: int
    repeats: int


def plan_for(quick: bool) -> Plan:
    """Every drafter, 8 prompts of up to 256 tokens, 3 passes; quick: a smoke run."""
    if quick:
        return Plan(QUICK_DRAFTERS, prompts=1, tokens=32, draft=8, repeats=1)
    return Plan(DRAFTERS, prompts=8, tokens=256, draft=8, repeats=3)


def torch_config(opts: BenchOptions, plan: Plan) -> RunConfig:
    """Plain greedy decode of one turn per prompt (one slot each) on our engine."""
    return RunConfig(backend="torch", model=opts.model, draft_model=opts.draft_model,
                     drafter=PLAIN, device="cpu", strategy=STRATEGY, draft_max=plan.draft,
                     turns=1, slots=plan.prompts, max_answer_tokens=plan.tokens, audit=False,
                     compile=True, seed=opts.seed)


def run_torch(opts: BenchOptions, plan: Plan, base: RunConfig, ckpt: Any) -> list[Run]:
    """The interleaved passes on our engine, recorded into the benchmark's log."""
    return recorded_passes(
        opts, [base.replace(drafter=d) for d in plan.drafters], plan.repeats,
        open_db(opts.db, create=True), ckpt,
        lambda i: f"{SUITE}: torch round {i + 1}/{plan.repeats}: {len(plan.drafters)} "
                  f"drafters, {plan.prompts} prompts of up to {plan.tokens} tokens")


def rows(ours: Sequence[dict[str, Any]], theirs: Sequence[dict[str, Any]]
         ) -> list[dict[str, Any]]:
    """One row per drafter joining both engines' summaries."""
    by_ours = {r["drafter"]: r for r in ours}
    out = []
    for t in theirs:
        o = by_ours[t["drafter"]]
        out.append({"drafter": t["drafter"], "llama_name": t["llama_name"],
                    "llama_tok_s": t["tok_s"], "llama_acceptance": t["acceptance"],
                    "llama_lossless": t["same_as_plain"], "ours_tok_s": o["tok_s"],
                    "ours_acceptance": o["acceptance"], "ours_lossless": o["lossless"],
                    "speed_ratio": t["tok_s"] / o["tok_s"] if o["tok_s"] else 0.0,
                    "sessions": o["sessions"]})
    return out


def table(joined: Sequence[dict[str, Any]]) -> str:
    """The side-by-side markdown table."""
    def acc(row: dict[str, Any], key: str) -> str:
        return "-" if row["drafter"] == PLAIN else f"{row[key]:.2f}"

    return md_table(
        ["drafter (ours / llama.cpp)", "llama.cpp tok/s", "llama.cpp acceptance",
         "ours tok/s", "ours acceptance", "llama.cpp / ours", "lossless (llama.cpp, ours)",
         "sessions"],
        [(f"{r['drafter']} / {r['llama_name']}" if r["drafter"] != PLAIN else "plain decode",
          f"{r['llama_tok_s']:.0f}", acc(r, "llama_acceptance"), f"{r['ours_tok_s']:.0f}",
          acc(r, "ours_acceptance"), f"{r['speed_ratio']:.2f}x",
          f"{'yes' if r['llama_lossless'] else '**NO**'}, "
          f"{'yes' if r['ours_lossless'] else '**NO**'}",
          ", ".join(map(str, r["sessions"]))) for r in joined])


def plot(joined: Sequence[dict[str, Any]], threads: int, stem: Path) -> list[Path]:
    """Decode tokens/s and acceptance per drafter, llama.cpp's bar beside ours."""
    import numpy as np

    fig, (speed, accept) = panels(2, *PANEL)
    x = np.arange(len(joined))
    labels = [r["drafter"] if r["drafter"] in (PLAIN, r["llama_name"])
              else f"{r['drafter']}\n{r['llama_name']}" for r in joined]
    for ax, key, title in ((speed, "tok_s", f"decode tokens/s, {threads} thread(s)"),
                           (accept, "acceptance", "acceptance (accepted / drafted)")):
        ax.bar(x - 0.2, [r[f"llama_{key}"] for r in joined], 0.4, label="llama.cpp")
        ax.bar(x + 0.2, [r[f"ours_{key}"] for r in joined], 0.4, label="specledger (torch)")
        ax.set_xticks(x, labels, rotation=30, ha="right", fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    return save_figure(fig, stem)


def run(opts: BenchOptions) -> SuiteResult:
    """Measure the engines, write the table, the plot and the goals."""
    from engine.hybrid.loader import load_checkpoint

    folder = opts.suite_dir(SUITE)
    plan = plan_for(opts.quick)
    ckpt = load_checkpoint(opts.model)
    base = torch_config(opts, plan)
    prompts = session_prompts(base, ckpt)
    logs = server_logs(SUITE)
    theirs, llama_wall = timed(run_llama, opts, base, plan.drafters, prompts, plan.repeats,
                               logs)
    ours, torch_wall = timed(run_torch, opts, plan, base, ckpt)
    hf = max(run_transformers(opts, prompts, base.answer_cap, ckpt.config.eos_token_ids,
                              plan.repeats), key=lambda r: r.tok_s)
    joined = rows(summary(ours), llama_summary(theirs))
    ours_plain = next(r.answer for r in ours if r.plain)
    llama_plain = next(r.answers for r in theirs if r.drafter == PLAIN)
    same = [t for answer in llama_plain for t in answer] == ours_plain
    hf_same = [t for answer in hf.answers for t in answer] == ours_plain
    lossless = all(r["llama_lossless"] and r["ours_lossless"] for r in joined)
    quick = " Quick run: not numbers to quote." if opts.quick else ""
    marked = " (quick run)" if opts.quick else ""
    goal = Goal(name="llama.cpp's greedy answers equal our engine's (same weights, every "
                     "drafter of both lossless)",
                target="token-identical",
                measured=(f"{plan.prompts} prompt(s) x {len(plan.drafters)} drafters: "
                          f"{'identical' if same and lossless else 'DIFFERENT'}"
                          f"{marked}"),
                met=same and lossless, command=COMMAND)
    plain = next(r for r in joined if r["drafter"] == PLAIN)
    share = plain["ours_tok_s"] / plain["llama_tok_s"]
    times = plain["ours_tok_s"] / hf.tok_s
    speed = [Goal(name="our plain decode's tokens/s over llama.cpp's (same weights)",
                  target=f">= {LLAMA_SHARE:.2f}x", measured=f"{share:.2f}x{marked}",
                  met=share >= LLAMA_SHARE, command=COMMAND),
             Goal(name="our plain decode's tokens/s over transformers' generate",
                  target=f">= {HF_TIMES:.1f}x", measured=f"{times:.2f}x{marked}",
                  met=times >= HF_TIMES, command=COMMAND)]
    text = "\n".join([
        f"Same weights (f32 GGUF export of {opts.model}, MTP head, draft model), "
        f"{opts.threads} thread(s) each, {plan.prompts} held-out prompt(s), answers capped "
        f"at {plan.tokens} tokens, draft {plan.draft}, greedy; fastest of {plan.repeats} "
        f"interleaved pass(es) per engine and drafter. tok/s = generated tokens / decode "
        f"seconds (prefill excluded; llama.cpp: its `timings`). Ours: `{STRATEGY}`, "
        f"`--compile`, audit off. llama.cpp's plain answers equal ours: "
        f"{'yes' if same else '**NO**'}.{quick}",
        "", table(joined), "",
        f"transformers' `generate` (float32 safetensors, greedy, fastest of {plan.repeats} "
        f"pass(es)): {hf.tok_s:.0f} tok/s; our plain decode {plain['ours_tok_s']:.0f} tok/s "
        f"({times:.2f}x), llama.cpp's {plain['llama_tok_s']:.0f} (ours {share:.2f}x of "
        f"it). Its answers equal ours: {'yes' if hf_same else 'no'}."])
    files = plot(joined, opts.threads, folder / "llama_vs_ours")
    data = {"plan": asdict(plan), "threads": opts.threads, "model": opts.model,
            "draft_model": opts.draft_model, "strategy": STRATEGY,
            "config": base.to_dict(), "wall_s": {"llama": llama_wall, "torch": torch_wall},
            "same_answers": same, "rows": joined,
            "transformers": {"best": hf.to_dict(), "same_answers": hf_same},
            "llama": {"summary": llama_summary(theirs), "runs": [r.to_dict() for r in theirs]},
            "torch": {"summary": summary(ours), "runs": [r.to_dict() for r in ours]}}
    opts.log(f"{SUITE}: llama.cpp {llama_wall:.1f} s, torch {torch_wall:.1f} s")
    return SuiteResult(SUITE, data, text, goals=[goal, *speed], files=files,
                       sessions=[r.session for r in ours])
