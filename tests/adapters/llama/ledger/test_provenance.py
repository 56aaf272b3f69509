"""What an imported session's configuration says about the server, from captured logs: the
drafter is the one the log names, and unknown (None) wherever the log stops before it
would have named one, never 'none' by default."""

import pytest

from adapters.llama.ledger.provenance import drafter_name, provides
from adapters.llama.log.reader import parse_log
from tests.adapters.llama.log.test_reader import fixture_text


def _cut_before(text: str, marker: str) -> str:
    """`text` up to the line holding `marker` (excluded)."""
    return text[:text.rindex("\n", 0, text.index(marker)) + 1]


@pytest.mark.parametrize("name,drafter", [
    ("mtp", "mtp"), ("ngram-mod", "ngram-mod"), ("draft-simple", "draft-model"),
    # Asked for as ngram-mod,mtp: the setup names the chain in llama.cpp's order.
    ("chain-sampled", "ngram-mod,mtp"), ("plain", "none"), ("quiet-lv4", "mtp"),
])
def test_the_drafter_is_the_one_the_log_names(name: str, drafter: str) -> None:
    assert drafter_name(parse_log(fixture_text(name))) == drafter


def test_a_log_below_trace_level_names_part_of_a_chain_at_most() -> None:
    # Without -v only the MTP context shows: an n-gram drafter chained before it would not.
    quiet = parse_log(fixture_text("quiet"))
    assert quiet.server.spec_types == ["draft-mtp"] and drafter_name(quiet) is None


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


def test_the_tail_of_a_log_without_a_drafter_does_not_say_none() -> None:
    # A rotated log: the file begins after the server's start and its setup.
    text = fixture_text("plain")
    tail = text[text.rindex("\n", 0, text.index("selected slot by")) + 1:]
    assert drafter_name(parse_log(text)) == "none"
    assert drafter_name(parse_log(tail)) is None


@pytest.mark.parametrize("name,rounds,drafts,prompt_phase", [
    ("mtp", True, "logged", True), ("quiet", False, False, False),
    ("quiet-lv4", False, False, True)])
def test_what_a_log_provides_depends_on_its_verbosity(name: str, rounds: bool, drafts: object,
                                                      prompt_phase: bool) -> None:
    """Only a -v log shows the rounds (and what they hold); -lv 4 shows the prompt phase
    (the context checkpoints) without them, no -v neither."""
    got = provides(parse_log(fixture_text(name)), prompt_ids=False)
    assert (got["rounds"], got["answer_ids"]) == (rounds, rounds)
    assert got["context_checkpoints"] is prompt_phase
    assert got["draft_ids"] == drafts and got["prompt_ids"] is False
