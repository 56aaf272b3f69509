"""One way every engine's reader takes a stream of lines: refusals (empty, binary, no
line of the engine's shape), the digest of the bytes, and a last line cut mid-write."""

import hashlib

import pytest

from adapters.logs.reading import LogKind, read_stream


class _Error(Exception):
    pass


KIND = LogKind("a test log", "the text file", "starts with `ok`", _Error)


class _Reader:
    """Keeps what it is fed, counts lines starting with `ok`."""

    def __init__(self, head: list[str]) -> None:
        self.head, self.fed, self.skipped, self.own = head, [], [], 0

    def feed(self, number: int, line: str) -> None:
        self.fed.append((number, line))
        self.own += line.startswith("ok")

    def skip(self, number: int) -> None:
        self.skipped.append(number)


def _read(data: list[bytes]) -> tuple[_Reader, object]:
    return read_stream(data, "f.log", KIND, _Reader, lambda r: r.own)


def test_lines_are_fed_in_order_and_a_cut_last_line_skipped() -> None:
    data = [b"ok one\n", b"other \xff\n", b"ok cut"]
    reader, read = _read(data)
    assert reader.head == ["ok one", "other \udcff", "ok cut"]
    assert reader.fed == [(1, "ok one"), (2, "other \udcff")] and reader.skipped == [3]
    assert (read.lines, read.partial_line) == (3, 3)
    assert read.sha256 == hashlib.sha256(b"".join(data)).hexdigest()


@pytest.mark.parametrize(("data", "said"), [
    ([], "f.log is not a test log: it is empty (0 lines)"),
    ([b"ok\x00\n"], "f.log is binary, not a test log (pass the text file)"),
    ([b"no\n", b"nor\n"], "f.log is not a test log: none of its 2 line(s) starts with `ok`"),
])
def test_what_is_not_the_engine_s_log_is_refused_in_one_line(data: list[bytes],
                                                              said: str) -> None:
    with pytest.raises(_Error) as raised:
        _read(data)
    assert str(raised.value) == said
