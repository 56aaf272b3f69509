"""The calibration's check by prediction: recorded torch conversations, their drafting
rounds read back from the events, and the sim's replay of each under the fitted profile,
compared by decode time per committed token (drafting excluded)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.backend import Backend, SeqState
from engine.config import RunConfig
from engine.drafters.base import BaseDrafter
from engine.drafters.synthetic import ordinary_tokens
from engine.errors import BackendError
from engine.session import MemoryJournal, Session
from engine.sim.backend import SimBackend
from engine.sim.costs import CostProfile
from engine.sim.vocab import SIM_TEMPLATE
from eventlog import open_db, scan_events
from eventlog.fold import fold_log
from fsm.event import Event
from specledger.api import run_session

if TYPE_CHECKING:
    from engine.hybrid.loader import LoadedCheckpoint

Script = list[tuple[int, int]]  # per drafting round: drafts proposed, drafts accepted


@dataclass(frozen=True)
class TorchRun:
    """One recorded torch conversation (one turn): its session, its turn's numbers, the
    seconds its drafter took and what each drafting round drafted and accepted."""

    session: int
    prompt_tokens: int
    generated: int
    rounds: int
    decode_s: float
    draft_s: float
    script: Script

    @property
    def s_per_token(self) -> float:
        """Decode seconds per committed token, drafting excluded (the sim's drafters are
        free)."""
        return (self.decode_s - self.draft_s) / self.generated


def round_script(events: Iterable[Event]) -> tuple[Script, float]:
    """What each drafting round of a recorded session drafted and accepted, in order, and
    the seconds spent drafting."""
    turns = fold_log(events).records.values()
    return ([r for t in turns for r in t.drafts],
            sum(t.phase_s.get("draft", 0.0) for t in turns))


def torch_run(config: RunConfig, checkpoint: LoadedCheckpoint, db: str) -> TorchRun:
    """Run and record `config` (one turn) on a torch backend over `checkpoint`."""
    from engine.hybrid.backend import TorchBackend

    result = run_session(config, db, backend=TorchBackend(config, checkpoint))
    engine = open_db(db, create=False)
    try:
        script, draft_s = round_script(scan_events(engine, result.session_id))
    finally:
        engine.dispose()
    t = result.turns[0]
    return TorchRun(result.session_id, t.prompt_tokens, t.generated_tokens, t.rounds,
                    t.decode_s, draft_s, script)


class ScriptedDrafter(BaseDrafter):
    """Drafts by a script: round i proposes `drafted` tokens, of which the first
    `accepted` are the target's own (read with `peek`) and the rest are not. On the sim
    it replays a recorded run's rounds, whatever the sim's tokens are."""

    name = "scripted"

    def __init__(self, script: Script) -> None:
        self._rounds = iter(script)

    def propose(self, backend: Backend, state: SeqState, tokens: Sequence[int], k: int
                ) -> list[int]:
        """The next round's drafts (none once the script is done)."""
        drafted, accepted = next(self._rounds, (0, 0))
        vocab = ordinary_tokens(backend.template)
        oracle = backend.capabilities.oracle
        if oracle is None:
            raise BackendError(f"a scripted replay needs a backend with an oracle, not "
                               f"{backend.name}")
        batch = [tokens[-1]]
        for i in range(min(drafted, k)):
            truth = oracle.peek(state, batch)[-1]
            batch.append(truth if i < accepted else (truth + 1) % vocab)
        return batch[1:]


def sim_replay(run: TorchRun, torch_config: RunConfig, profile: CostProfile
               ) -> dict[str, Any]:
    """The torch conversation `run` on the sim under `profile`: the same prompt length,
    answer length, draft lengths and accepted counts round by round."""
    cap = torch_config.answer_cap
    capped = run.generated >= cap  # the torch answer hit the cap rather than ending
    config = RunConfig(
        backend="sim", strategy=torch_config.strategy, draft_max=torch_config.draft_max,
        turns=1, audit=False, profile=profile.name, seed=torch_config.seed, drafter="none",
        prompt_tokens=max(1, run.prompt_tokens - len(SIM_TEMPLATE.next_prompt([], []))),
        # the sim's answer ends after answer_tokens + 1 visible tokens
        answer_tokens=cap + 1 if capped else max(1, run.generated - 1), max_answer_tokens=cap,
    )
    session = Session(config, MemoryJournal(), backend=SimBackend(config, profile))
    if torch_config.drafter != "none":
        session.services.work[0].drafter = ScriptedDrafter(run.script)
    t = session.run()[0]
    return {"prompt_tokens": t.prompt_tokens, "generated": t.generated_tokens,
            "rounds": t.rounds, "drafted": t.drafted, "accepted": t.accepted,
            "decode_s": t.decode_s, "s_per_token": t.decode_s / t.generated_tokens}


def validate(torch_config: RunConfig, runs: Sequence[TorchRun], profile: CostProfile
             ) -> dict[str, Any]:
    """The recorded torch runs of one conversation against the sim's replay of the first
    under `profile`: decode time per committed token, measured (median over the runs)
    and predicted."""
    first = runs[0]
    sim = sim_replay(first, torch_config, profile)
    per_token = [r.s_per_token for r in runs]
    measured = statistics.median(per_token)
    return {
        "drafter": torch_config.drafter, "strategy": torch_config.strategy.value,
        "draft_max": torch_config.draft_max, "sessions": [r.session for r in runs],
        "torch": {"prompt_tokens": first.prompt_tokens, "generated": first.generated,
                  "rounds": first.rounds,
                  "drafted": sum(d for d, _ in first.script),
                  "accepted": sum(a for _, a in first.script),
                  "same_rounds_every_run": all(r.script == first.script for r in runs),
                  "s_per_token": per_token, "decode_s": [r.decode_s for r in runs],
                  "draft_s": [r.draft_s for r in runs]},
        "sim": sim,
        "measured_s_per_token": measured,
        "predicted_s_per_token": sim["s_per_token"],
        "error": sim["s_per_token"] / measured - 1,
    }
