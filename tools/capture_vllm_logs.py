"""Capture the vLLM log fixtures of tests/adapters/vllm/log/fixtures/: one `specledger run
--backend vllm` session per verbosity (the shipped model, MTP drafting 2 tokens, the
held-out conversation of seed 0, 2 turns), its server logging its stats every second (so
every window of drafting is logged before the server stops), and write, per verbosity NAME:

    <out>/<NAME>.log.gz        the server's stdout+stderr, gzip, unchanged
    <out>/<NAME>.session.json  the session's acceptance figures (drafted and accepted
                               tokens, per turn and in all), as the run recorded them from
                               vLLM's per-request metrics

`default` runs vLLM at its default verbosity; `debug` at VLLM_LOGGING_LEVEL=DEBUG with
`--enable-log-requests`. Nothing in these files is typed by hand. Needs vLLM (`make vllm`).

    .venv/bin/python tools/capture_vllm_logs.py [--out DIR] [--only NAME ...]
"""

import argparse
import gzip
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from adapters.vllm.conversation import Conversation  # noqa: E402
from adapters.vllm.server import VllmServer  # noqa: E402
from engine.config import RunConfig  # noqa: E402
from specledger.runs.observed import observe, questions  # noqa: E402
from specledger.runs.vllm import VllmEngine  # noqa: E402

STATS_INTERVAL_S = 1.0
VERBOSITY = {"default": {}, "debug": {"log_level": "DEBUG", "log_requests": True}}
OUT = ROOT / "tests/adapters/vllm/log/fixtures"


class CaptureEngine(VllmEngine):
    """`run --backend vllm` whose server logs its stats every second, and which waits two
    of those seconds after the last answer, so the last window is logged too."""

    def __init__(self, config: RunConfig, verbosity: dict[str, object], log: Path) -> None:
        super().__init__(config)
        self.options = replace(self.options, stats_interval_s=STATS_INTERVAL_S, **verbosity)
        self.log = log

    def server(self) -> VllmServer:
        """The server, its log at the capture's path."""
        return VllmServer(self.options, self.log)

    def drive(self, server: VllmServer, asked: Sequence[str],
              on_answer: Callable[[int], None]) -> Conversation:
        """The conversation, then two stats intervals of quiet."""
        done = super().drive(server, asked, on_answer)
        time.sleep(2 * STATS_INTERVAL_S)
        return done


def capture(name: str, out: Path, work: Path) -> None:
    """Run one verbosity's session and write its two files."""
    config = RunConfig.from_dict({"backend": "vllm", "drafter": "mtp", "draft_max": 2,
                                  "turns": 2, "max_answer_tokens": 48, "seed": 0})
    log = work / f"{name}.log"
    done = observe(CaptureEngine(config, VERBOSITY[name], log), questions(config),
                   f"sqlite:///{work / 'capture.db'}")
    turns = [{"turn": t.turn, "drafted": t.drafted, "accepted": t.accepted,
              "generated_tokens": t.generated_tokens} for t in done.recording.turns]
    (out / f"{name}.log.gz").write_bytes(gzip.compress(log.read_bytes(), mtime=0))
    (out / f"{name}.session.json").write_text(json.dumps({
        "how": "tools/capture_vllm_logs.py", "drafter": "mtp", "draft_max": 2,
        "turns": turns, "drafted": sum(t["drafted"] for t in turns),
        "accepted": sum(t["accepted"] for t in turns)}, indent=1) + "\n")
    print(f"{name}: {log.stat().st_size} bytes of log, turns {turns}")


def main() -> None:
    """Capture each verbosity asked (default: both)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--only", nargs="*", choices=sorted(VERBOSITY), default=sorted(VERBOSITY))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        for name in args.only:
            capture(name, args.out, Path(work))


if __name__ == "__main__":
    main()
