"""Capture whole ik_llama.cpp server runs as the fixtures of tests/adapters/llama/fixtures/ik/.

ik_llama.cpp is not a llama-cpp-python build, so specledger's llama backend cannot start it:
this script runs a llama-server binary built from ik_llama.cpp's source (its README says
how) on the shipped models' GGUF files (`specledger export gguf shipped:target`), one
scenario at a time, and per scenario NAME writes

    <out>/<NAME>.log.gz          the server's stdout+stderr, gzip, unchanged
    <out>/<NAME>.responses.json  the answers the client got, in request order

Each run is whole: the server starts, answers five requests with the `openai` client
(temperature 0; each request the whole history, see `converse_all`), and is stopped with
SIGTERM. A server that will not load the model is a result too: its log is
kept and its row says it refused. `capture.json` holds the rows (the README's table).

    .venv/bin/python tools/capture_ik_fixtures.py --server PATH/llama-server \
        --target target-f32.gguf --draft draft-f32.gguf [--only NAME ...]
"""

import argparse
import gzip
import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from adapters.llama.server.conversation import ask  # noqa: E402
from adapters.protocol import Messages, Sampling  # noqa: E402
from engine.config import RunConfig  # noqa: E402
from specledger.runs.observed import questions  # noqa: E402

OUT = ROOT / "tests" / "adapters" / "llama" / "fixtures" / "ik"
MAX_TOKENS = 32
# The flags of every scenario: one slot, one thread, ik's own cache types (it refuses an
# f32 V cache without flash attention: "V cache quantization requires flash_attn").
BASE = ("--host", "127.0.0.1", "-t", "1", "-tb", "1", "-c", "4096", "-np", "1")
_START_S = 180.0  # a 2-core machine shared with builds loads slowly
_STOP_S = 30.0


@dataclass(frozen=True)
class Scenario:
    """One fixture: its flags beyond BASE (the model's and the port's aside), what it
    shows, and whether it loads the shipped draft model too (`-md`)."""

    name: str
    flags: tuple[str, ...]
    shows: str
    draft_model: bool = False


SCENARIOS = (
    Scenario("plain", ("-v",), "no speculation, -v: every request's tasks, tokens, timings"),
    Scenario("plain-quiet", (), "no speculation, default verbosity: what a user's log holds"),
    Scenario("mtp", ("-v", "--spec-type", "mtp:n_max=4,p_min=0.0"),
             "MTP speculation (the target's nextn head), -v: every round"),
    Scenario("mtp-quiet", ("--spec-type", "mtp:n_max=4,p_min=0.0"),
             "MTP speculation at default verbosity"),
    Scenario("draft-model", ("--spec-type", "draft:n_max=4,p_min=0.0"),
             "the shipped draft model (-md) at default verbosity", draft_model=True),
)


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(proc: subprocess.Popen[bytes], port: int) -> bool:
    """Whether the server answers /health with 200 before it exits or the time is up."""
    deadline = time.monotonic() + _START_S
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    return False


def converse_all(port: int) -> list[dict[str, Any]]:
    """The held-out conversation of seed 0 (three turns, each extending the one before),
    seed 1's first question as a new conversation, then the fourth turn of seed 0's (its
    prefix is no longer the slot's, but in ik's prompt cache); the answers as the client
    got them."""
    from openai import OpenAI

    client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="specledger",
                    max_retries=0, timeout=300)
    sampling = Sampling(temperature=0.0, top_k=0, top_p=1.0, seed=0, max_tokens=MAX_TOKENS)
    first = questions(RunConfig(backend="llama", turns=4, seed=0))
    other = questions(RunConfig(backend="llama", turns=1, seed=1))
    answers: list[dict[str, Any]] = []
    history: Messages = []
    for messages, question in ((history, first[0]), (history, first[1]), (history, first[2]),
                               ([], other[0]), (history, first[3])):
        messages.append({"role": "user", "content": question})
        text, response = ask(client, sampling, messages, stream=False)
        messages.append({"role": "assistant", "content": text})
        answers.append(response)
    return answers


def capture(scenario: Scenario, server: Path, target: Path, draft: Path | None, out: Path
            ) -> dict[str, Any]:
    """Run one scenario whole; write its files; return its row."""
    port = free_port()
    argv = [str(server), "-m", str(target), "--port", str(port), *BASE, *scenario.flags]
    if scenario.draft_model:
        if draft is None:
            raise SystemExit(f"{scenario.name} needs --draft")
        argv += ["-md", str(draft)]
    responses: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "server.log"
        with log.open("wb") as sink:
            # cwd: the server writes a `llama.log` of its own where it runs.
            proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, cwd=tmp)
            try:
                loaded = wait_ready(proc, port)
                if loaded:
                    responses = converse_all(port)
                    time.sleep(1.0)  # the last answer's lines reach the log
            finally:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                    try:
                        proc.wait(timeout=_STOP_S)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
        data = log.read_bytes()
    out.mkdir(parents=True, exist_ok=True)
    log_gz = out / f"{scenario.name}.log.gz"
    log_gz.write_bytes(gzip.compress(data, mtime=0))
    (out / f"{scenario.name}.responses.json").write_text(json.dumps(responses, indent=1) + "\n")
    shown = [Path(a).name if a.endswith(".gguf") else a for a in argv[1:]]
    shown[shown.index("--port") + 1] = "PORT"
    return {"name": scenario.name, "shows": scenario.shows, "flags": " ".join(shown),
            "loaded": loaded, "requests": len(responses), "exit_code": proc.returncode,
            "log_bytes": len(data), "gz_bytes": log_gz.stat().st_size,
            "date": time.strftime("%Y-%m-%d", time.gmtime())}


def main(argv: list[str] | None = None) -> int:
    """Capture the scenarios asked for (default: all) and rewrite capture.json."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--server", type=Path, required=True, help="ik_llama.cpp's llama-server")
    p.add_argument("--target", type=Path, required=True, help="the target's GGUF file")
    p.add_argument("--draft", type=Path, default=None, help="the draft model's GGUF file")
    p.add_argument("--only", action="append", default=None, help="scenario names (repeatable)")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    meta_path = args.out / "capture.json"
    rows: dict[str, Any] = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    for scenario in SCENARIOS:
        if args.only and scenario.name not in args.only:
            continue
        print(f"{scenario.name} ...", flush=True)
        rows[scenario.name] = capture(scenario, args.server, args.target, args.draft, args.out)
        print(json.dumps(rows[scenario.name]), flush=True)
        meta_path.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
