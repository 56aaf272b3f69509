"""The postmortem of imported llama-server sessions: the findings their logs support, on
real logs (an edited history re-prefilled) and on real logs with one thing changed (more
restores in a round, a log cut mid-storm, context checkpoints too small for the draft
model's state), and the note on what a log cannot tell."""

import gzip
import re

from adapters.llama.ledger.fold import fold_tasks
from adapters.llama.ledger.provenance import Provenance, session_config
from adapters.llama.ledger.record import record_log
from adapters.llama.log.reader import LogReading, parse_log, parse_text
from engine.session import MemoryJournal
from eventlog.postmortem import Finding, Kind, Severity, analyze
from eventlog.postmortem.advice import ADVICE, CAUSE_ADVICE, Cause
from fsm.event import Event
from tests.adapters.llama.log.test_reader import FIXTURES, fixture_text, with_number


def imported_text(text: str) -> tuple[list[Finding], list[Event]]:
    """A log's text imported: the postmortem's findings (with the config an import
    stores) and the events."""
    return imported(parse_log(text))


def imported(reading: LogReading) -> tuple[list[Finding], list[Event]]:
    """One server run imported: its findings (with the config an import stores) and its
    events."""
    journal = MemoryJournal()
    result = record_log(reading, journal)
    config = session_config(reading, result.fold, Provenance(), None, 0)
    return analyze(journal.events, config)[0], list(journal.events)


def findings(text: str) -> dict[Kind, Finding]:
    """The postmortem of a log's text, by kind."""
    return {f.kind: f for f in imported_text(text)[0]}


def test_real_logs_have_no_warning_and_say_what_was_not_checked() -> None:
    for name in ("mtp", "ngram-mod", "draft-simple", "two-slots", "chain-sampled", "plain"):
        found = findings(fixture_text(name))
        # Each drafter's own statistics lines are a note; a plain run prints none.
        notes = {Kind.CHECK_SKIPPED} | ({Kind.DRAFTER_STATS} if name != "plain" else set())
        assert set(found) == notes, (name, found)
        assert found[Kind.CHECK_SKIPPED].numbers["skipped"] == ["state_truth"]
    quiet = findings(fixture_text("quiet"))[Kind.CHECK_SKIPPED]
    assert quiet.severity is Severity.INFO
    assert set(quiet.numbers["skipped"]) == {"state_truth", "rounds", "history_reprefill"}


def test_an_edited_history_is_re_prefilled() -> None:
    text = fixture_text("edited-history")
    found = findings(text)[Kind.HISTORY_REPREFILL]
    m = re.search(r"checking sim = [\d.]+ \((\d+)/\d+\)", text)
    r = re.search(r"restored context checkpoint \(.*n_past = (\d+)", text)
    assert m is not None and r is not None
    # Back to the checkpoint before the answer: the answer's kept head is prefilled again.
    assert found.numbers["reprefill_tokens"] == int(m.group(1)) - int(r.group(1)) > 0
    assert found.turn == 2 and found.severity is Severity.WARNING


def _repeat_first_restore(text: str, times: int) -> tuple[str, int]:
    """The log with its first speculative-checkpoint restore and the replay verify after
    it repeated `times` more times (a replay that kept disagreeing), and where they end."""
    start = text.index("restoring speculative checkpoint")
    start = text.rindex("\n", 0, start) + 1
    end = text.index("\n", text.index("generate_draft", start)) + 1
    block = text[start:end]
    return text[:end] + block * times + text[end:], end + len(block) * times


def test_repeated_restores_at_one_position_are_a_storm() -> None:
    stormy, _ = _repeat_first_restore(fixture_text("ngram-mod"), 3)
    found = findings(stormy)
    storm = found[Kind.RESTORE_STORM]
    assert storm.numbers["worst_restores"] == 4 and storm.numbers["rounds"] == 1
    assert "restore -> replay -> restore -> replay" in storm.numbers["cycle"]


def test_a_log_ending_inside_a_storm_is_a_livelock() -> None:
    stormy, cut = _repeat_first_restore(fixture_text("ngram-mod"), 3)
    found = findings(stormy[:cut])
    lock = found[Kind.REPLAY_LIVELOCK]
    assert lock.severity is Severity.ERROR and lock.numbers["worst_restores"] == 4
    # The log ends there: a request the piece cuts, a note, not the run's error.
    partial = found[Kind.PARTIAL_REQUEST]
    assert partial.severity is Severity.INFO and Kind.RUN_FAILED not in found


def test_context_checkpoints_without_the_draft_state() -> None:
    text = fixture_text("draft-simple")
    spec = re.search(r"created speculative checkpoint \(.*size = ([\d.]+) MiB, "
                     r"draft = ([\d.]+) MiB\)", text)
    assert spec is not None and float(spec.group(2)) > 0
    assert Kind.DRAFT_CHECKPOINT_DISCARD not in findings(text)
    target_only = f"{float(spec.group(1)) - float(spec.group(2)):.3f}"
    shrunk = re.sub(r"(created context checkpoint .*size = )[\d.]+( MiB\))",
                    rf"\g<1>{target_only}\g<2>", text)
    found = findings(shrunk)[Kind.DRAFT_CHECKPOINT_DISCARD]
    assert found.numbers["short_checkpoints"] == found.numbers["checkpoints"] > 0
    # Short by less than half the draft share: the log's rounding, not a missing state.
    almost = f"{float(spec.group(1)) - float(spec.group(2)) / 4:.3f}"
    rounded = re.sub(r"(created context checkpoint .*size = )[\d.]+( MiB\))",
                     rf"\g<1>{almost}\g<2>", text)
    assert rounded != text and Kind.DRAFT_CHECKPOINT_DISCARD not in findings(rounded)


def test_an_eog_inside_the_block_leaves_nothing_behind_it() -> None:
    text = fixture_text("eog-in-block")
    reading = parse_log(text)
    journal = MemoryJournal()
    result = record_log(reading, journal)
    assert result.violations == 0
    tasks = fold_tasks(reading.records).tasks
    inside = [t.rounds[-1] for t in tasks if t.rounds[-1].kept is not None
              and len(t.rounds[-1].tokens) < t.rounds[-1].kept.ids]
    assert inside  # the EOG was a verified draft, not the last kept token
    assert all(m.stray_tokens == 0 for m in result.turns)
    assert set(findings(text)) == {Kind.CHECK_SKIPPED, Kind.DRAFTER_STATS}  # nothing wrong


def test_a_token_kept_behind_eog_is_a_stray_token() -> None:
    text = fixture_text("eog-in-block")
    last = fold_tasks(parse_log(text).records).tasks[-1]
    kept, released = last.rounds[-1].kept, last.released
    assert kept is not None and released is not None
    lines = text.split("\n")
    # As llama.cpp #28049 logs it: one more accepted token behind the EOG in the slot.
    lines[kept.line - 1] = lines[kept.line - 1].replace(f"ids.size={kept.ids}",
                                                          f"ids.size={kept.ids + 1}")
    lines[released.line - 1] = lines[released.line - 1].replace(
        f"n_tokens = {released.n_tokens}", f"n_tokens = {released.n_tokens + 1}")
    found = findings("\n".join(lines))
    stray = found[Kind.EOG_STRAY_TOKENS]
    assert stray.severity is Severity.ERROR and stray.numbers["stray_tokens"] == 1
    assert stray.numbers["per_turn"][0]["stray_tokens"] == [None]  # ngram drafts: no ids
    # The slot's length agrees with the changed log; only the engine's unchanged draft
    # totals (one accepted draft fewer) disagree, as they should.
    checked = found[Kind.ENGINE_COUNTER_MISMATCH].numbers["first"]
    assert {v.get("source") for v in checked} == {"print_timing"}
    assert Kind.INVARIANT_VIOLATION not in found


def test_each_finding_of_a_log_carries_the_advice_that_fits_it() -> None:
    text = fixture_text("ngram-mod")
    counted, _ = with_number(text, r"draft acceptance = [\d.]+ \(\s*(\d+) accepted", 1)
    counters = findings(counted)
    mismatch = counters[Kind.ENGINE_COUNTER_MISMATCH]
    assert mismatch.fix == ADVICE[Kind.ENGINE_COUNTER_MISMATCH]
    assert "KV length" not in mismatch.fix and "print_timing" in mismatch.fix
    assert Kind.INVARIANT_VIOLATION not in counters
    stormy, cut = _repeat_first_restore(text, 3)
    storm, lock = findings(stormy)[Kind.RESTORE_STORM], findings(stormy[:cut])
    assert storm.fix == ADVICE[Kind.RESTORE_STORM]
    assert lock[Kind.REPLAY_LIVELOCK].fix == ADVICE[Kind.REPLAY_LIVELOCK] != storm.fix
    # A log cut mid-request: the advice is about the log, not an error to fix.
    assert lock[Kind.PARTIAL_REQUEST].fix == ADVICE[Kind.PARTIAL_REQUEST]
    edited = findings(fixture_text("edited-history"))[Kind.HISTORY_REPREFILL]
    assert "exactly as the server produced it" in edited.fix


def test_a_re_prefill_on_a_build_known_for_it_names_the_bug() -> None:
    """0.3.24 restores the checkpoint at the prompt's end although the cache matches the
    whole history (#24055): the finding names the build's bug, not the client's history."""
    found = {f.kind: f for f in imported_text(
        gzip.decompress((FIXTURES / "builds" / "0.3.24" / "plain.log.gz").read_bytes())
        .decode(errors="surrogateescape"))[0]}
    named = found[Kind.HISTORY_REPREFILL]
    assert "#24055" in named.explanation and named.fix == CAUSE_ADVICE[Cause.KNOWN_BUILD_BUG]
    assert named.numbers["whole_history_matched"] == 1
    # The same log from a build no one knows (its commit changed wherever it is named):
    # the rollback is still the server's, said as such.
    anon = {f.kind: f for f in imported_text(gzip.decompress(
        (FIXTURES / "builds" / "0.3.24" / "plain.log.gz").read_bytes()).decode(
            errors="surrogateescape").replace("af6528e", "0000000"))[0]}
    assert anon[Kind.HISTORY_REPREFILL].fix == CAUSE_ADVICE[Cause.SERVER_ROLLBACK]


def test_a_server_that_dies_mid_request_is_a_crash_naming_its_task() -> None:
    text = fixture_text("ngram-mod")
    at = text.index("\n", text.rindex("restoring speculative checkpoint")) + 1
    died = (text[:at] + "/src/llama-context.cpp:1024: GGML_ASSERT(n_tokens > 0) failed\n"
            "Aborted (core dumped)\n")
    log = parse_text(died + text)  # the server comes back in the same file
    assert len(log.runs) == 2
    found = {f.kind: f for f in imported(log.runs[0])[0]}
    crash = found[Kind.SERVER_CRASH]
    assert crash.severity is Severity.ERROR and "GGML_ASSERT(n_tokens > 0)" in crash.explanation
    task = re.findall(r"\| task (\d+) \|", text[:at])[-1]  # the request it was serving
    [serving] = crash.numbers["open_requests"]
    assert f"died inside task {task} " in serving and crash.turn is not None
    assert Kind.PARTIAL_REQUEST not in found  # the crash says it, not a cut piece
