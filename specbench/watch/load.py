"""A llama-server under load, watched: the scenario `specledger watch`'s live test (short)
and `specledger bench watch` (long) both run.

The server runs the shipped target with its MTP head, `-np 2` (two slots serving at once),
`-v` with timestamps to a log file. Concurrent `openai` clients (loopback only, a bounded
number, each for a bounded time) hold two-turn conversations; every third one sends its
first answer back less its last characters, an edited history the server must prefill
again. Between phases the log is rotated (renamed, and a new server writes a new file at
the path) and the server restarted in place (the path reopened with O_TRUNC). Each client
keeps its own list of what it was answered, to compare with the ledger."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from adapters.llama.server.conversation import ask
from adapters.llama.server.options import Drafter, ServerOptions, server_args
from adapters.process import HOST, free_port, stop_group
from adapters.protocol import Sampling
from engine.errors import BackendError

EDIT_EVERY = 3  # every third conversation edits its history
EDIT_CHARS = 6  # how much of the first answer the edited history drops
QUESTIONS = ("Name three prime numbers.", "What is a hash table?", "Describe a river.",
             "Why is the sky blue?", "Count from one to five.", "What does a compiler do?",
             "Give a word that rhymes with cat.", "What is the capital of France?")


@dataclass(frozen=True)
class Answered:
    """One request as its client saw it: the prompt and completion tokens the server
    reported, when the answer arrived (wall clock, seconds since the epoch), and whether
    it was the edited turn."""

    prompt_tokens: int
    completion_tokens: int
    done_at: float
    edited: bool


@dataclass
class Phase:
    """One server's stretch of the run: the requests answered and the tokens per second
    the clients saw over it (completion tokens over the wall time)."""

    answered: list[Answered] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def tok_s(self) -> float:
        """Completion tokens per wall second, all clients together."""
        return sum(a.completion_tokens for a in self.answered) / self.seconds


def _get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except OSError:
        return 0, ""


@dataclass(frozen=True)
class Served:
    """A running server: its port, and the wall time it was started at (its log's times
    count from then, to within the process's start-up)."""

    port: int
    started_at: float

    def wall(self, log_t: float) -> float:
        """The wall time of a line its log stamped `log_t`."""
        return self.started_at + log_t


@contextmanager
def llama_server(binary: Path, model: Path, log: Path, slots: int = 2,
                 threads: int = 1) -> Iterator[Served]:
    """llama-server on `model` with `slots` slots, its log written to `log` (opened with
    O_TRUNC, as a restarted server does); yields it once `/health` answers."""
    port = free_port()
    opts = ServerOptions(model=model, drafters=(Drafter.MTP,), draft_max=4, threads=threads)
    args = server_args(opts, port)
    args[args.index("-np") + 1] = str(slots)
    started_at = time.time()
    with log.open("wb") as out:
        proc = subprocess.Popen([str(binary), *args], stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while _get(f"http://{HOST}:{port}/health")[0] != 200:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise BackendError(f"llama-server did not come up (log {log})")
            time.sleep(0.1)
        yield Served(port, started_at)
    finally:
        stop_group(proc, 30)


def drive(port: int, clients: int, seconds: float, max_tokens: int = 16,
          think_s: float = 0.0, second_turn: bool = True) -> Phase:
    """`clients` concurrent conversations against the server for about `seconds` (a
    conversation begun is finished), each client pausing `think_s` after each answer as
    a user reads it; without `second_turn`, one question each (no history to prefill
    again); what each request was answered."""
    import openai

    sampling = Sampling(temperature=0.0, top_k=1, top_p=1.0, seed=0, max_tokens=max_tokens)
    phase, lock = Phase(), threading.Lock()
    start = time.monotonic()
    deadline = start + seconds
    counter = iter(range(1 << 30))

    def client() -> None:
        api = openai.OpenAI(base_url=f"http://{HOST}:{port}/v1", api_key="none",
                            max_retries=0, timeout=120.0)
        while time.monotonic() < deadline:
            with lock:
                n = next(counter)
            edited = n % EDIT_EVERY == EDIT_EVERY - 1
            first = f"Conversation {n}. {QUESTIONS[n % len(QUESTIONS)]}"
            messages = [{"role": "user", "content": first}]
            answer, doc = ask(api, sampling, messages, stream=False)
            got = [_answered(doc, False)]
            time.sleep(think_s)
            if second_turn:
                kept = answer[:-EDIT_CHARS] if edited and len(answer) > EDIT_CHARS else answer
                messages += [{"role": "assistant", "content": kept},
                             {"role": "user", "content": QUESTIONS[(n + 1) % len(QUESTIONS)]}]
                _, doc = ask(api, sampling, messages, stream=False)
                got.append(_answered(doc, edited))
            with lock:
                phase.answered += got
            if second_turn:
                time.sleep(think_s)

    threads = [threading.Thread(target=client, name=f"client-{i}") for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    phase.seconds = time.monotonic() - start
    return phase


def _answered(doc: dict[str, Any], edited: bool) -> Answered:
    usage = doc.get("usage") or {}
    return Answered(int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)),
                    time.time(), edited)


@dataclass
class WatchProcess:
    """A `specledger watch --json` child: each line it printed, with when it arrived."""

    proc: subprocess.Popen[str]
    lines: list[tuple[float, dict[str, Any]]] = field(default_factory=list)
    _reader: threading.Thread | None = None

    def read(self, stream: IO[str]) -> None:
        """Collect the child's JSON lines as they come."""
        for line in stream:
            if line.strip():
                self.lines.append((time.time(), json.loads(line)))

    @property
    def findings(self) -> list[tuple[float, dict[str, Any]]]:
        """(arrival time, finding) for each finding printed."""
        return [(t, d) for t, d in self.lines if "kind" in d]

    def __enter__(self) -> "WatchProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        """Kill the child if it is still running (a run that failed before `stop`)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self, timeout: float = 60.0) -> dict[str, Any]:
        """SIGTERM, wait; the summary it printed."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout)
        if self._reader is not None:
            self._reader.join(timeout)
        if self.proc.returncode != 0:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise BackendError(f"specledger watch exited {self.proc.returncode}: {err}")
        return next(d["summary"] for _, d in reversed(self.lines) if "summary" in d)


def start_watch(log: Path, db: str, *extra: str) -> WatchProcess:
    """`specledger watch --llama-log LOG --db DB --json EXTRA...` as a child process."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "specledger", "watch", "--llama-log",
                             str(log), "--db", db, "--json", *extra], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    watch = WatchProcess(proc)
    assert proc.stdout is not None
    watch._reader = threading.Thread(target=watch.read, args=(proc.stdout,), daemon=True)
    watch._reader.start()
    return watch


def scrape(port: int) -> dict[str, float]:
    """The watch's samples, by name and labels (`name{k="v",...}`)."""
    from prometheus_client.parser import text_string_to_metric_families

    status, text = _get(f"http://{HOST}:{port}/metrics")
    if status != 200:
        raise BackendError(f"no metrics at {HOST}:{port} (status {status})")
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


def wait_recorded(count: Callable[[], int], n: int, timeout_s: float = 120.0) -> float:
    """Wait until `count()` reaches `n`; the seconds it took."""
    start = time.monotonic()
    while count() < n:
        if time.monotonic() - start > timeout_s:
            raise BackendError(f"the watch recorded {count()} of {n} requests in "
                               f"{timeout_s:.0f} s")
        time.sleep(0.05)
    return time.monotonic() - start


def cpu_s(pid: int) -> float:
    """The CPU seconds (user and system) a process has used so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    """A process's resident memory now, in MiB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise BackendError(f"no VmRSS for pid {pid}")
