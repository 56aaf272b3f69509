"""`specledger bench drafters`: what each drafter's acceptance buys, on this CPU and on the
simulated 27B / H200.

- torch: the shipped models on this CPU, greedy, audit off, one code conversation (2
  turns, answers capped at 256 tokens, draft 8) decoded plainly (`drafter=none`) and with
  every real drafter: `ngram-simple`, `ngram-map-k`, `ngram-mod`, `draft-model`, `mtp`
  and the chain `ngram-mod,mtp` (ngram-mod where its pool matches, mtp elsewhere). One
  rollback strategy for all, `input_replay`: the fastest on this CPU (`specledger bench
  strategies`), so the drafters are compared at their best. The shared CPU is noisy, so
  the configurations are interleaved and repeated (3 rounds of [plain, drafter 1, ...,
  drafter N]) and each configuration's fastest run counts (load from other jobs only ever
  adds time). Greedy speculative decoding is lossless, so every drafter's answers are
  compared token for token with plain decode's.
- sim: the `qwen3.5-27b-h200` profile, the `synthetic` drafter at per-token acceptance
  0.2..0.9 and draft 4 and 8, and plain decode, one turn of 2,000-token answers: the
  speedup a drafter's acceptance buys on that hardware. The sim's drafts cost nothing (the
  synthetic drafter reads the truth), so its curve is what a free drafter (an MTP head's
  cost is small next to a 27B verify) would buy; the same `input_replay` strategy.

Per drafter: acceptance (accepted / drafted), mean accepted tokens per drafting round,
decode tokens/s, speedup over plain decode (plain's decode seconds per generated token
over the drafter's, fastest runs) and the draft time share (draft phase / decode time).
Every run is one recorded session in the benchmark's log.

`quick` shrinks both to seconds (torch: 1 turn of at most 24 tokens, `ngram-simple` and
`mtp` only, one run each; sim: 2 acceptances, 200-token answers): numbers not to quote.
"""

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from engine.config import RunConfig
from eventlog import open_db
from specbench.common import BenchOptions, SuiteResult, md_table, panels, save_figure, timed
from specbench.drafters.runs import PLAIN, Run, record, recorded_passes, summary

SUITE = "drafters"
DRAFTERS = ("ngram-simple", "ngram-map-k", "ngram-mod", "draft-model", "mtp", "ngram-mod,mtp")
QUICK_DRAFTERS = ("ngram-simple", "mtp")
STRATEGY = "input_replay"  # the fastest rollback strategy on this CPU (bench strategies)
SIM_PROFILE = "qwen3.5-27b-h200"
PANEL = (5.2, 3.8)  # inches per plot panel
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
DEFINITIONS = {
    "acceptance": "accepted / drafted tokens over the whole run",
    "accepted_per_round": "accepted tokens / drafting rounds (rounds that verified drafts)",
    "s_per_token": "decode seconds (TurnMetrics.decode_s, all turns) / generated tokens",
    "tok_s": "generated tokens / decode seconds",
    "speedup": "plain decode's s_per_token / the drafter's; torch: each configuration's "
               "fastest run (min over repeats)",
    "draft_share": "draft phase (DRAFT event durations) / decode seconds",
    "lossless": "every run's committed answer tokens equal plain decode's (greedy)",
    "clock": "torch: wall seconds on this CPU; sim: simulated seconds of the profile",
}


@dataclass(frozen=True)
class TorchPlan:
    """The real engine's runs: `repeats` interleaved rounds of plain decode and every
    drafter over one `turns`-turn conversation, answers capped at `tokens`."""

    drafters: tuple[str, ...]
    turns: int
    tokens: int
    draft: int
    repeats: int


@dataclass(frozen=True)
class SimPlan:
    """The sim's runs: plain decode and the synthetic drafter at every per-token
    acceptance x draft length, one turn of `tokens`-token answers."""

    acceptances: tuple[float, ...]
    drafts: tuple[int, ...]
    tokens: int


def torch_plan(quick: bool) -> TorchPlan:
    """Every drafter, 3 interleaved repeats; quick: two drafters once, briefly."""
    if quick:
        return TorchPlan(QUICK_DRAFTERS, turns=1, tokens=24, draft=8, repeats=1)
    return TorchPlan(DRAFTERS, turns=2, tokens=256, draft=8, repeats=3)


def sim_plan(quick: bool) -> SimPlan:
    """Acceptance 0.2..0.9 at draft 4 and 8; quick: two acceptances, short answers."""
    if quick:
        return SimPlan((0.5, 0.9), (4, 8), tokens=200)
    return SimPlan(tuple(round(0.2 + 0.1 * i, 1) for i in range(8)), (4, 8), tokens=2000)


def torch_config(model: str, draft_model: str, *, turns: int, tokens: int, draft: int = 8,
                 device: str = "auto",
                 seed: int = 0) -> RunConfig:
    """Plain greedy decode of the code conversation on the real engine, audit off; a
    drafter is a `.replace(drafter=...)` away (`bench/torch_speculative.py` shares it)."""
    return RunConfig(backend="torch", model=model, draft_model=draft_model, drafter=PLAIN,
                     device=device,
                     strategy=STRATEGY, draft_max=draft, turns=turns,
                     max_answer_tokens=tokens, audit=False, seed=seed)


def sim_config(plan: SimPlan, seed: int = 0) -> RunConfig:
    """Plain decode of one simulated turn on the 27B / H200 profile."""
    return RunConfig(backend="sim", profile=SIM_PROFILE, drafter=PLAIN, strategy=STRATEGY,
                     turns=1, answer_tokens=plan.tokens, seed=seed)


def run_torch(opts: BenchOptions, plan: TorchPlan, log: Any) -> list[Run]:
    """The interleaved rounds on the real engine with `opts.threads` torch threads."""
    base = torch_config(opts.model, opts.draft_model, turns=plan.turns, tokens=plan.tokens,
                        device=opts.device,
                        draft=plan.draft, seed=opts.seed)
    configs = [base, *(base.replace(drafter=d) for d in plan.drafters)]
    return recorded_passes(
        opts, configs, plan.repeats, log, opts.checkpoint(opts.model),
        lambda i: f"{SUITE}: torch round {i + 1}/{plan.repeats}: plain + "
                  f"{len(plan.drafters)} drafters, {plan.turns} turn(s) of up to "
                  f"{plan.tokens} tokens, {opts.threads} thread(s)")


def run_sim(opts: BenchOptions, plan: SimPlan, log: Any) -> list[Run]:
    """Plain decode and the synthetic drafter over the acceptance x draft grid."""
    base = sim_config(plan, opts.seed)
    opts.log(f"{SUITE}: sim {SIM_PROFILE}: plain + {len(plan.acceptances)} acceptances x "
             f"{len(plan.drafts)} draft lengths, {plan.tokens}-token answers")
    return [record(base, opts, log),
            *(record(base.replace(drafter="synthetic", acceptance=p, draft_max=k), opts, log)
              for k in plan.drafts for p in plan.acceptances)]


def torch_table(rows: Sequence[dict[str, Any]]) -> str:
    """The per-drafter table of the real engine."""
    return md_table(
        ["drafter", "acceptance", "accepted / round", "decode tok/s", "speedup",
         "draft share", "lossless", "sessions"],
        [(r["drafter"] if r["drafter"] != PLAIN else "plain decode",
          f"{r['acceptance']:.2f}" if r["drafted"] else "-",
          f"{r['accepted_per_round']:.2f}" if r["drafted"] else "-",
          f"{r['tok_s']:.0f}", f"{r['speedup']:.2f}x", f"{100 * r['draft_share']:.0f}%",
          "yes" if r["lossless"] else "**NO**", ", ".join(map(str, r["sessions"])))
         for r in rows])


def sim_table(rows: Sequence[dict[str, Any]], drafts: Sequence[int]) -> str:
    """Per-token acceptance setting x draft length: measured acceptance, speedup."""
    cell = {(r["setting"], r["draft"]): r for r in rows if r["drafter"] != PLAIN}
    header = ["per-token acceptance", *(f"draft {k}: {what}" for k in drafts
                                        for what in ("acceptance", "accepted / round", "speedup"))]
    body = []
    for p in sorted({s for s, _ in cell}):
        row = [f"{p:.1f}"]
        for k in drafts:
            r = cell[(p, k)]
            row += [f"{r['acceptance']:.2f}", f"{r['accepted_per_round']:.2f}",
                    f"{r['speedup']:.2f}x"]
        body.append(row)
    return md_table(header, body)


def plot(sim_rows: Sequence[dict[str, Any]], torch_rows: Sequence[dict[str, Any]],
         plan: TorchPlan, threads: int, stem: Path) -> list[Path]:
    """Acceptance vs speedup per drafter: the sim 27B curves (a line per draft length),
    then the real engine's drafters (a point each) against the 1.0x of plain decode."""
    fig, (sim_ax, torch_ax) = panels(2, *PANEL)
    by_draft: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in sim_rows:
        if r["drafter"] != PLAIN:
            by_draft[r["draft"]].append(r)
    for k, rows in sorted(by_draft.items()):
        rows = sorted(rows, key=lambda r: r["acceptance"])
        sim_ax.plot([r["acceptance"] for r in rows], [r["speedup"] for r in rows],
                    marker="o", ms=3, label=f"draft {k}")
    sim_ax.set_title(f"sim {SIM_PROFILE}: synthetic drafter (free drafts)", fontsize=9)
    sim_ax.legend(fontsize=7, loc="upper left")
    for i, r in enumerate(r for r in torch_rows if r["drafter"] != PLAIN):
        torch_ax.scatter([r["acceptance"]], [r["speedup"]], marker=MARKERS[i % len(MARKERS)],
                         s=40, alpha=0.8, zorder=3,
                         label=f"{r['drafter']} ({r['acceptance']:.2f}, {r['speedup']:.2f}x)")
    torch_ax.set_title(f"torch CPU: shipped models, {STRATEGY}, draft {plan.draft}, "
                       f"{threads} thread(s)", fontsize=9)
    torch_ax.legend(fontsize=7, loc="upper left")
    for ax, rows in ((sim_ax, sim_rows), (torch_ax, torch_rows)):
        top = max([r["speedup"] for r in rows] + [1.0])
        ax.axhline(1.0, color="gray", linestyle="--", linewidth=1)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.4 * top)  # room for the legend above the points
        ax.set_xlabel("acceptance (accepted / drafted)")
        ax.set_ylabel("speedup over plain decode")
        ax.grid(alpha=0.3)
    return save_figure(fig, stem)


def run(opts: BenchOptions) -> SuiteResult:
    """Run the sim curves and the real drafters, write the plot and the tables."""
    folder = opts.suite_dir(SUITE)
    log = open_db(opts.db, create=True)
    splan, tplan = sim_plan(opts.quick), torch_plan(opts.quick)
    sim, sim_wall = timed(run_sim, opts, splan, log)
    real, torch_wall = timed(run_torch, opts, tplan, log)
    sim_rows, torch_rows = summary(sim), summary(real)
    files = plot(sim_rows, torch_rows, tplan, opts.threads, folder / "acceptance_vs_speedup")
    tcfg = torch_config(opts.model, opts.draft_model, turns=tplan.turns, tokens=tplan.tokens,
                        draft=tplan.draft, seed=opts.seed)
    plain_sim = next(r for r in sim_rows if r["drafter"] == PLAIN)
    lossless = {"torch": all(r["lossless"] for r in torch_rows),
                "sim": all(r["lossless"] for r in sim_rows)}
    quick = " Quick run: not numbers to quote." if opts.quick else ""
    table = "\n".join([
        f"Speedup = plain decode's decode seconds per generated token over the drafter's; "
        f"acceptance = accepted / drafted; accepted / round counts rounds that verified "
        f"drafts; draft share = draft phase / decode time. Rollback strategy "
        f"`{STRATEGY}` throughout (the fastest on this CPU).{quick}", "",
        f"### torch: {opts.model} on this CPU", "",
        f"{tplan.turns}-turn code conversation, answers capped at {tplan.tokens} tokens, "
        f"draft {tplan.draft}, greedy, audit off, {opts.threads} thread(s); "
        f"{tplan.repeats} interleaved run(s) per configuration, the fastest counts (wall "
        f"seconds). Lossless (every drafter's answers equal plain decode's): "
        f"{'yes' if lossless['torch'] else '**NO**'}.", "",
        torch_table(torch_rows), "",
        f"### sim: {SIM_PROFILE}", "",
        f"`synthetic` drafter (drafts cost nothing on the sim), one turn of "
        f"{splan.tokens}-token answers, simulated seconds; plain decode "
        f"{1e3 * plain_sim['s_per_token']:.2f} ms/token. Lossless: "
        f"{'yes' if lossless['sim'] else '**NO**'}.", "",
        sim_table(sim_rows, splan.drafts),
    ])
    data = {
        "definitions": DEFINITIONS,
        "strategy": STRATEGY, "threads": opts.threads, "model": opts.model,
        "plans": {"torch": asdict(tplan), "sim": asdict(splan)},
        "configs": {"torch": tcfg.to_dict(), "sim": sim_config(splan, opts.seed).to_dict()},
        "wall_s": {"sim": sim_wall, "torch": torch_wall},
        "lossless": lossless,
        "torch": {"summary": torch_rows, "runs": [r.to_dict() for r in real]},
        "sim": {"summary": sim_rows, "runs": [r.to_dict() for r in sim]},
    }
    opts.log(f"{SUITE}: sim {sim_wall:.1f} s, torch {torch_wall:.1f} s")
    return SuiteResult(SUITE, data, table, files=files,
                       sessions=[r.session for r in (*sim, *real)])
