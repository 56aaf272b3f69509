"""The sim's round events carry llama.cpp's checkpoint terms: a checkpoint taken or
restored on the host path names its blocking tensor copies, and its duration is the cost
model's (docs/design.md#llama-checkpoints)."""

from dataclasses import replace

import pytest

from engine.config import BackendKind, RunConfig, Strategy
from engine.session import MemoryJournal, Session
from engine.sim.backend import SimBackend
from engine.sim.costs import get_profile
from fsm.event import Event
from fsm.states import Trigger

CONFIG = RunConfig(backend=BackendKind.SIM, turns=1, prompt_tokens=64, answer_tokens=40,
                   seed=3, strategy=Strategy.CHECKPOINT, drafter="synthetic")


def _events(profile: str) -> list[Event]:
    journal = MemoryJournal()
    Session(CONFIG.replace(profile=profile), journal).run()
    return journal.events


@pytest.mark.parametrize("name", ["rtx3090-qwen3.5-27b-q4-llama",
                                  "strix-halo-qwen3-next-80b-q4-llama"])
def test_host_checkpoints_name_their_tensor_copies(name: str) -> None:
    p = get_profile(name)
    evs = _events(name)
    saves = [e for e in evs if e.trigger is Trigger.BEGIN and e.payload["bytes"]]
    restores = [e for e in evs if e.trigger is Trigger.RESTORE]
    assert saves and restores
    for e in saves + restores:
        assert e.payload["tensors"] == p.state_tensors > 0
        assert e.duration == pytest.approx(p.checkpoint_s(), rel=1e-12)
    assert p.checkpoint_s() > p.state_tensors * p.tensor_copy_s > 0


def test_device_checkpoints_and_other_profiles_count_none() -> None:
    for e in _events("tiny-cpu"):
        assert "tensors" not in e.payload
    on_device = replace(get_profile("rtx3090-qwen3.5-27b-q4-llama"), checkpoint_place="device")
    assert SimBackend(CONFIG, on_device).capabilities.checkpoint_tensors == 0
