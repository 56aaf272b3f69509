"""A profile's plain decoding time of a turn is what the sim charges a plain session of
that turn (to rounding: the session sums differences of its clock)."""

import pytest

from engine.config import RunConfig
from engine.session import MemoryJournal, Session
from engine.sim.backend import SimBackend
from engine.sim.costs import get_profile


@pytest.mark.parametrize("name", ["rtx3090-qwen3.5-27b-q4-llama", "tiny-cpu"])
def test_plain_decode_is_a_plain_sessions_decode_time(name: str) -> None:
    profile = get_profile(name)
    config = RunConfig(backend="sim", drafter="none", strategy="none", turns=2, audit=False,
                       profile=name, max_answer_tokens=64)
    turns = Session(config, MemoryJournal(), backend=SimBackend(config, profile)).run()
    for t in turns:
        assert profile.plain_decode_s(t.prompt_tokens, t.generated_tokens - 1) == pytest.approx(
            t.decode_s, rel=1e-12)
