"""`specledger bench engines`: our engine, llama.cpp's llama-server and vLLM side by side,
on the same weights (the wide pair, `shipped:wide` with its MTP head and
`shipped:wide-draft`: the only models whose head widths vLLM's CPU kernels accept), the
same prompts, greedy, one thread for ours and llama.cpp.

Prompts: the first-turn held-out questions of a torch session with one slot per prompt,
so every engine answers exactly the same token ids; answers capped at `tokens`, drafts at
`draft` tokens, n-gram keys of 4. Per method (our drafter name; each engine's own in the
table): decode tokens/s, acceptance (accepted / drafted) and mean accepted length (tokens
per verify step, 1 + accepted / steps). Each engine runs in the dtype it compares in: ours
and llama.cpp in float32 (f32 GGUF, f32 KV cache), vLLM in bfloat16 (its CPU build runs
nothing else). Ours: the `input_replay` rollback strategy, audit off; llama.cpp: a fresh
server per pass; vLLM: a server per method, every pass on it. The fastest pass counts
(load on a shared CPU only ever adds time).

Greedy speculative decoding is lossless, so every method's answers must equal its engine's
plain answers up to near-ties (adapters/differential.py: a first differing token where the
gaps the engine reports are within its dtype's bound; bfloat16 verify and decode round
differently, so vLLM's MTP answers part from its plain ones at ties): the goal, and a
column of the table. vLLM's methods it refuses on this
build, or dies running (ngram on a CPU without AMX), are listed with the error.
"""

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from adapters.differential import Relation, Run, compare
from engine.config import DType, RunConfig
from specbench.common import BenchOptions, Goal, SuiteResult, md_table, panels, save_figure, timed
from specbench.engines.runs import (
    LLAMA,
    OURS,
    PLAIN,
    VLLM,
    EngineRun,
    run_llama,
    run_ours,
    run_vllm,
)

SUITE = "engines"
COMMAND = "specledger bench engines"
TARGET, DRAFT = "shipped:wide", "shipped:wide-draft"
METHODS = {OURS: (PLAIN, "mtp", "ngram-simple", "ngram-mod", "draft-model"),
           LLAMA: (PLAIN, "mtp", "ngram-simple", "ngram-mod", "draft-model"),
           VLLM: (PLAIN, "mtp", "ngram-simple", "draft-model")}
QUICK_METHODS = (PLAIN, "ngram-simple")
ENGINES = (OURS, LLAMA, VLLM)
STRATEGY = "input_replay"
PANEL = (6.4, 3.8)


@dataclass(frozen=True)
class Plan:
    """`repeats` passes of each engine's methods over `prompts` prompts (llama.cpp's
    `llama_repeats`: its pass lasts about a second, so load elsewhere on the CPU swings it
    most, and a pass costs it least), answers capped at `tokens`, drafts at `draft`."""

    prompts: int
    tokens: int
    draft: int
    repeats: int
    llama_repeats: int
    quick: bool = False

    def methods(self, engine: str) -> tuple[str, ...]:
        """The methods `engine` runs in this plan."""
        return QUICK_METHODS if self.quick else METHODS[engine]


def plan_for(quick: bool) -> Plan:
    """8 prompts of up to 128 tokens, draft 4, 2 passes (llama.cpp 6); quick: a smoke run."""
    if quick:
        return Plan(prompts=1, tokens=16, draft=4, repeats=1, llama_repeats=1, quick=True)
    return Plan(prompts=8, tokens=128, draft=4, repeats=2, llama_repeats=6)


def base_config(opts: BenchOptions, plan: Plan) -> RunConfig:
    """One turn per prompt (one slot each) on the wide pair, plain, in float32."""
    return RunConfig(backend="torch", model=TARGET, draft_model=DRAFT, drafter=PLAIN,
                     device="cpu", strategy=STRATEGY, draft_max=plan.draft, ngram_n=4,
                     turns=1, slots=plan.prompts, max_answer_tokens=plan.tokens, audit=False,
                     seed=opts.seed)


def lossless(plain: EngineRun, passes: Sequence[EngineRun]) -> dict[str, int | bool]:
    """How `passes` of one method answered against the engine's first plain pass: answers
    compared, token-identical, parted at a near-tie, and whether all are explained."""
    def run(r: EngineRun) -> Run:
        return Run(r.engine, r.method, DType(r.dtype), tuple(r.answers))

    found = [compare(Relation.SPECULATIVE, run(plain), run(r)) for r in passes]
    return {"answers": sum(c.answers for c in found),
            "identical": sum(c.identical for c in found),
            "near_ties": sum(len(c.divergences) for c in found if c.explained),
            "lossless": all(c.explained and not c.failed for c in found)}


def rows(runs: Sequence[EngineRun], failed: dict[str, str]) -> list[dict[str, Any]]:
    """Per engine and method, in table order: the fastest pass's numbers, the speedup over
    the engine's plain fastest pass, and every pass's answers against plain decoding's;
    then vLLM's methods that `failed`, with why."""
    out = []
    for engine in ENGINES:
        mine = [r for r in runs if r.engine == engine]
        if not mine:
            continue
        plain = [r for r in mine if r.method == PLAIN]
        plain_best = max(plain, key=lambda r: r.tok_s) if plain else None
        for method in dict.fromkeys(r.method for r in mine):
            passes = [r for r in mine if r.method == method]
            best = max(passes, key=lambda r: r.tok_s)
            out.append({
                "engine": engine, "method": method, "engine_method": best.engine_method,
                "dtype": best.dtype, "tok_s": best.tok_s,
                "speedup": best.tok_s / plain_best.tok_s if plain_best else None,
                "acceptance": best.acceptance if best.drafted else None,
                "mean_length": best.mean_length,
                "generated": best.generated, "drafted": best.drafted,
                "accepted": best.accepted, "steps": best.steps,
                "tok_s_passes": [r.tok_s for r in passes],
                "vs_plain": lossless(plain[0], passes) if plain else None})
    out += [{"engine": VLLM, "method": m, "failed": why} for m, why in failed.items()]
    return out


def verdict(vs_plain: dict[str, Any] | None) -> str:
    """The table's word on a method's answers against plain decoding."""
    if vs_plain is None:
        return "-"
    if not vs_plain["lossless"]:
        return "**NO**"
    ties = vs_plain["near_ties"]
    return "yes" if not ties else f"yes ({ties}/{vs_plain['answers']} part at a near-tie)"


def table(joined: Sequence[dict[str, Any]]) -> str:
    """The side-by-side markdown table: a row per engine and method."""
    def num(v: float | None, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    body = []
    for r in joined:
        if "failed" in r:
            why = r["failed"].replace("|", "/")
            body.append((r["engine"], r["method"], "bfloat16", "-", "-", "-", "-", why))
            continue
        own = r["engine_method"]
        name = r["method"] if own == r["method"] else f"{r['method']} ({own})"
        body.append((r["engine"], name, r["dtype"], f"{r['tok_s']:.0f}",
                     num(r["speedup"], ".2f") + "x", num(r["acceptance"], ".2f"),
                     num(r["mean_length"], ".2f"), verdict(r["vs_plain"])))
    return md_table(["engine", "method", "dtype", "tok/s", "vs plain", "acceptance",
                     "mean accepted length", "answers = plain"], body)


def plot(joined: Sequence[dict[str, Any]], stem: Path) -> list[Path]:
    """Decode tokens/s and acceptance per method, the three engines' bars side by side."""
    import numpy as np

    ran = [r for r in joined if "failed" not in r]
    methods = list(dict.fromkeys(r["method"] for r in ran))
    fig, (speed, accept) = panels(2, *PANEL)
    width = 0.8 / len(ENGINES)
    for ax, key, shown in ((speed, "tok_s", methods),
                           (accept, "acceptance", [m for m in methods if m != PLAIN])):
        x = np.arange(len(shown))
        for k, engine in enumerate(ENGINES):
            by = {r["method"]: r for r in ran if r["engine"] == engine}
            label = f"{engine} ({next(iter(by.values()))['dtype']})" if by else engine
            ax.bar(x - 0.4 + width * (k + 0.5),
                   [(by[m][key] or 0.0) if m in by else 0.0 for m in shown], width, label=label)
        ax.set_xticks(x, shown, rotation=20, ha="right", fontsize=8)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    lost = {r["method"]: r["failed"].partition(":")[0] for r in joined if "failed" in r}
    for i, m in enumerate(methods):  # vLLM's bar is missing there: say why
        if m in lost:
            speed.annotate(f"vllm: {lost[m]}", (i + 0.4 - width / 2, 0), xycoords=(
                "data", "axes fraction"), xytext=(0, 4), textcoords="offset points",
                rotation=90, ha="center", va="bottom", fontsize=7)
    speed.set_title("decode tokens/s (log scale)", fontsize=9)
    speed.set_yscale("log")
    accept.set_title("acceptance (accepted / drafted)", fontsize=9)
    return save_figure(fig, stem)


def run(opts: BenchOptions) -> SuiteResult:
    """Measure the three engines, write the table, the plot and the goal."""
    from adapters.llama.server.paths import require_server
    from adapters.vllm.paths import require_python
    from engine.hybrid.loader import load_checkpoint
    from specbench.common import server_logs
    from specbench.llama.runs import session_prompts

    require_python()  # before anything runs: each engine must be there
    require_server(opts.llama_build)
    folder = opts.suite_dir(SUITE)
    plan = plan_for(opts.quick)
    base = base_config(opts, plan)
    ckpt = load_checkpoint(base.model)
    prompts = session_prompts(base, ckpt)
    logs = server_logs(SUITE)
    wall: dict[str, float] = {}
    (vllm_runs, failed), wall[VLLM] = timed(run_vllm, opts, base, plan.methods(VLLM), prompts,
                                            plan.repeats, logs)
    llama_runs, wall[LLAMA] = timed(run_llama, opts, base, plan.methods(LLAMA), prompts,
                                    plan.llama_repeats, logs)
    ours, wall[OURS] = timed(run_ours, opts, base, plan.methods(OURS), plan.repeats, ckpt)
    everything = [*ours, *llama_runs, *vllm_runs]
    joined = rows(everything, failed)
    ok = all(r["vs_plain"]["lossless"] for r in joined if "failed" not in r)
    dead = "".join(f"; vLLM {m}: {why.partition(':')[0]}" for m, why in failed.items())
    goal = Goal(name="every speculative method that runs answers as its engine's plain "
                     "decoding (greedy, same weights)",
                target="token-identical up to near-ties",
                measured=(f"{plan.prompts} prompt(s), {len(everything)} passes: "
                          f"{'equal' if ok else 'DIFFERENT'}{dead}"
                          f"{' (quick run)' if opts.quick else ''}"),
                met=ok, command=COMMAND)
    quick = " Quick run: not numbers to quote." if opts.quick else ""
    text = "\n".join([
        f"Same weights ({TARGET} with its MTP head, {DRAFT}), {plan.prompts} held-out "
        f"prompt(s), answers capped at {plan.tokens} tokens, draft {plan.draft}, greedy, "
        f"{opts.threads} thread(s) for ours and llama.cpp; fastest of {plan.repeats} "
        f"pass(es) ({plan.llama_repeats} for llama.cpp). tok/s = generated tokens / decode "
        f"seconds (prefill excluded); mean accepted length = 1 + accepted / verify steps "
        f"with drafts; answers = plain: every pass's answers against the engine's plain "
        f"ones, up to near-ties. Measured on a shared 2-core machine: tok/s swings with the "
        f"load of other jobs.{quick}",
        "", table(joined)])
    files = plot(joined, folder / "engines")
    data = {"plan": asdict(plan), "threads": opts.threads, "model": TARGET,
            "draft_model": DRAFT, "config": base.to_dict(), "wall_s": wall, "rows": joined,
            "runs": [r.to_dict() for r in everything]}
    opts.log(f"{SUITE}: " + ", ".join(f"{k} {v:.0f} s" for k, v in wall.items()))
    return SuiteResult(SUITE, data, text, goals=[goal], files=files,
                       sessions=[r.session for r in ours if r.session is not None])
