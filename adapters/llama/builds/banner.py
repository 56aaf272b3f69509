"""A server's banner as its log prints it, or as the reader stores it: the build number
and commit it names, and whose wording it is.

llama.cpp prints `build: 7966 (96045552c) with GNU ...` (before 0.3.24, -v),
`common_params_print_info: build 9219 (49b42c9c3) with ...`, `build_info: b484-2c4055912`
(and its answers' `system_fingerprint`), which the reader stores as `build N (commit)`;
ik_llama.cpp prints `version: 4763 (9992f6b5)`, its own numbering.
"""

import re
from dataclasses import dataclass
from enum import StrEnum


class Wording(StrEnum):
    """Whose banner it is, by its words alone."""

    LLAMA = "llama.cpp"        # llama.cpp's, or a fork's that kept them
    IK = "ik_llama.cpp"        # ik_llama.cpp's `version: N (commit)`


@dataclass(frozen=True)
class Banner:
    """The build number and short commit a banner names."""

    number: int
    commit: str
    wording: Wording


_WORDINGS: tuple[tuple[Wording, re.Pattern[str]], ...] = (
    (Wording.IK, re.compile(r"\bversion: *(\d+) *\(([0-9a-f]{7,40})\)")),
    (Wording.LLAMA, re.compile(r"\bbuild:? *(\d+) *\(([0-9a-f]{7,40})\)")),
    (Wording.LLAMA, re.compile(r"\bbuild_info: *b(\d+)-([0-9a-f]{7,40})\b")),
)


def parse_banner(text: str | None) -> Banner | None:
    """The banner in `text` (a log line, or the stored `build N (commit)`), or None."""
    for wording, pattern in _WORDINGS:
        m = pattern.search(text or "")
        if m is not None:
            return Banner(int(m.group(1)), m.group(2), wording)
    return None
