"""Mutation check: does the suite notice when the code is wrong?

Each named mutation below changes one behaviour of the watch, the fold, a postmortem
detector, the llama reader or the CLI (one or more exact snippets of one file replaced),
and names the tests that must then fail. The tool copies the checkout (its tracked and
untracked, not ignored, files) to a temporary folder once, runs those tests there
unmutated (they must pass), then, mutation by mutation, writes the change, runs the tests
and restores the file: a mutation the tests fail on is killed; one they pass is a
survivor, a test missing. Snippets are matched exactly, once each: a snippet the code no
longer holds is an error to fix in this table, never a silent skip.

    python tools/mutate.py                  # every mutation
    python tools/mutate.py NAME ...         # some
    python tools/mutate.py --list
    python tools/mutate.py --record docs/mutation.md

To add one: a `Mutation` in MUTATIONS, with a name, the file, (original, replacement)
pairs, the pytest arguments that must fail, and why the change matters. Exit status: 0
when every mutation run was killed, 1 when any survived or could not be applied.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 600  # a mutation that makes a loop spin is stopped here (and counts as killed)

WATCH = "tests/specledger/watch"
FOLLOWER = f"{WATCH}/test_follower.py"
LOOP = f"{WATCH}/test_loop.py"
INTERVALS = f"{WATCH}/intervals/test_loop.py"
FOLD = ("tests/eventlog/test_fold.py", "tests/eventlog/test_projection.py",
        "tests/eventlog/test_draft_profile.py", "tests/eventlog/test_turn_summaries.py")
POSTMORTEM = (*(f"tests/eventlog/test_postmortem{part}.py"
                for part in ("", "_inflation", "_stored", "_sampler")),
              "tests/adapters/llama/test_postmortem.py")


@dataclass(frozen=True)
class Mutation:
    """One deliberate bug: in `file`, each (original, replacement) of `edits` made (each
    original found exactly once), and the pytest arguments `tests` that must fail."""

    name: str
    file: str
    edits: tuple[tuple[str, str], ...]
    tests: tuple[str, ...]
    why: str


def m(name: str, file: str, original: str, replacement: str, tests: tuple[str, ...] | str,
      why: str) -> Mutation:
    """A mutation of one snippet."""
    return Mutation(name, file, ((original, replacement),),
                    (tests,) if isinstance(tests, str) else tests, why)


MUTATIONS: tuple[Mutation, ...] = (
    # The watch: its loop, metrics and bounds.
    m("resume-records-the-recorded-again", "specledger/watch/intake.py",
      "            if req.key in self._seen:", "            if False and req.key in self._seen:",
      LOOP, "a resumed watch records twice the requests it reads again"),
    m("position-accepted-off-by-one", "specledger/watch/metrics.py",
      "                if pos < rnd.accepted:", "                if pos <= rnd.accepted:",
      (LOOP, "-k", "metrics"), "one position too many counted accepted"),
    m("position-accepted-never-counted", "specledger/watch/metrics.py",
      "                    self.pos_accepted.labels(str(pos)).inc()", "                    pass",
      (LOOP, "-k", "metrics"), "acceptance per position is never counted"),
    m("drafter-unnamed", "specledger/watch/requests.py",
      'RoundTally(rnd.spec_type or "unnamed", ', 'RoundTally("unnamed", ',
      (LOOP, "-k", "metrics"), "drafts are counted under no drafter's name"),
    m("prune-running-sessions", "specledger/watch/prune.py",
      ".where(requests.c.log == log, sessions.c.status != SessionStatus.RUNNING.value)",
      ".where(requests.c.log == log)", f"{WATCH}/test_prune.py",
      "pruning deletes a session still being written"),
    m("keep-for-inverted", "specledger/watch/prune.py",
      "(cutoff is not None and when.astimezone(UTC) < cutoff)",
      "(cutoff is not None and when.astimezone(UTC) > cutoff)", f"{WATCH}/test_prune.py",
      "--keep-for prunes the young sessions, not the old"),
    m("keep-for-ignored", "specledger/watch/prune.py",
      "cutoff = datetime.now(UTC) - keep_for if keep_for is not None else None",
      "cutoff = None",
      (f"{WATCH}/test_prune.py", "tests/specledger/cli/test_watch.py", "-k", "keep"),
      "--keep-for prunes nothing"),
    m("duration-days-are-hours", "specledger/watch/prune.py",
      '_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}',
      '_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 3600}', f"{WATCH}/test_prune.py",
      "--keep-for 7d keeps 7 hours"),
    m("keep-one-more", "specledger/watch/prune.py", "(keep is not None and i >= keep)",
      "(keep is not None and i > keep)", (LOOP, "-k", "keep"), "--keep N keeps N + 1"),
    m("severity-floor-exclusive", "specledger/watch/findings.py",
      "SEVERITY_ORDER[f.severity] <= SEVERITY_ORDER[floor]",
      "SEVERITY_ORDER[f.severity] < SEVERITY_ORDER[floor]", LOOP,
      "a finding at exactly --severity is not printed"),
    m("no-header-on-resume", "specledger/watch/intake.py",
      "            merge_facts(self.stream.server, probe.server)", "            pass", LOOP,
      "a resumed watch forgets the server's start-up facts"),
    m("cursor-saved-only-with-a-request", "specledger/watch/loop.py",
      "if chunks and time.monotonic() - self._saved_at >= SAVE_EVERY_S:", "if False:", LOOP,
      "a watch killed while reading a backlog with no request done resumes nowhere"),
    m("gaps-said-only-at-the-end", "specledger/watch/loop.py",
      "        chunks = self.intake.poll()\n        self._say_gaps()\n",
      "        chunks = self.intake.poll()\n",
      LOOP, "what could not be read is said only when the watch stops"),
    m("restart-unseen", "specledger/watch/intake.py", "                if piece.restart:",
      "                if False:", LOOP,
      "a server restarted into the same file is folded as the one before it"),
    m("stream-runs-merged", "specledger/watch/stream.py",
      "restart = self._run is not None and run.out.index != self._run", "restart = False",
      (f"{WATCH}/test_stream.py", LOOP), "a new server run in the file is not said"),
    m("stream-records-kept", "specledger/watch/stream.py",
      "            run.out.records.clear()", "            pass", f"{WATCH}/test_stream.py",
      "a run's records are taken again with every piece"),
    m("resumed-slot-known-empty", "specledger/watch/requests.py",
      "            ledger.slot(task.slot).length = None", "            pass", WATCH,
      "a resumed watch takes a slot it never saw as empty"),
    m("recorded-request-takes-an-answer", "specledger/watch/requests.py",
      'answers = None if self.known(self.starts.get(task.task, (0, 0, ""))[2]) else (',
      "answers = None if False else (", f"{WATCH}/test_answers.py",
      "a request read again takes an answer meant for another"),
    m("ring-names-the-last-session", "specledger/watch/keep.py",
      "            if held is req:\n                session = sid", "            session = sid",
      f"{WATCH}/test_keep.py", "a finding the ring writes names another request's session"),
    m("ring-out-of-log-order", "specledger/watch/ring.py",
      "key=lambda h: (h[0].run, h[0].last_line))", "key=lambda h: h[0].last_line)",
      (LOOP, "-k", "ring"), "after a restart the ring writes the runs' requests interleaved"),
    m("interval-newest-not-held", "specledger/watch/intervals/live.py",
      "        if not whole and intervals:", "        if False:", INTERVALS,
      "an interval is written before the SpecDecoding line that completes it"),
    m("interval-run-read-again-kept-twice", "specledger/watch/intervals/intake.py",
      "self._earlier.pop(key, None)))", "None))", INTERVALS,
      "a watch resumed inside a run records the run twice"),
    m("interval-failure-said-at-the-end", "specledger/watch/intervals/loop.py",
      "            if settled:\n                self._failures",
      "            if False:\n                self._failures", INTERVALS,
      "a crash is said only when its run ends, not once its lines are read"),
    m("ring-unbounded", "specledger/watch/ring.py",
      "while len(q) > 1 and self._held[slot] > self.rounds:", "while False:", LOOP,
      "--ring holds every round"),
    m("stream-cuts-before-continuations", "specledger/watch/stream.py",
      "            cut = _last_start(self._buf)", "            pass", f"{WATCH}/test_stream.py",
      "a line's continuation lines are parsed apart from it"),
    # The follower: nothing it could read is lost, what it could not is said.
    m("rotation-read-once", "specledger/watch/follower.py",
      "            if not at_end or not self._queue:", "            if not self._queue:",
      (FOLLOWER, LOOP), "the issue's bug: a rotated file's backlog beyond one poll is dropped"),
    m("rotated-between-polls-unseen", "specledger/watch/follower.py",
      "if src.real in self._known or src.real == here.real or not low <= m <= high:",
      "if True:", FOLLOWER, "files rotated away between two polls are not read"),
    m("old-archives-read", "specledger/watch/follower.py",
      "if src.real in self._known or src.real == here.real or not low <= m <= high:",
      "if src.real in self._known or src.real == here.real or not m <= high:", FOLLOWER,
      "old rotated files are read again as new"),
    m("compressed-read", "specledger/watch/follower.py",
      " and n != stem and not n.endswith(PACKED)]", " and n != stem]", FOLLOWER,
      "compressed archives are read as log lines"),
    m("truncation-unseen", "specledger/watch/follower.py",
      "        if st.st_size < newest.size:", "        if False:", FOLLOWER,
      "a truncated file is taken for a rewritten one, or missed"),
    m("rewrite-unseen", "specledger/watch/follower.py",
      "        elif not newest.marked():", "        elif False:", FOLLOWER,
      "a server restarted in place past the offset is not seen"),
    m("copy-not-sought", "specledger/watch/follower.py",
      "        copy = self._copy_of_source(src)", "        copy = None", (FOLLOWER, LOOP),
      "copytruncate's copy is not read: the unread bytes are lost"),
    m("loss-unsaid", "specledger/watch/follower.py",
      "        if unread > 0:\n            self.gaps.append(",
      "        if False:\n            self.gaps.append(",
      (FOLLOWER, LOOP), "truncated bytes are lost without a word"),
    m("resume-without-digest", "specledger/watch/follower.py",
      "        return (src.size >= cursor.offset\n"
      "                and _sha(_tail(src.f, cursor.offset)) == cursor.tail_sha)",
      "        return src.size >= cursor.offset", FOLLOWER,
      "a cursor is used in a file rewritten in place"),
    m("resume-without-identity", "specledger/watch/follower.py",
      "if here is not None and here.real == ident and self._holds(here, cursor):",
      "if here is not None and self._holds(here, cursor):", FOLLOWER,
      "a cursor is used in another file"),
    m("resume-not-beside", "specledger/watch/follower.py",
      "old = self._sibling(lambda s: s.real == ident and self._holds(s, cursor))", "old = None",
      (FOLLOWER, LOOP), "a file rotated while no watch ran is not read on from the cursor"),
    m("long-line-stuck", "specledger/watch/follower.py",
      '        while not at_end and b"\\n" not in data:', "        while False:", FOLLOWER,
      "a line longer than the read limit is never read"),
    m("cut-last-line-dropped", "specledger/watch/follower.py",
      "            last = self._last_line(self._src)", "            last = None", FOLLOWER,
      "a rotated file's unterminated last line is dropped"),
    # The fold: each turn's counts.
    m("fold-restores", "eventlog/turn_fold.py", "    o.stats.restores += 1",
      "    o.stats.restores += 0", FOLD, "restores are not counted"),
    m("fold-trim", "eventlog/fold.py", "                del v.tokens[p[TRIM]:]",
      "                del v.tokens[p[TRIM] + 1:]", FOLD,
      "a rollback keeps one token too many"),
    m("fold-reprefill", "eventlog/turn_fold.py", '    st.reprefill_tokens += p.get("reprefill", 0)',
      "    st.reprefill_tokens += 0", FOLD, "re-prefilled tokens are not counted"),
    m("fold-answer-end", "eventlog/turn_fold.py",
      "o.answer_end = len(o.rec.committed) + o.round_eog + 1",
      "o.answer_end = len(o.rec.committed) + o.round_eog", FOLD,
      "the EOG token is counted as a stray token"),
    m("fold-profile-accepted", "eventlog/turn_fold.py",
      "        o.rec.drafts.append((o.round_k, accepted))",
      "        o.rec.drafts.append((o.round_k, 0))", FOLD,
      "the draft profile says no draft was accepted"),
    m("fold-rollback-time", "eventlog/turn_fold.py",
      "        o.stats.rollback_s += o.t - o.rollback_t",
      "        o.stats.rollback_s += 0.0", FOLD, "rollback time is not counted"),
    m("fold-reprefill-share", "eventlog/turn_fold.py",
      "st.reprefill_s += d * max(0, min(cut, repeated_end) - pos) / (cut - pos)",
      "st.reprefill_s += d", FOLD, "all of a prefill is charged as re-prefill"),
    m("fold-violations", "eventlog/turn_fold.py", "    o.stats.violations += 1",
      "    o.stats.violations += 0", FOLD, "invariant violations are not counted"),
    m("fold-livelocks", "eventlog/turn_fold.py", "    o.stats.livelocks += 1",
      "    o.stats.livelocks += 0", FOLD, "livelocks are not counted"),
    m("fold-kept", "eventlog/turn_fold.py", '    st.kept_tokens = p.get("kept", 0)',
      "    st.kept_tokens = 0", FOLD, "the kept prefix is lost"),
    m("fold-slot-sums-one-turn", "eventlog/records.py",
      "            setattr(earlier, name, getattr(earlier, name) + getattr(latest, name))",
      "            setattr(earlier, name, getattr(latest, name))", FOLD,
      "a slot's view sums only its last two turns"),
    # The postmortem's detectors (eog.py, advice.py and unknowns.py are being redesigned).
    m("collapse-one-round-longer", "eventlog/postmortem/acceptance.py",
      "if s is not None and s.rounds >= self.min_streak:",
      "if s is not None and s.rounds > self.min_streak:", POSTMORTEM,
      "a streak of exactly the minimum is not reported"),
    m("collapse-not-broken", "eventlog/postmortem/acceptance.py",
      "            if accepted:\n                if slot in streaks:",
      "            if accepted > 1:\n                if slot in streaks:", POSTMORTEM,
      "a round accepting one draft does not end a streak"),
    m("contamination-unseen", "eventlog/postmortem/contamination.py",
      "            if rejected > 0 and row[SOURCE] == reject:", "            if False:",
      POSTMORTEM, "a reject straight to commit is not found"),
    m("draft-ckpt-every-turn", "eventlog/postmortem/draft_ckpt.py",
      "self._request_start[row[SLOT]] = row[TURN] > 1",
      "self._request_start[row[SLOT]] = row[TURN] >= 1", POSTMORTEM,
      "the first turn counts as a request start with a draft checkpoint"),
    m("draft-sizes-any-short", "eventlog/postmortem/draft_sizes.py",
      "short = [e for e in self.saves if e.detail < full - draft / 2]",
      "short = [e for e in self.saves if e.detail < full]", POSTMORTEM,
      "a checkpoint a little short of full is taken for a missing draft state"),
    m("inflation-rejected-uncounted", "eventlog/postmortem/inflation.py",
      "turn.rejected += max(0, turn.drafted.get(row[ROUND], 0) - replayed)",
      "turn.rejected += 0", POSTMORTEM, "the drafts a replay left out are not counted"),
    m("inflation-any-difference", "eventlog/postmortem/inflation.py",
      "if core is None or _diff(core.detail) != turn.restores:", "if core is None:",
      POSTMORTEM, "any counter difference is blamed on the inflation bug"),
    m("storm-first-restore", "eventlog/postmortem/storms.py",
      "            if n > 1:\n                if r.repeats < 2:",
      "            if n > 2:\n                if r.repeats < 2:", POSTMORTEM,
      "a position restored twice is no storm"),
    m("reference-always-equal", "eventlog/postmortem/reference.py",
      "        if got == want:", "        if True:", POSTMORTEM,
      "a differing answer is never found"),
    m("sampler-loose", "eventlog/postmortem/sampler.py",
      "abs(float(a) - float(b)) > TOLERANCE + 1e-9", "abs(float(a) - float(b)) > 1.0",
      POSTMORTEM, "a sampler parameter off by less than 1 passes"),
    m("violations-all-explained", "eventlog/postmortem/violations.py",
      '        elif v["invariant"] not in _EXPLAINED:', "        elif False:", POSTMORTEM,
      "unexplained invariant violations are not reported"),
    # The llama reader, outside the files being redesigned for issue 39.
    m("crosscheck-accepted-unchecked", "adapters/llama/ledger/crosscheck.py",
      "            if engine != ledger:",
      '            if engine != ledger and check != "accepted tokens":',
      ("tests/adapters/llama/test_build_fixtures.py", "-k", "inflation"),
      "print_timing's accepted count is not checked against the rounds"),
    m("crosscheck-replay-correction", "adapters/llama/ledger/crosscheck.py",
      "    if rnd.restores and n_accepted > 0:", "    if False:",
      "tests/adapters/llama/test_build_fixtures.py",
      "a replay's re-verified correction is counted as an accepted draft"),
    m("responses-any-length", "adapters/llama/ledger/responses.py",
      "if (generated is None or f.predicted_n == generated)", "if (True)",
      ("tests/adapters/llama/ledger/test_responses.py", f"{WATCH}/test_answers.py"),
      "an answer of another length is matched to a request"),
    m("provenance-always-verbose", "adapters/llama/ledger/provenance.py",
      "    verbose = bool(kinds & {RecordKind.DRAFT, RecordKind.DECODE, RecordKind.TOKEN})",
      "    verbose = True", "tests/adapters/llama/ledger/test_provenance.py",
      "a log without -v claims the rounds"),
    m("logclock-one-span-more", "adapters/llama/calibration/clock.py",
      "    hi = bisect_left(spans, (end, -1.0))", "    hi = bisect_left(spans, (end, -1.0)) + 1",
      "tests/adapters/llama/calibration/test_clock.py",
      "a drafter pass after the round is charged to it"),
    # The CLI: what a user reads.
    m("internal-error-as-user-error", "specledger/cli/main.py",
      "        (INTERNAL_ERRORS, lambda e:", "        ((), lambda e:",
      "tests/specledger/cli/test_bug_report.py",
      "a state machine's refusal reaches users in its own words"),
    m("help-is-the-module-docstring", "specledger/cli/main.py", "description=DESCRIPTION,",
      "description=__doc__,", ("tests/specledger/cli/test_main.py", "-k", "help"),
      "--help opens with how the CLI module works"),
)


class Outcome(StrEnum):
    """What the tests did with one mutation."""

    KILLED = "killed"      # a test failed
    TIMEOUT = "timeout"    # the tests ran past TIMEOUT_S (a loop that never ends): killed
    SURVIVED = "survived"  # every test passed: a test is missing
    ERROR = "error"        # pytest could not run the tests (collection, usage): fix the table


@dataclass(frozen=True)
class Result:
    """One mutation's outcome and how long its tests took."""

    mutation: Mutation
    outcome: Outcome
    seconds: float

    @property
    def killed(self) -> bool:
        """Whether the tests noticed."""
        return self.outcome in (Outcome.KILLED, Outcome.TIMEOUT)


class TableError(Exception):
    """A mutation that does not apply to the code as it is."""


def mutated(text: str, mutation: Mutation) -> str:
    """`text` with the mutation's edits made, each original found exactly once."""
    for original, replacement in mutation.edits:
        count = text.count(original)
        if count != 1:
            raise TableError(f"{mutation.name}: {mutation.file} holds its snippet {count} "
                             f"times, not once: {original.strip()[:60]!r}")
        text = text.replace(original, replacement)
    return text


def copy_checkout(dest: Path) -> None:
    """The checkout's tracked and untracked (not ignored) files, copied under `dest`."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def corpus_env() -> dict[str, str]:
    """The real-log corpus beside the checkout (../shared/real-logs), named for the copy's
    tests: beside a temporary copy there is none."""
    root = Path(os.environ.get("SPECLEDGER_REAL_LOGS_ROOT", ROOT.parent / "shared" / "real-logs"))
    return {"SPECLEDGER_REAL_LOGS_ROOT": str(root),
            "SPECLEDGER_REAL_LOGS": os.environ.get("SPECLEDGER_REAL_LOGS",
                                                   str(root / "llama-server"))}


def run_tests(tree: Path, tests: tuple[str, ...]) -> tuple[int | None, float, str]:
    """pytest's exit status on `tests` in `tree` (None: past TIMEOUT_S), the seconds it
    took, and the end of what it printed."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1",
           "OMP_NUM_THREADS": "1", **corpus_env()}
    start = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p",
                               "no:cacheprovider", *tests], cwd=tree, env=env,
                              capture_output=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - start, ""
    said = (done.stdout + done.stderr).decode(errors="replace").strip().splitlines()
    return done.returncode, time.monotonic() - start, "\n".join(said[-15:])


def outcome_of(status: int | None) -> Outcome:
    """pytest's exit status as an outcome (1: tests failed; 2-5: could not run them)."""
    if status is None:
        return Outcome.TIMEOUT
    return {0: Outcome.SURVIVED, 1: Outcome.KILLED}.get(status, Outcome.ERROR)


def run(mutations: list[Mutation], say: Callable[[str], None]) -> list[Result]:
    """Every mutation tried in a copy of the checkout, after its tests passed unmutated."""
    with tempfile.TemporaryDirectory(prefix="specledger-mutate-") as tmp:
        tree = Path(tmp)
        copy_checkout(tree)
        originals = {mu.file: (tree / mu.file).read_text() for mu in mutations}
        for mu in mutations:
            mutated(originals[mu.file], mu)  # every snippet checked before anything runs
        tests = tuple(dict.fromkeys(t for mu in mutations for t in mu.tests
                                    if not t.startswith("-") and "::" not in t
                                    and t not in _k_args(mu)))
        status, seconds, said = run_tests(tree, tests)
        if status != 0:
            raise TableError(f"the tests fail unmutated (pytest exit {status}):\n{said}")
        say(f"unmutated: {len(tests)} test file(s) pass ({seconds:.0f} s)")
        results = []
        for mu in mutations:
            path = tree / mu.file
            path.write_text(mutated(originals[mu.file], mu))
            try:
                status, seconds, _ = run_tests(tree, mu.tests)
            finally:
                path.write_text(originals[mu.file])
            result = Result(mu, outcome_of(status), seconds)
            say(f"{result.outcome.value:8} {mu.name} ({seconds:.0f} s)")
            results.append(result)
    return results


def _k_args(mu: Mutation) -> set[str]:
    """The values of `-k` in a mutation's pytest arguments."""
    return {mu.tests[i + 1] for i, t in enumerate(mu.tests[:-1]) if t == "-k"}


def markdown(results: list[Result]) -> str:
    """The results as docs/mutation.md."""
    killed = sum(r.killed for r in results)
    rows = "\n".join(f"| `{r.mutation.name}` | `{r.mutation.file}` | {r.mutation.why} | "
                     f"{r.outcome.value} | {r.seconds:.0f} |" for r in results)
    return (
        "# Mutation check\n\n"
        "`python tools/mutate.py` makes each deliberate bug below in a copy of the checkout "
        "and runs the tests named for it (`tools/mutate.py` lists them); a bug the tests do "
        "not fail on is a survivor: a test is missing. Written by `python tools/mutate.py "
        "--record docs/mutation.md`.\n\n"
        f"**Score: {killed} of {len(results)} killed"
        f" ({100 * killed / len(results):.0f}%), {len(results) - killed} survivor(s).**\n\n"
        "| mutation | file | the bug | outcome | test s |\n|---|---|---|---|---|\n"
        f"{rows}\n")


def main(argv: list[str] | None = None) -> int:
    """Run the named mutations (all by default); 0 when every one was killed."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", metavar="NAME", help="mutations to run (default: all)")
    p.add_argument("--list", action="store_true", help="list the mutations and stop")
    p.add_argument("--record", type=Path, metavar="FILE",
                   help="write the results as markdown to FILE (docs/mutation.md)")
    args = p.parse_args(argv)
    known = {mu.name: mu for mu in MUTATIONS}
    if len(known) != len(MUTATIONS):
        raise SystemExit("tools/mutate.py: two mutations share a name")
    if args.list:
        for mu in MUTATIONS:
            print(f"{mu.name:36} {mu.file:40} {mu.why}")
        return 0
    unknown = [n for n in args.names if n not in known]
    if unknown:
        raise SystemExit(f"tools/mutate.py: no mutation named {unknown[0]!r} (--list)")
    chosen = [known[n] for n in args.names] or list(MUTATIONS)
    try:
        results = run(chosen, print)
    except TableError as exc:
        print(f"tools/mutate.py: {exc}", file=sys.stderr)
        return 1
    survivors = [r for r in results if not r.killed]
    print(f"{len(results) - len(survivors)} of {len(results)} killed"
          + "".join(f"\n  {r.outcome.value}: {r.mutation.name} ({r.mutation.why})"
                    for r in survivors))
    if args.record is not None:
        args.record.write_text(markdown(results))
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
