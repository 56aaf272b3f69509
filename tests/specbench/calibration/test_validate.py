"""The calibration's validation: the sim replays a recorded run round by round."""

import pytest

from engine.config import RunConfig
from engine.session import MemoryJournal, Session
from engine.sim.costs import get_profile
from fsm.states import Trigger
from specbench.calibration.validate import TorchRun, round_script, sim_replay


@pytest.mark.parametrize(("answer", "cap"), [(120, 128), (300, 128)])
def test_the_sim_replays_a_recorded_run_round_by_round(answer: int, cap: int) -> None:
    """A run's rounds (drafts and accepted counts) read back from its events and replayed
    on the sim: the same rounds, tokens and acceptance, whether the answer ended or hit
    the cap."""
    config = RunConfig(drafter="synthetic", acceptance=0.6, draft_max=8, turns=1,
                       prompt_tokens=200, answer_tokens=answer, max_answer_tokens=cap,
                       audit=False, profile="tiny-cpu")
    journal = MemoryJournal()
    t = Session(config, journal).run()[0]
    script, draft_s = round_script(journal.events)
    drafting = [e for e in journal.events if e.trigger is Trigger.DRAFT]
    assert len(script) == len(drafting) and sum(a for _, a in script) == t.accepted
    run = TorchRun(0, t.prompt_tokens, t.generated_tokens, t.rounds, t.decode_s, draft_s,
                   script)
    sim = sim_replay(run, config, get_profile("tiny-cpu"))
    assert (sim["prompt_tokens"], sim["generated"], sim["rounds"], sim["drafted"],
            sim["accepted"]) == (t.prompt_tokens, t.generated_tokens, t.rounds, t.drafted,
                                 t.accepted)
    # The same operations under the same profile: the same decode time.
    assert sim["decode_s"] == pytest.approx(t.decode_s, rel=1e-9)
