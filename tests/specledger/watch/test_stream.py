"""A log read piece by piece, cut anywhere between lines, gives the records one reading
of the whole log gives (but the compute brackets only `calibrate` reads), numbered as
lines of the file; a line waits until the log shows it is whole."""

import gzip
import random
from pathlib import Path

import pytest

from adapters.llama.log.facts import ServerInfo
from adapters.llama.log.reader import parse_log, parse_text
from adapters.llama.log.records import RecordKind
from specledger.watch.stream import RecordStream, merge_facts

FIXTURES = Path(__file__).parents[2] / "adapters" / "llama" / "fixtures"


def fixture_bytes(name: str) -> bytes:
    """A captured llama-server log's bytes."""
    return gzip.decompress((FIXTURES / f"{name}.log.gz").read_bytes())


@pytest.mark.parametrize("name", ["two-slots", "chain-sampled", "eog-in-block", "quiet"])
@pytest.mark.parametrize("seed", [0, 1])
def test_pieces_give_the_records_of_the_whole_log(name: str, seed: int) -> None:
    data = fixture_bytes(name)
    whole = parse_log(data.decode("utf-8", errors="surrogateescape"))
    lines = data.split(b"\n")[:-1]
    rng = random.Random(seed)
    stream = RecordStream(settle_s=3600.0)  # never settles: only whole lines are taken
    got, pos, number = [], 0, 1
    i = 0
    while i < len(lines):
        n = rng.randint(1, 40)
        block = b"".join(ln + b"\n" for ln in lines[i:i + n])
        stream.feed(block, pos, number)
        pos, number, i = pos + len(block), number + n, i + n
        for piece in stream.take():
            got += piece.records
    for piece in stream.take(force=True):
        got += piece.records
    assert got == [r for r in whole.records if r.kind is not RecordKind.COMPUTE]
    assert stream.server.n_slots == whole.server.n_slots
    assert stream.server.implementations == whole.server.implementations
    assert stream.counts.lines == whole.lines


def test_task_starts_carry_their_byte_offsets() -> None:
    data = fixture_bytes("two-slots")
    stream = RecordStream(settle_s=0.0)
    half = data.rfind(b"\n", 0, len(data) // 2) + 1
    stream.feed(data[:half], 0, 1)
    stream.feed(data[half:], half, data[:half].count(b"\n") + 1)
    [piece] = stream.take()
    starts = [r for r in piece.records if r.kind is RecordKind.TASK_STARTED]
    assert len(starts) == 4
    for r in starts:
        at, raw = piece.starts[r.line]
        assert data[at:].split(b"\n", 1)[0] == raw
        assert data[:at].count(b"\n") + 1 == r.line


def test_the_last_line_waits_for_the_next_or_for_quiet() -> None:
    line = b"0.00.000.001 I slot launch_slot_: id  0 | task 0 | processing task, is_child = 0\n"
    stream = RecordStream(settle_s=3600.0)
    stream.feed(line, 0, 1)
    assert stream.take() == []  # its continuation lines could still come
    stream.feed(line.replace(b"task 0", b"task 1"), len(line), 2)
    assert [[r.task for r in p.records] for p in stream.take()] == [[0]]
    quiet = RecordStream(settle_s=0.0)
    quiet.feed(line, 0, 1)
    assert [[r.task for r in p.records] for p in quiet.take()] == [[0]]


@pytest.mark.parametrize("cut", ["inside the first run's end", "at the second run's start"])
def test_a_server_started_again_in_the_file_begins_a_piece_of_its_own(cut: str) -> None:
    """Two server runs appended to one file (a restart, `>> server.log`): each run's
    records come in pieces of their own, as the reader reads the whole file into two runs,
    and the second run's first piece says it restarted, wherever the pieces are cut."""
    one = fixture_bytes("two-slots")
    data = one * 2
    split = len(one) - 2000 if cut.startswith("inside") else len(one)
    split = data.rfind(b"\n", 0, split) + 1
    runs = parse_text(data.decode()).runs
    assert len(runs) == 2
    stream = RecordStream(settle_s=0.0)
    pieces = []
    for a, b in ((0, split), (split, len(data))):
        stream.feed(data[a:b], a, data[:a].count(b"\n") + 1)
        pieces += stream.take(force=True)
    assert [p.restart for p in pieces].count(True) == 1
    at = next(i for i, p in enumerate(pieces) if p.restart)
    for run, got in zip(runs, (pieces[:at], pieces[at:]), strict=True):
        assert [r for p in got for r in p.records] == [
            r for r in run.records if r.kind is not RecordKind.COMPUTE]
    assert pieces[at].server is not pieces[0].server
    assert pieces[at].server.n_slots == runs[1].server.n_slots == 2


def test_facts_merge_first_occurrence_wins() -> None:
    into = ServerInfo(build="b1", implementations=["draft-mtp"])
    merge_facts(into, ServerInfo(build="b2", n_slots=2, implementations=["ngram-mod",
                                                                          "draft-mtp"]))
    assert (into.build, into.n_slots, into.implementations) == ("b1", 2,
                                                                 ["draft-mtp", "ngram-mod"])
