"""The real log the package ships for the README's first example: the user's bytes, as
published, and `shipped:NAME` naming it (an unknown name lists the shipped ones)."""

import gzip
import hashlib
from pathlib import Path

import pytest

from adapters.llama.log.reader import LogFormatError
from adapters.llama.log.sources import expand, shipped

# The sha256 SOURCE.md gives: the text between the published file's ```log fences.
PUBLISHED = "22b9a608efd731bf97fd46b295014a7e1bc51118323c9baf0fcc11341e582dfe"


def test_the_shipped_log_is_the_published_one() -> None:
    data = gzip.decompress(shipped("shipped:rtx5090-2026-05-15").read_bytes())
    assert hashlib.sha256(data).hexdigest() == PUBLISHED
    assert data.count(b"\n") == 6687


def test_a_shipped_name_is_a_source_and_a_wrong_one_is_refused() -> None:
    [source] = expand([Path("shipped:rtx5090-2026-05-15")])
    assert source.parts[0].name == "rtx5090-2026-05-15.log.gz"
    with pytest.raises(LogFormatError, match="shipped:rtx5090-2026-05-15"):
        expand([Path("shipped:nope")])
