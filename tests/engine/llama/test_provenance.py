"""What an imported session's configuration says about the server, from captured logs: the
drafter is the one the log names, and unknown (None) wherever the log stops before it
would have named one, never 'none' by default."""

import pytest

from engine.llama.logread import parse_log
from engine.llama.provenance import drafter_name
from tests.engine.llama.test_logread import fixture_text


def _cut_before(text: str, marker: str) -> str:
    """`text` up to the line holding `marker` (excluded)."""
    return text[:text.rindex("\n", 0, text.index(marker)) + 1]


@pytest.mark.parametrize("name,drafter", [("mtp", "mtp"), ("ngram-mod", "ngram-mod"),
                                          ("draft-simple", "draft-model"), ("quiet", "mtp")])
def test_the_drafter_is_the_one_the_log_names(name: str, drafter: str) -> None:
    assert drafter_name(parse_log(fixture_text(name))) == drafter


@pytest.mark.parametrize("name,marker", [
    ("mtp", "creating MTP draft context"),
    ("draft-simple", "loading draft model"),
    ("ngram-mod", "adding speculative implementation"),
    ("quiet", "creating MTP draft context"),
])
def test_a_log_cut_before_the_speculative_setup_names_no_drafter(name: str,
                                                                 marker: str) -> None:
    cut = _cut_before(fixture_text(name), marker)
    reading = parse_log(cut)
    assert reading.server.verbosity is not None  # the server had started: a real head
    assert drafter_name(reading) is None

