"""The SGLang log the package ships for the README is the corpus file its SOURCE.md names,
byte for byte, and `shipped:NAME` finds it (an unknown name lists the shipped ones)."""

import gzip
import hashlib
from pathlib import Path

import pytest

from adapters.sglang.log.reader import SHIPPED_DIR, SglangLogError, read_file, shipped, sources

NAME = "mtp-mamba-crash-27325"
SHA256 = "3dceac91dec7ee527c862fa3786c88577afbceba9cb5635ccd19e4c83b90b22b"


def test_the_shipped_log_is_the_corpus_file(corpus: Path) -> None:
    text = gzip.decompress((SHIPPED_DIR / f"{NAME}.log.gz").read_bytes())
    assert hashlib.sha256(text).hexdigest() == SHA256 == read_file(shipped(NAME)).sha256
    original = corpus / "sgl-project-sglang-27325-mtp-specv2-mamba-extrabuffer-nonetype-crash.log"
    assert text == original.read_bytes()
    assert SHA256 in (SHIPPED_DIR / "SOURCE.md").read_text()


def test_shipped_names_are_found_and_unknown_ones_listed() -> None:
    [src] = sources([Path(f"shipped:{NAME}")])
    assert src.name == f"shipped:{NAME}" and src.parts == (shipped(NAME),)
    with pytest.raises(SglangLogError, match=f"shipped: shipped:{NAME}"):
        shipped("shipped:nope")
