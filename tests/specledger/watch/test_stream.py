"""A log read piece by piece, cut anywhere between lines, gives the records one reading
of the whole log gives (but the compute brackets only `calibrate` reads), numbered as
lines of the file; a line waits until the log shows it is whole."""

import gzip
import random
from pathlib import Path

import pytest

from adapters.llama.log.facts import ServerInfo
from adapters.llama.log.reader import parse_log
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
        piece = stream.take()
        if piece is not None:
            got += piece.records
    last = stream.take(force=True)
    got += last.records if last is not None else []
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
    piece = stream.take()
    assert piece is not None
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
    assert stream.take() is None  # its continuation lines could still come
    stream.feed(line.replace(b"task 0", b"task 1"), len(line), 2)
    piece = stream.take()
    assert piece is not None and [r.task for r in piece.records] == [0]
    quiet = RecordStream(settle_s=0.0)
    quiet.feed(line, 0, 1)
    piece = quiet.take()
    assert piece is not None and [r.task for r in piece.records] == [0]


def test_facts_merge_first_occurrence_wins() -> None:
    into = ServerInfo(build="b1", implementations=["draft-mtp"])
    merge_facts(into, ServerInfo(build="b2", n_slots=2, implementations=["ngram-mod",
                                                                          "draft-mtp"]))
    assert (into.build, into.n_slots, into.implementations) == ("b1", 2,
                                                                 ["draft-mtp", "ngram-mod"])
