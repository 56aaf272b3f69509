"""The llama calibration's check by prediction, on prompts the fit never saw: each
held-out request replayed on the sim under the fitted profile (the same prompt length,
answer length and rounds, round by round: drafts verified and kept, plain steps where
llama-server drafted nothing), its decode tokens/s against llama-server's measured
ones; and a multi-turn llama-server conversation recorded by the llama ledger
(`specledger run --backend llama`) beside the same conversation shape on the sim, turn by
turn, by the history tokens each turn prefilled again.
"""

from collections.abc import Sequence
from typing import Any

from engine.config import RunConfig
from engine.session import MemoryJournal, Session
from engine.sim.backend import SimBackend
from engine.sim.costs import CostProfile
from engine.sim.vocab import SIM_TEMPLATE
from specbench.calibration.llama.fit import STRATEGY
from specbench.calibration.llama.measure import Timed, Trace
from specbench.calibration.validate import ScriptedDrafter


def sim_replay(trace: Trace, drafter: str, profile: CostProfile, mtp_token_s: float,
               cap: int, draft_max: int) -> dict[str, Any]:
    """One llama-server request on the sim under `profile`: its decode seconds (the MTP
    head's drafting added: the sim's drafters cost nothing) and tokens."""
    capped = trace.generated >= cap
    config = RunConfig(
        backend="sim", strategy=STRATEGY[drafter],
        draft_max=draft_max, turns=1, audit=False, profile=profile.name, drafter="none",
        prompt_tokens=max(1, trace.prompt_n - len(SIM_TEMPLATE.next_prompt([], []))),
        answer_tokens=cap + 1 if capped else max(1, trace.generated - 1),
        max_answer_tokens=cap)
    session = Session(config, MemoryJournal(), backend=SimBackend(config, profile))
    if drafter != "none":
        session.services.work[0].drafter = ScriptedDrafter([(r.drafted, r.accepted)
                                                    for r in trace.rounds])
    t = session.run()[0]
    draft_s = t.drafted * mtp_token_s if drafter == "mtp" else 0.0
    return {"generated": t.generated_tokens, "rounds": t.rounds, "drafted": t.drafted,
            "accepted": t.accepted, "decode_s": t.decode_s + draft_s, "draft_s": draft_s}


def validate(drafter: str, traces: Sequence[Trace], timed: Sequence[Timed],
             profile: CostProfile, mtp_token_s: float, cap: int, draft_max: int
             ) -> dict[str, Any]:
    """Held-out requests of one drafter: measured tok/s (generated over the median decode
    seconds of each request, summed) against the sim's."""
    sims = [sim_replay(tr, drafter, profile, mtp_token_s, cap, draft_max) for tr in traces]
    generated = sum(t.predicted_n for t in timed)
    measured_s = sum(t.decode_s for t in timed)
    predicted_s = sum(s["decode_s"] for s in sims)
    runs = [sum(t.predicted_n for t in timed) / sum(t.predicted_ms[i] / 1e3 for t in timed)
            for i in range(len(timed[0].predicted_ms))]
    measured, predicted = generated / measured_s, sum(s["generated"] for s in sims) / predicted_s
    return {"drafter": drafter, "requests": len(traces), "generated": generated,
            "sim_generated": sum(s["generated"] for s in sims),
            "drafted": sum(t.draft_n for t in timed),
            "sim_drafted": sum(s["drafted"] for s in sims),
            "accepted": sum(t.draft_accepted for t in timed),
            "sim_accepted": sum(s["accepted"] for s in sims),
            "measured_tok_s": measured, "measured_tok_s_per_pass": runs,
            "predicted_tok_s": predicted, "error": predicted / measured - 1}


def reprefill_check(llama_config: RunConfig, db: str, profile: CostProfile) -> dict[str, Any]:
    """A multi-turn conversation on llama-server (recorded through the llama ledger) and
    the sim's conversation of as many turns under `profile`, the same drafter, strategy
    and context checkpoints: history tokens prefilled again, turn by turn."""
    from specledger.runs.llama import run_llama

    done = run_llama(llama_config, db)
    llama_turns = [t.reprefill_tokens for t in done.session.ledger.turns]
    sim_config = RunConfig(backend="sim", turns=llama_config.turns, audit=False,
                           drafter=llama_config.drafter, profile=profile.name,
                           strategy=STRATEGY[llama_config.drafter],
                           draft_max=llama_config.draft_max,
                           ctx_checkpoints=llama_config.ctx_checkpoints, seed=llama_config.seed)
    sim = Session(sim_config, MemoryJournal(), backend=SimBackend(sim_config, profile)).run()
    sim_turns = [t.reprefill_tokens for t in sim]
    return {"session": done.session.session_id, "drafter": llama_config.drafter,
            "turns": llama_config.turns, "llama_reprefill": llama_turns,
            "sim_reprefill": sim_turns, "exact": llama_turns == sim_turns}
