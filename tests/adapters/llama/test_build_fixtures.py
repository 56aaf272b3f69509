"""Every build of the matrix, read by one reader: the fixtures that
tools/capture_llama_fixtures.py captured from each build's own llama-server
(tests/adapters/llama/fixtures/builds/<VERSION>/) read with no unknown line, their server
facts come out of every build's wording, and each task's engine totals (print_timing's
`draft acceptance`, each drafter's `statistics`, the timings) reconcile with the rounds
the log shows, except for the surplus PR 26320's bug adds where the build's source has it
(one accepted draft per checkpoint restore followed by a replay)."""

import functools
import gzip
import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.llama.builds.matrix import Exposure, facts, match_banner
from adapters.llama.ledger.provenance import Provenance, provides
from adapters.llama.ledger.record import LedgerResult, record_log
from adapters.llama.ledger.responses import parse_responses, read_responses
from adapters.llama.ledger.rounds import accepted_drafts
from adapters.llama.ledger.tasks import LlamaTask
from adapters.llama.log.reader import LogReading
from adapters.llama.log.records import StopReason, TimingPhase
from adapters.llama.log.sources import read_log
from adapters.llama.server.options import our_drafter
from engine.config import RunConfig
from engine.session import MemoryJournal
from eventlog import open_db
from eventlog.postmortem import Kind, analyze
from eventlog.postmortem.analyze import postmortem_session
from fsm.event import Event
from fsm.states import Trigger
from specledger.cli.main import main
from specledger.runs.llama_session import store_llama_session

BUILDS = Path(__file__).parent / "fixtures" / "builds"
CASES = sorted(p for p in BUILDS.glob("*/*.log.gz"))
# 0.3.21 counts a round's drafts and accepted drafts at its last verification only
# (server-context.cpp:3024-3025): after a restore, the replay's batch (its accepted drafts
# and the correction) is what it counts as drafted.
LAST_VERIFICATION_DRAFTED = {"0.3.21"}
# 0.3.21 adds a verified block to the task's decoded count before emitting it
# (server-context.cpp:3020, `n_decoded += ids.size()`), so a limit reached inside the
# block stops the answer with the rest of the block counted (and in the slot), unsent.
BLOCK_DECODED = {"0.3.21"}


def case_id(path: Path) -> str:
    """`0.3.36/ngram-mod`."""
    return f"{path.parent.name}/{path.name.removesuffix('.log.gz')}"


@dataclass(frozen=True)
class Imported:
    """One fixture read and imported as a recorded run stores it."""

    version: str
    name: str
    capture: dict[str, Any]
    reading: LogReading
    result: LedgerResult
    events: list[Event]


@functools.cache
def imported(path: Path) -> Imported:
    """The fixture at `path`, read and imported with its answers and prompt ids."""
    base = str(path).removesuffix(".log.gz")
    reading = read_log(path)
    responses = parse_responses(Path(base + ".responses.json").read_text())
    prompts = json.loads(Path(base + ".prompts.json").read_text())
    journal = MemoryJournal()
    result = record_log(reading, journal, prompts=prompts, responses=responses.facts)
    name = path.name.removesuffix(".log.gz")
    capture = json.loads((path.parent / "capture.json").read_text())["rows"][name]
    return Imported(path.parent.name, name, capture, reading, result, list(journal.events))


def inflated(version: str) -> bool:
    """Whether the build's source has PR 26320's bug (builds.json, read from the sdists)."""
    build = facts(version)
    return build is not None and build.exposures.get("PR 26320") is Exposure.BUG


def replays(task: LlamaTask) -> int:
    """The task's checkpoint restores that a replay followed."""
    return sum(min(len(r.restores), len(r.replays)) for r in task.rounds)


def test_every_build_of_the_matrix_that_is_captured_has_fixtures() -> None:
    assert CASES, f"no fixture under {BUILDS}"
    for folder in BUILDS.iterdir():
        assert facts(folder.name) is not None, folder
        assert (folder / "README.md").is_file()


@pytest.mark.parametrize("path", CASES, ids=case_id)
def test_every_line_is_known(path: Path) -> None:
    reading = imported(path).reading
    assert reading.unknown == 0, reading.unknown_examples
    assert reading.parsed > 0 and reading.partial_line is None


@pytest.mark.parametrize("path", CASES, ids=case_id)
def test_the_server_facts_of_every_build(path: Path) -> None:
    case = imported(path)
    server = case.reading.server
    assert server.n_slots == 1 and server.model is not None
    asked = [] if case.capture["drafter"] == "none" else case.capture["drafter"].split(",")
    if case.capture["verbose"]:
        banner = match_banner(server.build)
        assert banner is not None and banner.version == case.version, server.build
    build = facts(case.version)
    assert build is not None
    if case.capture["verbose"]:
        assert server.loaded and server.verbose is not False  # not logged before 0.3.24
        assert [our_drafter(t) for t in server.implementations] == (
            [] if not build.spec_checkpoints else asked)
    # Without speculative checkpoints a hybrid target cannot roll a draft back: the server
    # says it refuses speculation on this model, whether a drafter was asked or not.
    assert server.spec_refused is not build.spec_checkpoints
    if server.spec_refused:  # 0.3.20 on a hybrid target: nothing is ever drafted
        assert not any(r.speculative for t in case.result.fold.tasks
                                 for r in t.rounds)
    elif asked and case.capture["verbose"]:
        assert any(r.speculative for t in case.result.fold.tasks for r in t.rounds)
    if "mtp" in asked:  # per-sequence recurrent states, one per draft position
        assert server.n_rs_seq == case.capture["draft_max"]
    if asked and "mtp" not in asked and case.capture["verbose"]:  # FULL memory
        assert server.spec_checkpoints is (build.spec_checkpoints and not server.spec_refused)


# The target's forward graph as each build reserves it (sched_reserve's nodes line): a
# drafter's context reserves a smaller graph, before the target's in 0.3.24 and 0.3.30.
TARGET_GRAPH_NODES = {("0.3.20", "plain"): 474, ("0.3.24", "mtp"): 629,
                      ("0.3.30", "draft-model"): 473, ("0.3.30", "mtp"): 545,
                      ("0.3.36", "mtp"): 557, ("0.3.36", "plain"): 485}


@pytest.mark.parametrize(("version", "name"), sorted(TARGET_GRAPH_NODES))
def test_the_target_graphs_nodes_of_every_build(version: str, name: str) -> None:
    server = imported(BUILDS / version / f"{name}.log.gz").reading.server
    assert server.graph_nodes == TARGET_GRAPH_NODES[version, name]
    # 8 layers, every 4th full attention; 0.3.24's n_layer also counts the MTP layer. The
    # target's shape, not the 3-layer draft model's whose file 0.3.30 loads first.
    assert server.recurrent_layers == 6 and server.n_embd == 128


@pytest.mark.parametrize("path", CASES, ids=case_id)
def test_engine_totals_reconcile_with_the_rounds(path: Path) -> None:
    case = imported(path)
    verbose = bool(case.capture["verbose"])
    for task in case.result.fold.tasks:
        spec = [r for r in task.rounds if r.speculative]
        accepted = sum(accepted_drafts(r) for r in spec)
        drafted = sum(r.drafted for r in spec)
        surplus = replays(task) if inflated(case.version) else 0
        if case.version in LAST_VERIFICATION_DRAFTED:
            drafted = sum(r.replays[-1] if r.restores and r.replays else r.drafted
                          for r in spec)
        if task.totals is not None and verbose:
            assert (task.totals.accepted, task.totals.generated) == (
                accepted + surplus, drafted), task.task
        evals = task.timings[TimingPhase.EVAL]
        prompt = task.timings[TimingPhase.PROMPT]
        if verbose:
            last = task.rounds[-1]
            unsent = (last.kept.ids - len(last.tokens) if case.version in BLOCK_DECODED
                      and last.kept is not None and last.stop is StopReason.LIMIT else 0)
            assert evals.tokens == task.generated + unsent
            assert task.n_past is not None and task.prompt_tokens is not None
            assert prompt.tokens == task.prompt_tokens - task.n_past
    # Each drafter's statistics are cumulative: a task adds its own rounds' drafts, and
    # what the server passed to accept, the replayed correction of every restore included.
    if not verbose:
        return
    before: dict[str, tuple[int, int]] = {}
    for task in case.result.fold.tasks:
        spec = [r for r in task.rounds if r.speculative]
        for name, stats in task.spec_stats.items():
            mine = [r for r in spec if r.spec_type in (name, None)]
            gen0, acc0 = before.get(name, (0, 0))
            made = sum(r.spec_gen if r.spec_gen is not None else r.drafted for r in mine)
            assert stats.gen_tokens - gen0 == made, (task.task, name)
            assert stats.acc_tokens - acc0 == sum(accepted_drafts(r) + min(
                len(r.restores), len(r.replays)) for r in mine), (task.task, name)
            before[name] = (stats.gen_tokens, stats.acc_tokens)


@pytest.mark.parametrize("path", CASES, ids=case_id)
def test_the_ledger_checks_find_only_the_inflation(path: Path) -> None:
    """Every engine counter agrees with the imported rounds, but where PR 26320's bug
    inflates them: there each turn's print_timing `accepted` exceeds the rounds' by the
    turn's replays, which the ledger records for the postmortem to name."""
    case = imported(path)
    bad = [e for e in case.events if e.trigger is Trigger.INVARIANT_VIOLATION
           and "source" in e.payload["details"]]  # a counter of the engine's own
    if not inflated(case.version) or not any(replays(t) for t in case.result.fold.tasks):
        assert not bad, [e.payload["message"] for e in bad]
        return
    assert bad, "the inflated counters were not caught"
    by_turn: dict[tuple[int, int], list[Event]] = {}
    for e in bad:
        by_turn.setdefault((e.slot, e.turn), []).append(e)
    replay_events = Counter((e.slot, e.turn) for e in case.events
                            if e.trigger is Trigger.REPLAY)
    # Each turn with a replay is caught, and no other.
    assert set(by_turn) == set(replay_events), (sorted(by_turn), sorted(replay_events))
    for (slot, turn), found in by_turn.items():
        checks = {e.payload["details"]["check"]: e.payload["details"] for e in found}
        core = checks["accepted tokens"]
        assert core["source"] == "print_timing"
        assert core["engine"] - core["ledger"] == replay_events[slot, turn] > 0
        assert set(checks) <= {"accepted tokens", "drafted tokens", "mean accepted length",
                               "round verdict", "draft_n_accepted", "draft_n"}


def _findings(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    """A postmortem's findings as compared across stores: all but what the source
    provides (a recorded run knows its prompt ids, an import does not)."""
    out = []
    for f in doc["findings"]:
        numbers = {k: v for k, v in f["numbers"].items() if k != "provides"}
        out.append((f["kind"], f["severity"], f["slot"], f["turn"], f["round"], numbers))
    return out


def _cli_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    main(argv)
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


@pytest.mark.parametrize("path", [p for p in CASES if p.parent.name in ("0.3.36", "0.3.21",
                                                                       "0.3.24", "0.3.20")
                                  and p.name.startswith(("ngram-mod", "draft-"))],
                         ids=case_id)
def test_an_imported_log_has_the_findings_of_the_recorded_run(
        path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`specledger import llama-server LOG` and `postmortem` of a captured log name what
    the run that captured it, recorded as `run --backend llama` stores it (its prompt ids
    and configuration), names."""
    case = imported(path)
    base = str(path).removesuffix(".log.gz")
    db = str(tmp_path / "s.db")
    config = RunConfig(backend="llama", drafter=case.capture["drafter"], turns=2,
                       max_answer_tokens=case.capture["max_tokens"],
                       draft_max=case.capture["draft_max"], seed=0, llama_build=case.version)
    prov = Provenance(log_path=str(path), responses_path=base + ".responses.json",
                      prompt_ids=True, run=config.to_dict())
    run = store_llama_session(db, read_log(path), prov,
                              responses=read_responses(Path(base + ".responses.json")),
                              prompts=json.loads(Path(base + ".prompts.json").read_text()))
    assert run.config["spec_refused"] is case.reading.server.spec_refused
    recorded = postmortem_session(open_db(db, create=False), run.session_id).to_dict()
    [doc] = _cli_json(["import", "llama-server", str(path), "--responses",
                       base + ".responses.json", "--db", db, "--json"], capsys)["sessions"]
    assert doc["lines"]["unknown"] == 0
    post = _cli_json(["postmortem", str(doc["session"]), "--db", db, "--json"], capsys)
    assert _findings(post) == _findings(recorded)


@pytest.mark.parametrize("path", [p for p in CASES if p.name.startswith("draft-")],
                         ids=case_id)
def test_draft_model_checkpoints_discarded_where_the_build_has_pr_22521s_bug(
        path: Path) -> None:
    """0.3.21's draft model, when hybrid (the target as its own draft: `draft-self`),
    deletes its checkpoint at each request and recomputes the conversation it could have
    reused (its `no checkpoint available, no reuse` lines): the postmortem names it with
    those tokens; builds with the fix log no such line and are not named, nor is a build
    whose draft model keeps no checkpoint."""
    case = imported(path)
    build = facts(case.version)
    assert build is not None
    text = gzip.decompress(path.read_bytes()).decode(errors="replace")
    lost = [int(n) for n in re.findall(r"no checkpoint available, no reuse, "
                                       r"\(reuse_i=\d+, reuse_n=(\d+)\)", text)]
    config = {"provides": provides(case.reading, True), "drafter": "draft-model",
              "engine": "llama.cpp", "replay_policy": "reverify"}
    found = {f.kind: f for f in analyze(case.events, config)[0]}
    if build.exposures["PR 22521"] is Exposure.BUG and case.name == "draft-self":
        assert lost, "the bug's lines are missing from a -v log of this build"
        named = found[Kind.DRAFT_CHECKPOINT_DISCARD]
        # Each lost reuse is charged: at a request's start (the finding), or mid-request
        # (the draft model's first checkpoint is taken at its second draft).
        assert named.numbers["recomputed_tokens"] > 0
        assert named.numbers["recomputed_tokens"] + named.numbers[
            "recomputed_mid_request"] == sum(lost)
        assert named.turn == 2
    else:
        assert not lost and Kind.DRAFT_CHECKPOINT_DISCARD not in found


@pytest.mark.parametrize("path", [p for p in CASES if p.name.startswith("ngram-mod")],
                         ids=case_id)
def test_tokens_behind_a_length_stop_are_not_named_an_eog(path: Path) -> None:
    """A limit that falls inside a verified block: 0.3.21 counts and keeps the whole block
    while it sends the answer's head, so tokens stay in the slot behind the stop. The
    postmortem names that `stop_stray_tokens`, never #28049's `eog_stray_tokens` (no EOG
    was there); later builds stop inside the block and leave nothing behind."""
    case = imported(path)
    config = {"provides": provides(case.reading, True), "drafter": "ngram-mod",
              "engine": "llama.cpp", "replay_policy": "reverify"}
    found = {f.kind: f for f in analyze(case.events, config)[0]}
    limit_in_block = [t for t in case.result.fold.tasks
                      if t.stop is StopReason.LIMIT and t.rounds and t.rounds[-1].kept
                      and t.rounds[-1].kept.ids > len(t.rounds[-1].tokens)]
    assert Kind.EOG_STRAY_TOKENS not in found
    if case.version in BLOCK_DECODED and limit_in_block:
        named = found[Kind.STOP_STRAY_TOKENS]
        assert named.numbers["stop"] == "limit" and named.numbers["stray_tokens"] > 0
    else:
        assert Kind.STOP_STRAY_TOKENS not in found


@pytest.mark.parametrize("path", [p for p in CASES if p.name.startswith("plain")], ids=case_id)
def test_a_matching_history_restored_from_a_checkpoint_is_measured(path: Path) -> None:
    """#24055 as 0.3.24 shows it: the client sends the history back as the server wrote it,
    yet the server restores the checkpoint at the end of the previous prompt and prefills
    the answer again. Builds without the LCP line (before 0.3.36) give the kept prefix by
    their checkpoint check's threshold (`against T`: the prefix less n_swa + 1), so the
    re-prefill is counted, not unknown; builds with PR 24411's guard restore nothing, and
    builds before PR 22929 keep no checkpoint to restore."""
    case = imported(path)
    config = {"provides": provides(case.reading, True), "drafter": "none",
              "engine": "llama.cpp"}
    found = {f.kind: f for f in analyze(case.events, config)[0]}
    build = facts(case.version)
    assert build is not None and case.reading.server.n_swa == 0
    starts = [e.payload for e in case.events if e.trigger is Trigger.START_TURN]
    if build.exposures["#24055"] is Exposure.BUG:
        named = found[Kind.HISTORY_REPREFILL]
        second = starts[1]
        assert second["kept"] is not None
        restored = next(e.payload for e in case.events if e.trigger is Trigger.CTX_RESTORE)
        assert named.numbers["reprefill_tokens"] == second["kept"] - restored["position"] > 0
    else:
        assert Kind.HISTORY_REPREFILL not in found
