"""Write the two llama-server logs of tests/adapters/llama/fixtures/reports/: incidents that
cannot happen on a CPU, built from the reports' own log lines. THESE LOGS ARE NOT
CAPTURED RUNS: every line is a real 0.3.36 -v line, but the loop in them is the reports'.

The replay re-verification livelock (llama.cpp #28060) and ngram-mod's replay loop
(#23268, PR 25819) need a replay whose verification disagrees with the first one, i.e.
logits that depend on the batch shape (Vulkan, CUDA); on a CPU the replay verifies as the
first verification did (docs/llama-incidents.md, `bench incidents`). The reports:

- https://github.com/ggml-org/llama.cpp/issues/28060 and
  https://github.com/ggml-org/llama.cpp/pull/28061 (the ROCmFPX measurement quoted there):
  5441 `generate_draft` lines against 5362 `restoring speculative checkpoint` lines for
  322 tokens, every iteration `generate_draft: id=256, #tokens=101, #draft=2,
  pos_next=101` then `restoring speculative checkpoint (pos_min = 100, pos_max = 100,
  ...)`: a replay of 2 drafts at one position, rejected and restored again, until the
  server was killed.
- https://github.com/ggml-org/llama.cpp/pull/25819 (for
  https://github.com/ggml-org/llama.cpp/issues/23268): `VERIFY_FAIL: idx=20 draft=63 ...`
  then `ROLLBACK: streak = 2, spec_draft = 21 tokens` at one `n_past`: the replay rejected
  a second time at the same position, after which the loop ended on its own.

How the logs are made: the real 0.3.36 capture `ngram-mod.log.gz` (2 requests, ngram-mod,
draft 4) up to its first speculative-checkpoint restore and the replay draft after it (a
replay of 2 drafts, as in the report: `#draft=2`), then that restore and replay draft
(its 0.3.36 lines: `restoring speculative checkpoint (...)`, the queue lines, `generate_draft`)
repeated, the timestamps moved on by the block's own duration each time:

- `livelock-28060.log.gz`: repeated until the position has 5362 restores (the report's
  count), and the log ends there, as the report's server did when it was killed.
- `storm-25819.log.gz`: 2 restores at the position (PR 25819's `streak = 2`), then the
  rest of the real log: the replay agreed and the request finished.

The position and token are the capture's (slot at 421 tokens, `pos_min = 420`), not the
report's (101): the report's lines need a slot of 101 tokens, the capture's prompt is
longer. PR 25819's own lines (`VERIFY_FAIL`, `ROLLBACK`) come from its debug patch, which
no build prints; its restore and replay show as the lines above. Run:
`.venv/bin/python tools/report_fixtures.py` (rewrites both files, byte for byte).
"""

import gzip
import re
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "tests/adapters/llama/fixtures"
OUT = FIXTURES / "reports"
BASE = FIXTURES / "ngram-mod.log.gz"

LIVELOCK_RESTORES = 5362  # #28060 / PR 28061: restores before the server was killed
STORM_RESTORES = 2        # PR 25819: `ROLLBACK: streak = 2`

_STAMP = re.compile(r"^(\d+)\.(\d{2})\.(\d{3})\.(\d{3}) ")


def _micros(line: str) -> int:
    m = _STAMP.match(line)
    assert m is not None, line
    mins, secs, ms, us = (int(g) for g in m.groups())
    return ((mins * 60 + secs) * 1000 + ms) * 1000 + us


def _shifted(line: str, by: int) -> str:
    """The line with its timestamp (`M.ss.mmm.uuu`) moved on by `by` microseconds."""
    t = _micros(line) + by
    mins, rest = divmod(t, 60_000_000)
    secs, rest = divmod(rest, 1_000_000)
    ms, us = divmod(rest, 1000)
    return f"{mins}.{secs:02d}.{ms:03d}.{us:03d} " + line[_STAMP.match(line).end():]  # type: ignore[union-attr]


def loop_at_first_restore(lines: list[str], restores: int, *, keep_rest: bool) -> list[str]:
    """`lines` with its first restore and the replay draft after it repeated until that
    position has `restores` restores; the rest of the log after them, or (not
    `keep_rest`) nothing: the log ends inside the loop."""
    start = next(i for i, line in enumerate(lines) if "restoring speculative checkpoint" in line)
    end = next(i for i in range(start, len(lines)) if "generate_draft:" in lines[i]) + 1
    block = lines[start:end]
    step = _micros(lines[end]) - _micros(lines[start])  # the restore to the next verify
    out = lines[:end]
    for k in range(1, restores):
        out += [_shifted(line, k * step) for line in block]
    if keep_rest:
        out += [_shifted(line, (restores - 1) * step) if _STAMP.match(line) else line
                for line in lines[end:]]
    return out


def write(out: Path) -> list[Path]:
    """Write both logs into `out`; their paths."""
    lines = gzip.decompress(BASE.read_bytes()).decode(errors="surrogateescape").split("\n")
    out.mkdir(exist_ok=True)
    paths = []
    for name, restores, keep_rest in (("livelock-28060", LIVELOCK_RESTORES, False),
                                      ("storm-25819", STORM_RESTORES, True)):
        text = "\n".join(loop_at_first_restore(lines, restores, keep_rest=keep_rest))
        if not keep_rest:
            text += "\n"
        path = out / f"{name}.log.gz"
        # mtime 0: the same bytes on every run.
        path.write_bytes(gzip.compress(text.encode(errors="surrogateescape"), mtime=0))
        paths.append(path)
    return paths


def main() -> None:
    """Write both logs into tests/adapters/llama/fixtures/reports/."""
    for path in write(OUT):
        print(path)


if __name__ == "__main__":
    main()
