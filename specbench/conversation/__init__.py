"""`specledger bench conversation`: what each turn boundary of a long conversation costs.

Turn 1 is a long prompt and a long answer; every later turn sends the whole history back
plus a short question. Each conversation runs twice, once per EOG policy: `legacy`
(commit the whole accepted block, then look for the stop token: llama.cpp #28049's stray
tokens) and `truncate` (cut the block at EOG first). Every run is one recorded session in
the benchmark's log. Per turn boundary it reports decode tokens/s, draft acceptance,
prefix reuse (kept tokens, f_keep), re-prefill volume, restores (in-round and context
checkpoint) and the conversation cost, on the backend's own clock (simulated seconds on
the sim, wall seconds on torch):

- generation = decode time - rollback time (`TurnMetrics.generation_s`);
- state repair = rollback time + the context-checkpoint restore at the turn boundary
  (`TurnMetrics.state_repair_s`);
- repeated prefill = prefill time of the history tokens processed a second time
  (`TurnMetrics.reprefill_s`, pro rata by tokens within a prefill chunk);
- conversation cost = the sum of the three. First-time prefill of the new prompt tokens is
  left out: both policies pay it alike.

Backends:

- sim, `qwen3.5-27b-h200` profile at the scale of the #28049 report: 20 turns, a
  4,096-token first prompt, 32-token questions, 16,000-token answers, the `checkpoint`
  rollback strategy (llama.cpp's FULL mode) and the MTP-like drafter of `make demo`
  (`synthetic`, 0.9 per-token acceptance, draft 8). The wall-clock time of each whole
  recorded run (audit on) is measured, three runs per policy (the median counts): the
  project's goal is such a conversation simulated in under 10 s.
- torch, the shipped models on this CPU (MTP drafter, draft 4, answers capped at 256
  tokens, audit off). The model chooses its own answer lengths, so whether `legacy` leaves
  stray tokens that break the prefix is up to the model; the tables say what happened.

`quick` shrinks both to seconds (3 sim turns of 512-token answers, 2 torch turns of at
most 24 tokens): numbers not to quote.
"""

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.config import EogPolicy, RunConfig
from fsm.turn_metrics import TurnMetrics
from specbench.common import BenchOptions, Goal, SuiteResult, md_table, timed
from specbench.conversation.plots import CLOCK, plot_cost, plot_reprefill
from specledger.api import run_session

SUITE = "conversation"
COMMAND = "specledger bench conversation"
POLICIES = (EogPolicy.LEGACY, EogPolicy.TRUNCATE)
GOAL_SIM_S = 10.0
SIM_REPEATS = 3  # the sim's wall time is the goal: a median steadies it on a shared machine
DEFINITIONS = {
    "generation_s": "decode_s - rollback_s",
    "state_repair_s": "rollback_s + repair_s (context-checkpoint restore at the turn boundary)",
    "repeated_prefill_s": "reprefill_s: prefill time of re-prefilled history tokens "
                          "(pro rata by tokens within a prefill chunk)",
    "conversation_s": "generation_s + state_repair_s + repeated_prefill_s",
    "clock": "sim: simulated seconds of the cost profile; torch: wall seconds on this CPU",
    "wall_s": "wall-clock seconds of the whole recorded run (run_session), both backends; "
              "on the sim the median of SIM_REPEATS recorded runs (walls: each of them)",
}


def sim_config(opts: BenchOptions) -> RunConfig:
    """The simulated conversation: 20 turns of 16,000-token answers on Qwen3.5-27B /
    H200, or 3 turns of 512 when quick (with seed 0 `legacy` re-prefills on both later
    turns)."""
    base = RunConfig(backend="sim", profile="qwen3.5-27b-h200", drafter="synthetic",
                     acceptance=0.9, draft_max=8, question_tokens=32, seed=opts.seed)
    if opts.quick:
        return base.replace(turns=3, prompt_tokens=512, answer_tokens=512)
    return base.replace(turns=20, prompt_tokens=4096, answer_tokens=16000)


def torch_config(opts: BenchOptions) -> RunConfig:
    """The real engine's conversation: the shipped models, MTP drafter, audit off."""
    base = RunConfig(backend="torch", model=opts.model, draft_model=opts.draft_model,
                     device=opts.device,
                     drafter="mtp", draft_max=4, audit=False, seed=opts.seed)
    if opts.quick:
        return base.replace(turns=2, max_answer_tokens=24)
    return base.replace(turns=4, max_answer_tokens=256)


@dataclass(frozen=True)
class ConversationRun:
    """One conversation, recorded once or more: its backend, EOG policy, sessions, the
    wall time of each run, and the per-turn metrics (the same in every run)."""

    backend: str
    policy: str
    sessions: list[int]
    walls: list[float]
    events: int
    turns: list[TurnMetrics]

    @property
    def session(self) -> int:
        """The first recorded run (the one the tables show)."""
        return self.sessions[0]

    @property
    def wall_s(self) -> float:
        """Median wall seconds of the runs."""
        return statistics.median(self.walls)

    def total(self, attr: str) -> float:
        """`attr` of TurnMetrics summed over the turns."""
        return sum(getattr(m, attr) for m in self.turns)

    def totals(self) -> dict[str, float]:
        """Whole-conversation sums, with acceptance and decode tokens/s over all turns."""
        sums = {a: self.total(a) for a in (
            "generated_tokens", "drafted", "accepted", "reprefill_tokens", "restores",
            "ctx_restores", "stray_tokens", "prefill_s", "decode_s", "generation_s",
            "state_repair_s", "reprefill_s", "conversation_s")}
        sums["acceptance"] = sums["accepted"] / sums["drafted"] if sums["drafted"] else 0.0
        sums["decode_tps"] = (sums["generated_tokens"] / sums["decode_s"]
                              if sums["decode_s"] else 0.0)
        return sums

    def to_dict(self) -> dict[str, Any]:
        """JSON-able mapping: identity, wall time, per-turn rows and totals."""
        return {"backend": self.backend, "eog_policy": self.policy, "session": self.session,
                "wall_s": self.wall_s, "walls": self.walls, "events": self.events,
                "sessions": self.sessions,
                "turns": [turn_row(m) for m in self.turns], "totals": self.totals()}


def turn_row(m: TurnMetrics) -> dict[str, Any]:
    """One turn's metrics with the conversation-cost parts spelled out."""
    return {**m.to_dict(), "generation_s": m.generation_s, "state_repair_s": m.state_repair_s,
            "repeated_prefill_s": m.reprefill_s, "conversation_s": m.conversation_s}


def record(config: RunConfig, opts: BenchOptions, repeats: int = 1) -> list[ConversationRun]:
    """Run and record `config` `repeats` times per EOG policy, timing each whole run.
    The runs of one policy are the same conversation (the backend is deterministic or,
    on torch, run once); repeats only steady the wall time on a shared machine."""
    runs = []
    backend = config.backend.value
    for policy in POLICIES:
        size = (f"{config.turns} turns x {config.answer_tokens} tokens" if backend == "sim"
                else f"{config.turns} turns, answers up to {config.answer_cap} tokens")
        results, walls = [], []
        for i in range(repeats):
            opts.log(f"{SUITE}: {backend} eog={policy.value}: {size}, run {i + 1}/{repeats}")
            result, wall = timed(run_session, config.replace(eog_policy=policy.value), opts.db)
            results.append(result)
            walls.append(wall)
        first = results[0]
        run = ConversationRun(backend, policy.value, [r.session_id for r in results], walls,
                              first.events, first.turns)
        opts.log(f"{SUITE}: {backend} eog={policy.value}: sessions {run.sessions}, "
                 f"{run.wall_s:.1f} s wall (median), "
                 f"{run.total('reprefill_tokens'):.0f} tokens re-prefilled")
        runs.append(run)
    return runs


def run_torch(opts: BenchOptions) -> list[ConversationRun]:
    """Both policies on the real engine with `opts.threads` torch threads."""
    import torch

    from engine.session import Session
    from eventlog import NullRecorder

    torch.set_num_threads(opts.threads)
    config = torch_config(opts)
    # One unrecorded warm-up, so first-call costs (imports, allocations) do not land on
    # the first policy's run and make the two incomparable.
    Session(config.replace(turns=1, max_answer_tokens=8), NullRecorder()).run()
    return record(config, opts)


def goals(sim: Sequence[ConversationRun], runs: Sequence[ConversationRun],
          quick: bool) -> list[Goal]:
    """The wall time of the simulated conversation (the median of its runs, for the
    slower policy) and zero history re-prefill under `truncate` on every backend."""
    secs = max(r.wall_s for r in sim)
    note = " (quick run: not to quote)" if quick else ""
    walls = max(sim, key=lambda r: r.wall_s).walls
    spread = (f" (median of {len(walls)}: {min(walls):.1f}...{max(walls):.1f} s)"
              if len(walls) > 1 else "")
    truncated = sum(int(r.total("reprefill_tokens")) for r in runs if r.policy == "truncate")
    return [
        Goal("20-turn sim conversation, 16k answers", f"< {GOAL_SIM_S:.0f} s",
             f"{secs:.1f} s{spread}{note}", secs < GOAL_SIM_S, COMMAND),
        Goal("zero re-prefill of history under truncate", "0 tokens",
             f"{truncated} tokens (sim + torch){note}", truncated == 0, COMMAND),
    ]


def _turn_table(run: ConversationRun) -> str:
    clock = CLOCK[run.backend]
    rows = [(m.turn, m.prompt_tokens, m.generated_tokens, f"{m.acceptance:.2f}",
             f"{m.decode_tps:.1f}", m.kept_tokens, f"{m.f_keep:.4f}", m.reprefill_tokens,
             m.ctx_restores, m.restores, m.stray_tokens, f"{m.generation_s:.3f}",
             f"{m.state_repair_s:.3f}", f"{m.reprefill_s:.3f}", f"{m.conversation_s:.3f}")
            for m in run.turns]
    return md_table(["turn", "prompt", "gen", "acceptance", "tok/s", "kept", "f_keep",
                     "re-prefill", "ctx restores", "restores", "stray",
                     f"generation ({clock})", f"state repair ({clock})",
                     f"repeated prefill ({clock})", f"cost ({clock})"], rows)


def _summary_table(runs: Sequence[ConversationRun]) -> str:
    truncate = {r.backend: r.total("conversation_s") for r in runs if r.policy == "truncate"}
    rows = []
    for r in runs:
        t = r.totals()
        extra = t["conversation_s"] - truncate[r.backend]
        rows.append((r.backend, r.policy, r.session, len(r.turns), f"{r.wall_s:.1f}",
                     f"{t['generated_tokens']:.0f}", f"{t['acceptance']:.2f}",
                     f"{t['decode_tps']:.1f}", f"{t['reprefill_tokens']:.0f}",
                     f"{t['ctx_restores']:.0f}", f"{t['generation_s']:.2f}",
                     f"{t['state_repair_s']:.2f}", f"{t['reprefill_s']:.2f}",
                     f"{t['conversation_s']:.2f} {CLOCK[r.backend]}", f"{extra:+.2f}"))
    return md_table(["backend", "eog", "session", "turns", "wall s", "generated",
                     "acceptance", "tok/s", "re-prefilled", "ctx restores", "generation",
                     "state repair", "repeated prefill", "conversation cost",
                     "vs truncate"], rows)


def torch_note(runs: Sequence[ConversationRun]) -> str:
    """What `legacy` did on the real engine, in words: the model, not a setting, decides
    whether accepted drafts run past `<|im_end|>` and whether they break the prefix."""
    legacy = next(r for r in runs if r.policy == "legacy")
    reprefilled = int(legacy.total("reprefill_tokens"))
    if reprefilled:
        return (f"On torch, `legacy` re-prefilled {reprefilled} history tokens: accepted "
                "drafts behind `<|im_end|>` broke the next prompt's prefix.")
    # Only strays of a turn that has a next turn can cost a re-prefill.
    strays = sum(m.stray_tokens for m in legacy.turns[:-1])
    if strays:
        why = (f"it committed {strays} stray tokens behind `<|im_end|>` before a next turn, "
               "but they were the template's own next tokens, so the next prompt still "
               "extended the slot (f_keep 1.0)")
    else:
        why = ("no accepted block carried drafts past `<|im_end|>` before a next turn (the "
               "model ends its own answers; `specledger scenario eog-tail --backend torch` "
               "plants the case)")
    return (f"On torch, `legacy` re-prefilled nothing in this run: {why}. Both policies "
            "then do the same work, so their torch cost difference is wall-clock noise of "
            "the shared CPU.")


def run(opts: BenchOptions) -> SuiteResult:
    """Run the conversation on both backends under both EOG policies; write the plots,
    report the goals."""
    folder = opts.suite_dir(SUITE)
    scfg, tcfg = sim_config(opts), torch_config(opts)
    sim = record(scfg, opts, repeats=1 if opts.quick else SIM_REPEATS)
    real = run_torch(opts)
    runs = [*sim, *real]
    files = [*plot_reprefill(runs, folder / "reprefill_per_turn"),
             *plot_cost(runs, folder / "cost_per_turn")]
    sections = [
        "Conversation cost = generation (decode - rollback) + state repair (rollback + "
        "context-checkpoint restore) + repeated prefill (prefill time of re-prefilled "
        "history); sim times are simulated seconds, torch times wall seconds on this CPU. "
        "`wall s` is the wall-clock time of the whole recorded run.", "",
        _summary_table(runs), "",
        f"sim: {scfg.profile}, {scfg.turns} turns, {scfg.prompt_tokens}-token first prompt, "
        f"{scfg.question_tokens}-token questions, {scfg.answer_tokens}-token answers, "
        f"`synthetic` drafter at {scfg.acceptance} per-token acceptance (MTP-like), draft "
        f"{scfg.draft_max}, strategy `{scfg.strategy.value}`.",
        f"torch: {tcfg.model} with its MTP head, draft {tcfg.draft_max}, {tcfg.turns} "
        f"turns, answers up to {tcfg.answer_cap} tokens, {opts.threads} thread(s), audit "
        "off. " + torch_note(real),
    ]
    for r in runs:
        sections += ["", f"### {r.backend}, eog={r.policy} (session {r.session}, "
                         f"{r.wall_s:.1f} s wall)", "", _turn_table(r)]
    data = {
        "definitions": DEFINITIONS,
        "configs": {"sim": scfg.to_dict(), "torch": tcfg.to_dict()},
        "threads": opts.threads,
        "runs": [r.to_dict() for r in runs],
    }
    return SuiteResult(SUITE, data, "\n".join(sections), goals=goals(sim, runs, opts.quick),
                       files=files, sessions=[sid for r in runs for sid in r.sessions])
