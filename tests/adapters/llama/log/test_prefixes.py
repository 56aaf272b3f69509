"""Any line prefix, one mechanism: a captured `-v` log behind the prefixes of the shippers
users run (journald, `kubectl logs --timestamps`, docker compose with colours and CRLF, a
router's `[pid]`, a mix of prefixed and plain lines) reads as the plain log does, record
for record; a restart into the same file is a second run, told apart by a new pid or a
startup line after the first run served. The prefixed logs are made here from the capture
(fixtures/mtp.log.gz), so every prefix is tested on real llama-server lines."""

from collections.abc import Callable
from dataclasses import replace

import pytest

from adapters.llama.log.reader import parse_text
from adapters.llama.log.records import Record
from adapters.llama.log.run import RunEnd
from tests.adapters.llama.log.test_reader import fixture_text

Wrap = Callable[[int, str], str]


def _journald(i: int, line: str) -> str:
    return f"Dec 07 15:{i // 60 % 60:02d}:{i % 60:02d} gpu-box llama-server.sh[4242]: {line}"


def _kubectl(i: int, line: str) -> str:
    return f"2026-12-07T15:24:{i % 60:02d}.{i:09d}Z {line}"


def _compose(i: int, line: str) -> str:
    return f"\x1b[36mllama-cpp-server  |\x1b[0m {line}\r"


def _router(i: int, line: str) -> str:
    return f"[53409] {line}"


def _mixed(i: int, line: str) -> str:
    return _kubectl(i, line) if i % 3 else line


WRAPS: dict[str, Wrap] = {"journald": _journald, "kubectl": _kubectl, "compose": _compose,
                          "router": _router, "mixed": _mixed}


def _wrapped(text: str, wrap: Wrap) -> str:
    return "".join(wrap(i, line) + "\n" for i, line in enumerate(text.splitlines()))


def _plain(records: list[Record]) -> list[Record]:
    """Records without the time a prefix may add where llama's own is off."""
    return [replace(r, t=None) for r in records]


@pytest.mark.parametrize("name", sorted(WRAPS))
def test_a_prefixed_log_reads_as_the_plain_one(name: str) -> None:
    text = fixture_text("mtp")
    plain = parse_text(text).only()
    log = parse_text(_wrapped(text, WRAPS[name]))
    [run] = log.runs
    assert log.lines == plain.lines and run.unknown == 0, run.unknown_examples
    assert (run.parsed, run.skipped) == (plain.parsed, plain.skipped)
    assert _plain(run.records) == _plain(plain.records)
    assert run.server == plain.server and log.prefixes


def test_a_wall_clock_prefix_times_lines_without_their_own() -> None:
    text = "".join(line.split(" ", 2)[2] + "\n" for line in fixture_text("mtp").splitlines()
                   if line[:1].isdigit())  # the log without llama's own time prefix
    timed = parse_text(_wrapped(text, _kubectl)).only()
    assert all(r.t is not None for r in timed.records)
    assert timed.wall_start is not None


def test_a_restart_under_a_new_pid_is_a_second_run() -> None:
    text = fixture_text("mtp")
    both = _wrapped(text, _journald) + _wrapped(text, _journald).replace("[4242]", "[4343]")
    log = parse_text(both)
    assert [r.pid for r in log.runs] == [4242, 4343]
    assert [r.ending for r in log.runs] == [RunEnd.SHUTDOWN, RunEnd.SHUTDOWN]
    assert log.runs[0].records == parse_text(text).only().records


def test_a_restart_without_a_pid_starts_at_its_first_startup_line() -> None:
    text = fixture_text("mtp")
    lines = text.count("\n")
    log = parse_text(text + text)
    assert [(r.first_line, r.last_line) for r in log.runs] == [(1, lines),
                                                               (lines + 1, 2 * lines)]
    assert [len(r.records) for r in log.runs] == [len(parse_text(text).only().records)] * 2


def test_a_run_that_stops_without_its_shutdown_died() -> None:
    text = fixture_text("mtp")
    cut = text[:text.index("cleaning up before exit")]
    cut = cut[:cut.rindex("\n") + 1]
    log = parse_text(cut + text)
    assert [r.ending for r in log.runs] == [RunEnd.DIED, RunEnd.SHUTDOWN]
