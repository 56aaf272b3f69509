"""ik_llama.cpp's own lines, as a build of it prints them (tests/adapters/llama/fixtures/ik/,
whole runs captured from ik_llama.cpp 4840 (8337e4cd3); its README says how): each kind the
reader learned, from the lines of those runs; then each whole run read and imported: every
line known, its build from its banner, each request a turn with the counts its own timing
lines (and its answers) give, MTP's drafted and accepted tokens as its totals, its end as
its lines show it, and the run that refused the draft model as a run that never served."""

import gzip
import re
from pathlib import Path

import pytest

from adapters.llama.ledger.fold import fold_tasks
from adapters.llama.ledger.record import record_log
from adapters.llama.ledger.responses import read_responses
from adapters.llama.log.reader import parse_text
from adapters.llama.log.records import RecordKind
from adapters.llama.log.run import LogReading, RunEnd
from adapters.llama.log.sources import read_file
from engine.session import MemoryJournal
from specledger.cli.main import main

FIXTURES = Path(__file__).parent.parent / "fixtures" / "ik"

BANNER = ('INFO [                    main] build info | tid="140211748546816" '
          'timestamp=1796665353 build=4840 commit="8337e4cd3"')


def read(*lines: str) -> LogReading:
    """The run of ik's banner followed by `lines`."""
    return parse_text("\n".join((BANNER, *lines)) + "\n", "ik").only()


def test_its_load_table_unused_tensors_and_prompt_cache_lines_are_known() -> None:
    lines = (
        # the memory it fits the model into as it loads
        "======================================= HAVE_FANCY_SIMD is defined",
        "Free memory 0 MiB on device 0 is less the 1024 MiB safety margin",
        "------------------- Layer sizes:",
        "Layer  0:      0.82,      0.02,      0.84        2.25  MiB",
        "Layer  9:      0.13,      0.00,      0.13 MiB (output layer)",
        "--------------------------------------------------------------------------",
        "Total   :      6.56,      3.11,      9.67 MiB",
        "Free memory 0 MiB on device 0 is less the required compute buffer size 2.25 MiB",
        "Memory required for model tensors + cache: 10 MiB",
        "Memory available on all devices - compute: 0 MiB",
        "model has unused tensor blk.8.nextn.eh_proj.weight (size = 131072 bytes) -- ignoring",
        "==================================loading DRAFT model"
        "==================================",
        # the second lines of two startup notes
        "use `--cache-ram 0` to disable the prompt cache",
        "use `--reasoning-tokens none` to disable.",
        # the prompt cache
        "prompt cache is enabled, size limit: 8192 MiB",
        "======== Prompt cache: cache size: 510, n_keep: 0, n_discarded_prompt: 0, "
        "cache_ram_n_min: 0, f_keep: 0.05, cache_ram_similarity: 0.50",
        "updating prompt cache",
        "prompt cache save took 0.35 ms",
        "prompt cache load took 0.38 ms",
    )
    r = read(*lines)
    assert r.unknown == 0, r.unknown_examples
    assert r.skipped == len(lines)


def test_a_warning_whose_message_ends_in_a_newline_leaves_its_fields_on_the_next_line() -> None:
    # `LOG_WARNING("%s\n", "ctx_shift is not supported …")`: ik prints the format as the
    # message and the text as a field with no name, after the newline.
    r = read("WARN [   launch_slot_with_task] %s",
             ' | ="ctx_shift is not supported by recurrent model, it will be disabled"')
    assert r.unknown == 0, r.unknown_examples
    assert r.skipped == 2


def test_the_text_where_a_prompt_parts_from_its_slot_goes_on_to_the_next_line_read() -> None:
    # Request 4 of the fixtures: seed 1's question on a slot holding seed 0's conversation.
    # The two excerpts' newlines continue them, up to the warning read into a record.
    excerpt = ("cache : rom importlib/_bootstrap_exter",
               "prompt: rom email/__init__.py:",
               "",
               '"""Par')
    r = read('INFO [   launch_slot_with_task] slot is processing task | tid="1" '
             "timestamp=1 id_slot=0 id_task=103",
             "======== Cache: cache_size = 728, n_past =  24, n_past_prompt = 24",
             *excerpt,
             "slot apply_checkp: id  0 | task 103 | n_past = 24, slot.prompt.tokens.size() "
             "= 728, seq_id = 0, pos_min = 727",
             '"""Par')
    assert r.skipped == len(excerpt)
    # Past the line read into a record, the excerpt is over: its text is unknown again.
    assert r.unknown == 1 and r.unknown_examples == ['9: """Par']


def test_with_v_a_task_names_its_prompts_size() -> None:
    r = read('INFO [   launch_slot_with_task] slot is processing task | tid="1" '
             "timestamp=1 id_slot=0 id_task=1",
             'VERB [    batch_pending_prompt] prompt tokenized | tid="1" timestamp=1 '
             "id_slot=0 id_task=1 n_ctx=4096 n_keep=0 n_prompt_tokens=419 "
             'prompt_tokens="<|im_start|>user\\nHere is code"')
    [task] = fold_tasks(r.records).tasks
    assert task.prompt_tokens == 419


def test_with_v_its_task_loop_ending_is_its_shutdown() -> None:
    listening = ('INFO [                    main] HTTP server listening | tid="1" '
                 'timestamp=1 n_threads_http="3" port="53553" hostname="127.0.0.1"')
    r = read(listening, 'VERB [              start_loop] ending start_loop | tid="1" '
                        "timestamp=2")
    assert r.ending is RunEnd.SHUTDOWN and r.server_log.counts == {"shutdown": 1}
    # Without -v it prints nothing as it stops: the log ends while it serves.
    assert read(listening).ending is RunEnd.LOG_ENDS


def test_its_slots_their_context_and_its_model_loaded_are_facts() -> None:
    r = read('INFO [                    init] initializing slots | tid="1" timestamp=1 '
             "n_slots=1",
             'INFO [                    init] new slot | tid="1" timestamp=1 id_slot=0 '
             "n_ctx_slot=4096",
             'INFO [                    main] model loaded | tid="1" timestamp=1')
    assert (r.server.n_slots, r.server.n_ctx_slot, r.server.loaded) == (1, 4096, True)
    assert r.parsed == 4  # the banner too


def test_the_checkpoint_an_answer_ends_with_is_no_step_of_its_prompt() -> None:
    # mtp-quiet's request 4 (task 74): its timings and the checkpoint it takes as its answer
    # ends (n_tokens = 510) come after request 5 (task 101) started on the same slot.
    reading = read_file(FIXTURES / "mtp-quiet.log.gz").only()
    task = next(t for t in fold_tasks(reading.records).tasks if t.task == 74)
    assert [r.n_tokens for r in task.prompt_phase if r.kind is RecordKind.CTX_CREATED] == [474]
    # Replayed as a prompt step, it came after the next task began: "'ctx_save' is not
    # allowed in state 'done'".
    assert len(record_log(reading, MemoryJournal()).turns) == 5


def test_each_turn_prefills_what_its_timing_line_counts() -> None:
    # Without -v no line names the prompt's size or shows a token: the prompt's last batch
    # (from the last `kv cache rm` on) is what print_timing counts beyond the ones before.
    reading = read_file(FIXTURES / "plain-quiet.log.gz").only()
    turns = record_log(reading, MemoryJournal()).turns
    assert [t.prefill_tokens for t in turns] == [419, 139, 77, 479, 77]


def test_its_answers_name_the_reused_prompt_in_usage_only() -> None:
    # ik's `timings` have no cache_n; `usage.prompt_tokens_details.cached_tokens` has it.
    answers = read_responses(FIXTURES / "plain.responses.json").facts
    assert [a.cache_n for a in answers] == [0, 450, 620, 0, 728]
    assert [a.prompt_tokens for a in answers] == [419, 589, 697, 479, 805]


def test_its_mtp_context_names_the_drafter() -> None:
    r = read("common_speculative_state_mtp: MTP context ready (n_ctx=4096, "
             "constant_draft_positions=false)")
    assert r.server.spec_types == ["draft-mtp"]


# The whole runs: the lines each count comes from, read here by their own printf formats.
RUNS = ("plain", "plain-quiet", "mtp", "mtp-quiet")
_TIMING = re.compile(r"^\s*(prompt eval|eval) time =\s*[\d.]+ ms /\s*(\d+) tokens", re.M)
_TOTALS = re.compile(r"^draft acceptance rate = [\d.]+ \(\s*(\d+) accepted /\s*(\d+) "
                     r"generated\)", re.M)
_STATS = re.compile(r"^statistics mtp: .*#gen tokens = (\d+), #acc tokens = (\d+)", re.M)
# Each request's common prefix with its slot (`======== Cache: … n_past`): seed 1's question
# shares 24 tokens with seed 0's conversation, and re-processes them (every checkpoint of the
# slot lies past them); the last request finds its conversation in the prompt cache.
KEPT = [0, 450, 620, 24, 728]


def log_text(name: str) -> str:
    """A fixture's log as text."""
    return gzip.decompress((FIXTURES / f"{name}.log.gz").read_bytes()).decode()


@pytest.mark.parametrize("name", [*RUNS, "draft-model"])
def test_every_line_of_a_whole_run_is_known_and_its_build_read(name: str) -> None:
    f = read_file(FIXTURES / f"{name}.log.gz")
    [run] = f.runs
    assert f.unknown == 0, f.unknown_shapes()
    assert f.parsed + f.skipped == f.lines == log_text(name).count("\n")
    assert run.server.build == "build 4840 (8337e4cd3)" and run.server.structured_log


@pytest.mark.parametrize("name", RUNS)
def test_each_request_is_a_turn_with_the_counts_its_lines_say(name: str) -> None:
    text = log_text(name)
    prefill = [int(n) for phase, n in _TIMING.findall(text) if phase == "prompt eval"]
    generated = [int(n) for phase, n in _TIMING.findall(text) if phase == "eval"]
    answers = read_responses(FIXTURES / f"{name}.responses.json").facts
    reading = read_file(FIXTURES / f"{name}.log.gz").only()
    alone = record_log(reading, MemoryJournal())
    assert len(alone.turns) == len(answers) == 5 and alone.violations == 0
    assert [t.prefill_tokens for t in alone.turns] == prefill
    assert [t.generated_tokens for t in alone.turns] == generated == [32] * 5
    assert [t.kept_tokens for t in alone.turns] == KEPT
    assert [t.reprefill_tokens for t in alone.turns] == [0, 0, 0, 24, 0]
    # The prompt's size: -v names it; without, no line does (unknown, not 0).
    verbose = not name.endswith("-quiet")
    assert [t.prompt_tokens for t in alone.turns] == (
        [a.prompt_tokens for a in answers] if verbose else [None] * 5)
    # With the answers, each matches its turn and agrees with it.
    both = record_log(reading, MemoryJournal(), responses=answers)
    assert both.responses_matched == 5 and both.violations == 0
    assert [t.prompt_tokens for t in both.turns] == [a.prompt_tokens for a in answers]


@pytest.mark.parametrize("name", ["mtp", "mtp-quiet"])
def test_mtp_drafted_and_accepted_are_its_totals(name: str) -> None:
    text = log_text(name)
    reading = read_file(FIXTURES / f"{name}.log.gz").only()
    result = record_log(reading, MemoryJournal())
    assert reading.server.spec_types == ["draft-mtp"]
    assert [(t.drafted, t.accepted) for t in result.turns] == [
        (int(gen), int(acc)) for acc, gen in _TOTALS.findall(text)]
    assert sum(t.drafted for t in result.turns) == 407  # 72 + 79 + 86 + 86 + 84
    # The drafter's own cumulative statistics, as its last line prints them.
    stats = result.fold.tasks[-1].spec_stats["mtp"]
    assert (stats.gen_tokens, stats.acc_tokens) == tuple(map(int, _STATS.findall(text)[-1]))


@pytest.mark.parametrize("name", RUNS)
def test_a_run_ends_as_its_lines_show(name: str) -> None:
    # SIGTERM stopped each; only -v prints a line as it stops.
    run = read_file(FIXTURES / f"{name}.log.gz").only()
    assert run.ending is (RunEnd.LOG_ENDS if name.endswith("-quiet") else RunEnd.SHUTDOWN)
    assert run.server.loaded and run.server.n_slots == 1 and run.server.n_ctx_slot == 4096


def test_the_refused_draft_model_is_a_run_that_never_served(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = FIXTURES / "draft-model.log.gz"
    run = read_file(log).only()
    assert run.records == [] and not run.server.loaded
    assert run.server.draft_model is not None and run.server.draft_model.endswith(
        "draft-f32.gguf")
    assert run.last_lines[-1].startswith(
        "common_speculative_load_draft_model: failed to load draft model")
    assert main(["import", "llama-server", str(log), "--db", str(tmp_path / "d.db")]) == 1
    assert "holds no request" in capsys.readouterr().err
